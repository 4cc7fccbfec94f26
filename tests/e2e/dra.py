"""What the e2e DRA modules share: a cluster that keeps a pod's claims, ``resource.k8s.io/v1``
served, claims and pods in the 1.28 shape, the resourceclaim controller played, and
``lahar node-agent --dra`` as a process.

Kubernetes 1.34+ serves ``resource.k8s.io/v1`` itself. On older servers :func:`dra_api_served`
installs the test-only stand-ins of ``tests/e2e/dra-test-only-crds.yaml`` (same group, version,
kinds; never part of ``conf/deploy``), and pods use the 1.28–1.30 shape
(``spec.resourceClaims[].source``). Such a server has no resourceclaim controller for the
stand-ins, so the tests play it: :func:`claim_pod` creates each pod's claim from the template
(owned by the pod, annotated with its pod claim name) and writes the pod's
``status.resourceClaimStatuses``, as kube-controller-manager would; :func:`delete_pod` removes a
pod and then the claims it owns, as the garbage collector does once the pod is gone. A
1.28–1.30 server keeps ``spec.resourceClaims`` only with the ``DynamicResourceAllocation``
feature gate on; :func:`dra_cluster` uses the suite's cluster when it keeps the field, else
starts a control plane of its own with the gate (:mod:`tests.e2e.privateapi`, fake nodes), or
skips saying why.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from scheduler.api.podclaims import pod_claims, template_claim
from scheduler.cluster.kube.client import MERGE_PATCH, ApiError, KubeClient
from tests.e2e.conftest import Case, Settings, fake_kubelet_running, make_settings
from tests.e2e.kube import ROOT, Kube, env_flag, eventually, ignore_missing, make_pod, raw
from tests.e2e.privateapi import missing, private_apiserver

GROUP, VERSION = "resource.k8s.io", "v1"
CRDS = Path(__file__).with_name("dra-test-only-crds.yaml")
PLURALS = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
GATES = ("--feature-gates", "DRAConsumableCapacity=true")
AGENT_DRIVER = "gpu.lahar.dev"
"""``lahar node-agent --dra``'s default driver, the one of ``conf/deploy/dra``'s classes."""


def keeps_resource_claims(kubeconfig: str) -> bool:
    """Whether the server keeps a pod's ``spec.resourceClaims`` (a dry-run create)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lahar-e2e-probe"},
           "spec": {"containers": [{"name": "main", "image": "busybox",
                                    "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "source": {"resourceClaimName": "x"}}]}}
    client = KubeClient.from_flags(kubeconfig=kubeconfig, qps=50.0, burst=100)
    try:
        made = client.request_json("POST", "/api/v1/namespaces/default/pods",
                                   query={"dryRun": "All"}, body=pod)
        try:  # a server that ignores dryRun (the test double) made it
            client.request_json("DELETE", "/api/v1/namespaces/default/pods/lahar-e2e-probe")
        except ApiError as error:
            if error.status != 404:
                raise
    finally:
        client.close()
    return bool(made["spec"].get("resourceClaims"))


@contextlib.contextmanager
def dra_cluster(workdir: Path) -> Iterator[Settings]:
    """The suite's cluster when it keeps ``spec.resourceClaims``; else a private 1.28 control
    plane with the DynamicResourceAllocation gate (fake nodes), stopped at the end. Skips,
    saying why, when neither can be had."""
    kubeconfig = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if kubeconfig and keeps_resource_claims(kubeconfig):
        made = make_settings(kubeconfig, workdir, fake_nodes=env_flag("LAHAR_E2E_FAKE_NODES"))
        with fake_kubelet_running(made):
            yield made
        return
    if not kubeconfig and not env_flag("LAHAR_E2E_PRIVATE_APISERVER"):
        pytest.skip("KUBECONFIG is not set: the e2e suite needs a cluster "
                    "(or LAHAR_E2E_PRIVATE_APISERVER=1 for a control plane of its own)")
    why = missing()
    if why:
        pytest.skip(f"the cluster drops spec.resourceClaims and a private control plane with "
                    f"--feature-gates=DynamicResourceAllocation=true cannot be started: {why}")
    with private_apiserver(workdir / "apiserver",
                           extra_flags=["--feature-gates=DynamicResourceAllocation=true"]
                           ) as private:
        made = make_settings(private, workdir, fake_nodes=True)
        with fake_kubelet_running(made):
            yield made


@contextlib.contextmanager
def dra_api_served(kube: Kube) -> Iterator[None]:
    """``resource.k8s.io/v1`` served (the stand-in CRDs installed when the server lacks it),
    removed again at the end when installed here."""
    installed: list[str] = []
    if not all(kube.served(GROUP, VERSION, plural) for plural in PLURALS):
        for document in yaml.safe_load_all(CRDS.read_text()):
            if not document:
                continue
            try:
                raw(kube.extensions.create_custom_resource_definition, document)
                installed.append(document["metadata"]["name"])
            except ApiException as error:
                if error.status != 409:
                    raise
        for plural in PLURALS:
            eventually(lambda plural=plural: kube.served(GROUP, VERSION, plural) or None,  # type: ignore[misc]
                       timeout=60.0, what=f"{plural}.{GROUP} served")
    try:
        yield
    finally:
        for name in installed:
            ignore_missing(kube.extensions.delete_custom_resource_definition, name)


def create(case: Case, plural: str, obj: dict[str, Any], *, namespaced: bool) -> dict[str, Any]:
    """Create ``obj``, deleted again when the case ends (a bare API server has no namespace
    controller to do it)."""
    custom = case.kube.custom
    name = obj["metadata"]["name"]
    if namespaced:
        namespace = case.namespace
        made = raw(custom.create_namespaced_custom_object, GROUP, VERSION, namespace, plural,
                   obj)
        case.cleanups.append(lambda: ignore_missing(
            custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, plural, name))
        return made
    made = raw(custom.create_cluster_custom_object, GROUP, VERSION, plural, obj)
    case.cleanups.append(lambda: ignore_missing(
        custom.delete_cluster_custom_object, GROUP, VERSION, plural, name))
    return made


def get_claim(case: Case, name: str) -> dict[str, Any]:
    return raw(case.kube.custom.get_namespaced_custom_object, GROUP, VERSION, case.namespace,
               "resourceclaims", name)


def claim_template(case: Case, name: str, spec: dict[str, Any]) -> None:
    """A ResourceClaimTemplate ``name`` whose claims have ``spec``."""
    create(case, "resourceclaimtemplates", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name}, "spec": {"spec": spec}}, namespaced=True)


def one_device(device_class: str, memory: str | None = None) -> dict[str, Any]:
    """A claim spec: one device (request ``gpu``) of ``device_class``, with a share of
    ``memory`` when given (consumable capacity)."""
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if memory:
        exactly["capacity"] = {"requests": {"memory": memory}}
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def claim_pod(case: Case, name: str, *, group: str, claim: str = "",
              template: str = "") -> dict[str, Any]:
    """A pod with one claim entry ``gpu`` in the 1.28 shape; its claim made as the
    resourceclaim controller makes it when it comes from a template."""
    pod = make_pod(name, scheduler=case.scheduler, group=group, run_id=case.settings.run_id,
                   cpu_milli=case.unit, node_selector=case.selector)
    source = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template}
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "source": source}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    with wire(case) as client:  # the official client's models no longer know ``source``
        made = client.request_json("POST", f"/api/v1/namespaces/{case.namespace}/pods",
                                   body=pod)
    if not made["spec"].get("resourceClaims"):
        pytest.skip("this API server drops spec.resourceClaims (Kubernetes 1.28-1.30 keep it "
                    "only with --feature-gates=DynamicResourceAllocation=true)")
    if template:
        play_claim_controller(case, made, template)
    return made


