"""The e2e suite under the deploy manifests' own identity (``LAHAR_E2E_SERVICE_ACCOUNT=1``).

The scheduler processes the suite starts then talk to the API server as the ServiceAccount of
``conf/deploy/`` with a token from the TokenRequest API, bound by ``conf/deploy/20-rbac.yaml``
(and the optional HyperNode discovery role) and nothing else; the suite's own calls keep the admin kubeconfig. Any request the role does
not grant is answered 403, which the scheduler logs; :func:`forbidden_lines` finds those lines
so that a case fails on them even where the scheduler recovered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.kube import ROOT, Kube, raw

DEPLOY = ROOT / "conf" / "deploy"
NAMESPACE = "lahar-system"
ACCOUNT = "lahar-scheduler"
LEASE = ("lahar-system", "lahar-scheduler")
"""The only Lease the deploy Role lets the scheduler read and renew."""

_MANIFESTS = ("00-namespace.yaml", "10-serviceaccount.yaml", "20-rbac.yaml",
              "optional/hypernode-discovery.yaml")
"""The deploy manifests applied; of the optional HyperNode discovery file only its role and
binding (one case runs discovery), not its ConfigMap."""
_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
          "RoleBinding")


def _apply(kube: Kube, document: dict[str, Any]) -> None:
    kind = document["kind"]
    namespace = document["metadata"].get("namespace", "")
    name = document["metadata"]["name"]
    rbac = client.RbacAuthorizationV1Api(kube.api)
    create, replace = {
        "Namespace": (lambda: kube.core.create_namespace(document), None),
        "ServiceAccount": (lambda: kube.core.create_namespaced_service_account(
            namespace, document), None),
        "ClusterRole": (lambda: rbac.create_cluster_role(document),
                        lambda: rbac.replace_cluster_role(name, document)),
        "ClusterRoleBinding": (lambda: rbac.create_cluster_role_binding(document),
                               lambda: rbac.replace_cluster_role_binding(name, document)),
        "Role": (lambda: rbac.create_namespaced_role(namespace, document),
                 lambda: rbac.replace_namespaced_role(name, namespace, document)),
        "RoleBinding": (lambda: rbac.create_namespaced_role_binding(namespace, document),
                        lambda: rbac.replace_namespaced_role_binding(name, namespace, document)),
    }[kind]
    try:
        create()
    except ApiException as error:
        if error.status != 409:
            raise
        if replace is not None:  # bring an older copy of the role to this checkout's
            replace()


def deploy_identity(kube: Kube, admin_kubeconfig: str, workdir: Path) -> str:
    """Apply the deploy namespace, ServiceAccount and RBAC, request a token for the account,
    and write a kubeconfig that uses it; returns that kubeconfig's path."""
    for manifest in _MANIFESTS:
        for document in yaml.safe_load_all((DEPLOY / manifest).read_text()):
            if document and document.get("kind") in _KINDS:
                _apply(kube, document)
    answer = raw(kube.core.create_namespaced_service_account_token, ACCOUNT, NAMESPACE, {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 7200}})
    token = answer["status"]["token"]
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())
    contexts = {entry["name"]: entry["context"] for entry in admin.get("contexts") or []}
    clusters = {entry["name"]: entry["cluster"] for entry in admin.get("clusters") or []}
    current = contexts.get(admin.get("current-context", "")) or next(iter(contexts.values()))
    cluster = dict(clusters[current["cluster"]])
    for key in ("certificate-authority",):  # a relative path is relative to the old file
        if key in cluster and not Path(cluster[key]).is_absolute():
            cluster[key] = str((Path(admin_kubeconfig).parent / cluster[key]).resolve())
    path = workdir / "service-account.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lahar",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "lahar", "context": {"cluster": "e2e", "user": ACCOUNT}}]}))
    return str(path)


def forbidden_lines(log_path: Path) -> list[str]:
    """The scheduler log's records that report an HTTP 403 (a request the role refused)."""
    found = []
    if not log_path.exists():
        return found
    for line in log_path.read_text(errors="replace").splitlines():
        lowered = line.lower()
        if "forbidden" in lowered or " 403" in lowered or '"status": 403' in lowered:
            found.append(line)
    return found