def play_claim_controller(case: Case, pod: dict[str, Any], template: str) -> None:
    body = raw(case.kube.custom.get_namespaced_custom_object, GROUP, VERSION, case.namespace,
               "resourceclaimtemplates", template)
    entry = pod_claims(pod)[0]
    suffix = hashlib.sha256(pod["metadata"]["uid"].encode()).hexdigest()[:5]
    made = create(case, "resourceclaims", template_claim(pod, entry, body, suffix=suffix),
                  namespaced=True)
    with wire(case) as client:
        client.request_json(
            "PATCH", f"/api/v1/namespaces/{case.namespace}/pods/{pod['metadata']['name']}/status",
            body={"status": {"resourceClaimStatuses": [
                {"name": entry.name, "resourceClaimName": made["metadata"]["name"]}]}},
            content_type=MERGE_PATCH)


def delete_pod(case: Case, pod: str) -> None:
    """Delete ``pod`` (no grace: no kubelet confirms it) and then the claims it owns, as the
    garbage collector does for a template's claims once their pod is gone."""
    uid = case.kube.pod(case.namespace, pod)["metadata"]["uid"]
    ignore_missing(case.kube.core.delete_namespaced_pod, pod, case.namespace,
                   grace_period_seconds=0)
    claims = raw(case.kube.custom.list_namespaced_custom_object, GROUP, VERSION,
                 case.namespace, "resourceclaims").get("items") or []
    for claim in claims:
        if any(owner.get("uid") == uid for owner in claim["metadata"].get("ownerReferences")
               or []):
            ignore_missing(case.kube.custom.delete_namespaced_custom_object, GROUP, VERSION,
                           case.namespace, "resourceclaims", claim["metadata"]["name"])


@contextlib.contextmanager
def wire(case: Case) -> Iterator[KubeClient]:
    """Lahar's own client, which sends a pod as written (1.28's ``source`` included)."""
    client = KubeClient.from_flags(kubeconfig=case.settings.kubeconfig, qps=50.0, burst=100)
    try:
        yield client
    finally:
        client.close()


def claim_name_of(case: Case, pod: str) -> str:
    with wire(case) as client:
        obj = client.request_json("GET", f"/api/v1/namespaces/{case.namespace}/pods/{pod}")
    source = obj["spec"]["resourceClaims"][0]["source"]
    if source.get("resourceClaimName"):
        return str(source["resourceClaimName"])
    return str(obj["status"]["resourceClaimStatuses"][0]["resourceClaimName"])


def allocated(claim: dict[str, Any]) -> list[tuple[str, str]]:
    """(pool, device) of each result of the claim's allocation."""
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    return [(r["pool"], r["device"]) for r in results.get("results") or []]


def reserved_for(claim: dict[str, Any]) -> list[str]:
    return [r["uid"] for r in (claim.get("status") or {}).get("reservedFor") or []]


def node_slices(kube: Kube, node: str) -> list[dict[str, Any]]:
    found = raw(kube.custom.list_cluster_custom_object, GROUP, VERSION, "resourceslices")
    return [s for s in found.get("items") or [] if s["spec"].get("nodeName") == node]


class NodeAgentProcess:
    """``lahar node-agent --dra`` for ``node`` as a process, with its kubelet directories and
    CDI root in a short directory of its own (socket paths are limited to 107 bytes)."""

    def __init__(self, *, kubeconfig: str, node: str, args: tuple[str, ...] = (),
                 driver: str = AGENT_DRIVER) -> None:
        self.driver = driver
        self.workdir = tempfile.mkdtemp(prefix="la-", dir="/tmp")
        self.registry = os.path.join(self.workdir, "reg")
        self.plugins = os.path.join(self.workdir, "plugins")
        self.cdi = os.path.join(self.workdir, "cdi")
        self.log_path = os.path.join(self.workdir, "agent.log")
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scheduler", "node-agent", "--kubeconfig", kubeconfig,
             "--node-name", node, "--dra", "--driver-name", driver,
             "--kubelet-plugins-registry-dir", self.registry, "--kubelet-plugins-dir",
             self.plugins, "--cdi-root", self.cdi, *args],
            cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=self._log,
            stderr=subprocess.STDOUT)

    def cdi_path(self, claim_uid: str) -> str:
        return os.path.join(self.cdi, f"k8s.{self.driver}-claim_{claim_uid}.json")

    def cdi_spec(self, claim_uid: str) -> dict[str, Any]:
        with open(self.cdi_path(claim_uid), encoding="utf-8") as f:
            return dict(json.load(f))

    def checkpoint(self) -> dict[str, Any]:
        """The prepared claims of the agent's checkpoint, by claim UID."""
        path = os.path.join(self.plugins, self.driver, "checkpoint.json")
        if not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as f:
            return dict(json.load(f)["claims"])

    def log_tail(self, chars: int = 3000) -> str:
        self._log.flush()
        return Path(self.log_path).read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
