"""The YAML users apply (conf/crds, conf/deploy), the Dockerfile and the kind e2e runner.

These files are only exercised for real on a cluster, so this module checks offline what can
go wrong between them and the code: CRD schemas that the API server would reject or that miss
fields the scheduler reads, Deployment flags that ``lahar run`` does not accept, probes on the
wrong port, and RBAC that lacks (or exceeds) the calls the scheduler makes. Those calls are
recorded by driving the real writer and leader elector against a fake client.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.podgroup import PodGroup, podgroup_from_object
from scheduler.api.queue import queue_from_object
from scheduler.cache.interface import ObjectRef
from scheduler.cluster.kube.client import ApiError
from scheduler.cluster.kube.flags import normalize
from scheduler.cluster.kube.leader import LeaderElector, LeaseConfig
from scheduler.cluster.kube.podgroups import PodGroupController
from scheduler.cluster.kube.reflector import RESOURCES
from scheduler.cluster.kube.retry import RetryPolicy
from scheduler.cluster.kube.writer import KubeClusterWriter
from scheduler.commands.cli import build_parser
from scheduler.conf import load_conf, parse_conf

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
CRDS = CONF / "crds"
DEPLOY = CONF / "deploy"
MANIFESTS = sorted([*CRDS.glob("*.yaml"), *DEPLOY.glob("*.yaml")])

# (apiGroup, resource, verb) the scheduler needs cluster-wide, read from the code:
# reflector.RESOURCES (list, watch), writer.py (binds, evictions, status, events, default
# queue, node lock), cache resync (get pod) and the podgroup controller (create PodGroup,
# patch the pod's group annotation). Queue status goes through queues/status only (no
# fallback that would patch the Queue object: the role does not grant it).
CLUSTER_NEEDS = {
    ("", "pods", "get"), ("", "pods", "list"), ("", "pods", "watch"), ("", "pods", "patch"),
    ("", "pods/binding", "create"),
    ("", "pods/eviction", "create"),
    ("", "pods/status", "patch"),
    ("", "nodes", "get"), ("", "nodes", "list"), ("", "nodes", "watch"), ("", "nodes", "update"),
    ("", "events", "create"), ("", "events", "patch"),
    ("", "namespaces", "list"), ("", "namespaces", "watch"),
    ("scheduling.k8s.io", "priorityclasses", "list"),
    ("scheduling.k8s.io", "priorityclasses", "watch"),
    ("scheduling.volcano.sh", "podgroups", "list"),
    ("scheduling.volcano.sh", "podgroups", "watch"),
    ("scheduling.volcano.sh", "podgroups", "patch"),
    ("scheduling.volcano.sh", "podgroups", "create"),
    ("scheduling.volcano.sh", "queues", "get"), ("scheduling.volcano.sh", "queues", "list"),
    ("scheduling.volcano.sh", "queues", "watch"), ("scheduling.volcano.sh", "queues", "create"),
    ("scheduling.volcano.sh", "queues/status", "patch"),
    ("scheduling.koordinator.sh", "devices", "list"),
    ("scheduling.koordinator.sh", "devices", "watch"),
    ("", "configmaps", "get"),
    ("topology.volcano.sh", "hypernodes", "list"),
    ("topology.volcano.sh", "hypernodes", "watch"),
    ("resource.k8s.io", "deviceclasses", "list"), ("resource.k8s.io", "deviceclasses", "watch"),
    ("resource.k8s.io", "resourceslices", "list"),
    ("resource.k8s.io", "resourceslices", "watch"),
    ("resource.k8s.io", "resourceclaimtemplates", "list"),
    ("resource.k8s.io", "resourceclaimtemplates", "watch"),
    ("resource.k8s.io", "resourceclaims", "get"), ("resource.k8s.io", "resourceclaims", "list"),
    ("resource.k8s.io", "resourceclaims", "watch"),
    ("resource.k8s.io", "resourceclaims/status", "update"),
}
# leader.py, in the --leader-elect-resource-namespace only.
LEASE_NEEDS = {
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
}


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _objects() -> list[dict[str, Any]]:
    return [doc for path in MANIFESTS for doc in _documents(path)]


def _one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in _objects() if o["kind"] == kind
             and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _crd(name: str) -> dict[str, Any]:
    return _one("CustomResourceDefinition", name)


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _deployment() -> dict[str, Any]:
    return _one("Deployment", "lahar-scheduler")


def _container() -> dict[str, Any]:
    (container,) = _deployment()["spec"]["template"]["spec"]["containers"]
    return container


def _run_args() -> Any:
    return normalize(build_parser().parse_args(_container()["args"]))


def _port_of(address: str) -> int:
    return int(address.rpartition(":")[2])


# -- every file -----------------------------------------------------------------------------

def test_manifests_exist_and_parse() -> None:
    assert {p.parent.name for p in MANIFESTS} == {"crds", "deploy"}
    for path in MANIFESTS:
        documents = _documents(path)
        assert documents, f"{path} has no objects"
        for doc in documents:
            assert doc.get("apiVersion") and doc.get("kind"), f"{path}: object without kind"
            assert doc.get("metadata", {}).get("name"), f"{path}: {doc['kind']} without a name"
    assert not list(DEPLOY.glob("kustomization.*")), (
        "a kustomization in conf/deploy breaks `kubectl apply -f conf/deploy/`")


def test_namespaced_objects_live_in_lahar_system() -> None:
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole",
                      "ClusterRoleBinding"}
    for obj in _objects():
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] in cluster_scoped:
            assert namespace is None, f"{obj['kind']} {obj['metadata']['name']}"
        else:
            assert namespace == "lahar-system", f"{obj['kind']} {obj['metadata']['name']}"
    assert _one("Namespace")["metadata"]["name"] == "lahar-system"


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((CONF / "kustomization.yaml").read_text())
    listed = sorted(CONF / entry for entry in kustomization["resources"])
    assert listed == MANIFESTS


def test_kustomize_renders_the_same_objects() -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not on PATH")
    built = subprocess.run(["kubectl", "kustomize", str(CONF)], capture_output=True, text=True,
                           timeout=60, check=False)
    assert built.returncode == 0, built.stderr
    rendered = [doc for doc in yaml.safe_load_all(built.stdout) if doc]

    def keys(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return sorted((o["kind"], o["metadata"]["name"]) for o in objects)

    assert keys(rendered) == keys(_objects())


def test_kubectl_client_dry_run(tmp_path: Path) -> None:
    """Client-side dry run where kubectl can do it without a server; skipped otherwise."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not on PATH")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
        "users": [{"name": "none", "user": {"token": "none"}}],
    }))
    result = subprocess.run(
        ["kubectl", "apply", "--dry-run=client", "--validate=false", "--request-timeout=5s",
         "-f", str(CRDS), "-f", str(DEPLOY)],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
        env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin:/usr/local/bin",
             "HOME": str(tmp_path)})
    if result.returncode != 0 and re.search(
            r"connection refused|unable to recognize|dial tcp|i/o timeout|no such host",
            result.stderr):
        pytest.skip("kubectl needs an API server even for a client dry run")
    assert result.returncode == 0, result.stderr


# -- CRDs -----------------------------------------------------------------------------------

def _schema_nodes(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node that structural schemas require to carry a type."""
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _schema_nodes(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _schema_nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _schema_nodes(node["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("path", sorted(CRDS.glob("*.yaml")), ids=lambda p: p.stem)
def test_crd_schemas_are_structural(path: Path) -> None:
    (crd,) = _documents(path)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    for version in crd["spec"]["versions"]:
        for where, node in _schema_nodes(version["schema"]["openAPIV3Schema"], "$"):
            # Volcano's and Koordinator's schemas never preserve unknown fields; neither do we.
            assert "x-kubernetes-preserve-unknown-fields" not in node, where
            if node.get("x-kubernetes-int-or-string"):
                assert [b.get("type") for b in node["anyOf"]] == ["integer", "string"], where
                continue
            assert node.get("type"), f"{path.name}: {where} has no type"
            if node["type"] == "object" and "properties" in node:
                assert "additionalProperties" not in node, where
            if "default" in node and "enum" in node:
                assert node["default"] in node["enum"], where
    storage = [v["name"] for v in crd["spec"]["versions"] if v["storage"]]
    assert len(storage) == 1
    group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
    assert crd["metadata"]["name"] == f"{plural}.{group}"


def test_podgroup_crd_is_volcanos() -> None:
    crd = _crd("podgroups.scheduling.volcano.sh")
    spec = crd["spec"]
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "PodGroup"
    assert spec["names"]["shortNames"] == ["pg", "podgroup-v1beta1"]
    (version,) = spec["versions"]
    assert version["name"] == "v1beta1"
    assert "status" not in version.get("subresources", {}), (
        "PodGroup status is patched on the object, as Volcano's controllers do")
    columns = [(c["name"].upper(), c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == [("STATUS", ".status.phase"), ("MINMEMBER", ".spec.minMember"),
                       ("RUNNINGS", ".status.running"), ("AGE", ".metadata.creationTimestamp"),
                       ("QUEUE", ".spec.queue")]
    props = _schema(crd)["properties"]
    assert set(props["spec"]["properties"]) >= {
        "minMember", "minResources", "minTaskMember", "priorityClassName", "queue",
        "networkTopology"}
    assert props["spec"]["properties"]["minMember"]["format"] == "int32"
    assert set(props["status"]["properties"]) == {
        "phase", "conditions", "running", "succeeded", "failed"}
    assert "required" not in props["spec"]["properties"]["networkTopology"]


def test_queue_crd_is_volcanos() -> None:
    crd = _crd("queues.scheduling.volcano.sh")
    spec = crd["spec"]
    assert spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == "Queue"
    assert spec["names"]["shortNames"] == ["q", "queue-v1beta1"]
    (version,) = spec["versions"]
    assert version["name"] == "v1beta1"
    assert version["subresources"] == {"status": {}}
    props = _schema(crd)["properties"]
    assert set(props["spec"]["properties"]) >= {
        "weight", "capability", "deserved", "guarantee", "reclaimable", "parent", "affinity",
        "extendClusters", "type", "priority"}
    assert set(props["spec"]["properties"]["guarantee"]["properties"]) == {"resource"}
    assert set(props["status"]["properties"]) >= {
        "state", "allocated", "pending", "running", "inqueue", "completed", "unknown",
        "reservation"}


def test_device_crd_is_koordinators() -> None:
    crd = _crd("devices.scheduling.koordinator.sh")
    spec = crd["spec"]
    assert spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == "Device"
    assert [v["name"] for v in spec["versions"]] == ["v1alpha1"]
    props = _schema(crd)["properties"]
    device = props["spec"]["properties"]["devices"]["items"]["properties"]
    # Koordinator serialises the device UUID as "id".
    assert set(device) >= {"id", "minor", "type", "health", "resources", "topology",
                           "vfGroups", "conditions", "labels"}
    assert set(props["status"]["properties"]) == {"allocations"}


class _Reads(dict[str, Any]):
    """A dict that notes every key looked up in it (present or not)."""

    def __init__(self, path: str, log: set[str], data: dict[str, Any]) -> None:
        super().__init__(data)
        self._path, self._log = path, log

    def get(self, key: str, default: Any = None) -> Any:
        self._log.add(f"{self._path}.{key}")
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._log.add(f"{self._path}.{key}")
        return super().__getitem__(key)


def _has_field(schema: dict[str, Any], dotted: str) -> bool:
    node = schema
    for part in dotted.split("."):
        properties = node.get("properties") or {}
        if part not in properties:
            return False
        node = properties[part]
    return True


def test_podgroup_crd_has_every_field_the_scheduler_reads_and_writes() -> None:
    reads: set[str] = set()
    podgroup_from_object({
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": _Reads("spec", reads, {"minMember": 2, "minTaskMember": {"w": 1},
                                       "minResources": {"cpu": "1"}, "queue": "q",
                                       "priorityClassName": "high"}),
        "status": _Reads("status", reads, {"phase": "Running", "running": 1}),
    })
    written = PodGroup(name="pg", namespace="ns", running=1, succeeded=1, failed=1,
                       conditions=[{"type": "Unschedulable"}]).status_dict()
    fields = reads | {f"status.{key}" for key in written}
    schema = _schema(_crd("podgroups.scheduling.volcano.sh"))
    assert fields, "nothing recorded"
    assert [f for f in sorted(fields) if not _has_field(schema, f)] == []
    condition = schema["properties"]["status"]["properties"]["conditions"]["items"]
    assert set(condition["properties"]) >= {
        "type", "status", "transitionID", "lastTransitionTime", "reason", "message"}


def test_queue_crd_has_every_field_the_scheduler_reads_and_writes() -> None:
    reads: set[str] = set()
    queue_from_object({
        "metadata": {"name": "q"},
        "spec": _Reads("spec", reads, {
            "weight": 2, "priority": 1, "capability": {"cpu": "4"}, "deserved": {"cpu": "2"},
            "guarantee": _Reads("spec.guarantee", reads, {"resource": {"cpu": "1"}}),
            "reclaimable": False, "parent": "root"}),
        "status": _Reads("status", reads, {"state": "Open", "allocated": {"cpu": "1"}}),
    })
    fields = reads | {"status.allocated"}  # written by update_queue_status
    schema = _schema(_crd("queues.scheduling.volcano.sh"))
    assert "spec.guarantee.resource" in fields
    assert [f for f in sorted(fields) if not _has_field(schema, f)] == []


# -- ConfigMap and Deployment ---------------------------------------------------------------

def test_configmap_holds_the_default_conf() -> None:
    configmap = _one("ConfigMap", "lahar-scheduler-conf")
    text = configmap["data"]["lahar-scheduler.conf"]
    assert text == (CONF / "lahar-scheduler.conf").read_text()
    parsed = parse_conf(text, source="configmap")
    on_disk = load_conf(CONF / "lahar-scheduler.conf")
    assert parsed.actions == on_disk.actions
    assert parsed.tiers == on_disk.tiers
    assert not parsed.warnings


def test_deployment_args_are_accepted_by_lahar_run() -> None:
    args = _run_args()
    assert args.command == "run"
    assert args.enable_metrics and args.enable_healthz and args.leader_elect
    assert args.scheduler_name == ["volcano"]
    assert args.leader_elect_resource_namespace == "lahar-system"


def test_conf_is_mounted_as_a_directory_from_the_configmap() -> None:
    args = _run_args()
    pod = _deployment()["spec"]["template"]["spec"]
    conf = Path(args.scheduler_conf)
    (mount,) = [m for m in _container()["volumeMounts"] if Path(m["mountPath"]) == conf.parent]
    assert "subPath" not in mount, "a subPath mount never sees ConfigMap updates"
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    configmap = _one("ConfigMap", volume["configMap"]["name"])
    assert conf.name in configmap["data"]
    assert "items" not in volume["configMap"]


def test_probes_and_ports_match_the_flags() -> None:
    args = _run_args()
    container = _container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == _port_of(args.listen_address)
    assert ports["healthz"] == _port_of(args.healthz_address)
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        port = get["port"]
        assert (ports[port] if isinstance(port, str) else port) == ports["healthz"]
    service = _one("Service")
    (service_port,) = service["spec"]["ports"]
    target = service_port["targetPort"]
    assert (ports[target] if isinstance(target, str) else target) == ports["metrics"]
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert int(annotations["prometheus.io/port"]) == service_port["port"]
    pod_labels = _deployment()["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_scheduler_runs_locked_down() -> None:
    deployment = _deployment()
    pod = deployment["spec"]["template"]["spec"]
    container = _container()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items())
    assert container["image"] == "lahar:dev"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}
    # With a read-only root, the cache dump directory must be a writable volume.
    dump_dir = Path(_run_args().cache_dump_dir)
    writable = {Path(m["mountPath"]) for m in container["volumeMounts"]
                if not m.get("readOnly")}
    assert dump_dir in writable
    assert pod["serviceAccountName"] == _one("ServiceAccount")["metadata"]["name"]


def test_dockerfile_matches_the_deployment() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.MULTILINE | re.IGNORECASE)
    assert len(stages) >= 2, "multi-stage build expected"
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim$", text, re.MULTILINE)
    final = text[text.rfind("\nFROM "):]
    assert re.search(r"^USER 65532(:65532)?$", final, re.MULTILINE)
    assert 'ENTRYPOINT ["lahar"]' in final and 'CMD ["run"]' in final
    assert not re.search(r"\b(gcc|build-essential|apt-get install)\b", final)
    assert "lahar = " in (ROOT / "pyproject.toml").read_text()
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore, "the build context should be an allow-list"
    assert {"!pyproject.toml", "!README.md", "!scheduler/", "!plugins/", "!actions/"} <= set(ignore)


# -- RBAC -----------------------------------------------------------------------------------

def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    granted = set()
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(field, []), f"wildcard in {rule}"
        assert "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    granted.add((group, resource, verb))
    return granted


class _Answer:
    status = 201

    def drain_conn(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class _RecordingClient:
    """Stands in for KubeClient: remembers every call and keeps created objects by path."""

    def __init__(self, objects: dict[str, dict[str, Any]] | None = None) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.objects = dict(objects or {})
        self.lock = threading.Lock()

    def request(self, method: str, path: str, **options: Any) -> _Answer:
        with self.lock:
            self.calls.append((method, path, dict(options.get("query") or {})))
        return _Answer()

    def request_json(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        body = options.get("body")
        with self.lock:
            self.calls.append((method, path, dict(options.get("query") or {})))
            if method == "GET":
                if path not in self.objects:
                    raise ApiError(404, "Not Found")
                return copy.deepcopy(self.objects[path])
            if method == "POST":
                self.objects[f"{path}/{body['metadata']['name']}"] = copy.deepcopy(body)
            elif method == "PUT":
                self.objects[path] = copy.deepcopy(body)
        return copy.deepcopy(body) if isinstance(body, dict) else {}


def _verb_of(method: str, path: str, query: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """(group, resource, verb, namespace, name) of a request, the way RBAC sees it."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        assert parts[0] == "apis", path
        group, rest = parts[1], parts[3:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    name = rest[1] if len(rest) > 1 else ""
    resource = "/".join([rest[0], *rest[2:3]])
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if verb is None:
        verb = "get" if name else ("watch" if query.get("watch") else "list")
    return group, resource, verb, namespace, name


def _recorded_calls(lease_namespace: str, lease_name: str) -> list[tuple[str, ...]]:
    """Drive every write the scheduler makes, and the leader elector, against the fake."""
    client = _RecordingClient({"/api/v1/nodes/n1": {"metadata": {"name": "n1",
                                                                   "resourceVersion": "7"}}})
    writer = KubeClusterWriter(client, scheduler_name="volcano",  # type: ignore[arg-type]
                               retry=RetryPolicy(attempts=1), clock=lambda: 1_767_225_600.0)
    writer.bind(namespace="ns", name="p", uid="u", node="n1", annotations={"a": "b"})
    writer.evict(namespace="ns", name="p", uid="u", reason="preempt", message="m")
    writer.update_pod_condition(namespace="ns", name="p",
                                condition={"type": "PodScheduled", "status": "False"},
                                nominated_node="n1")
    writer.get_pod(namespace="ns", name="p")
    writer.update_podgroup_status(namespace="ns", name="pg", status={"phase": "Running"})
    writer.update_queue_status(name="default", status={"allocated": {"cpu": "1"}})
    writer.ensure_queue("default")
    writer.replace_node(writer.get_node("n1"))
    claim = writer.get_resource_claim(namespace="ns", name="c")
    writer.update_resource_claim_status(claim or {"metadata": {"namespace": "ns", "name": "c"}})
    ref = ObjectRef(kind="Pod", name="p", namespace="ns", uid="u")
    for _ in range(2):  # the second identical event bumps the first one's count
        writer.record_event(involved=ref, type="Warning", reason="FailedScheduling",
                            message="0/1 nodes are unavailable: 1 Insufficient cpu.")

    groups = PodGroupController(client, ["volcano"],  # type: ignore[arg-type]
                                retry=RetryPolicy(attempts=1))
    groups.observe("ADDED", {"metadata": {"name": "plain", "namespace": "ns", "uid": "u2"},
                             "spec": {"schedulerName": "volcano", "containers": []}})
    assert groups.sync() == 1
    from scheduler.cluster.kube.run import _device_config_maps

    _device_config_maps(client, load_conf(ROOT / "conf" / "vgpu.conf"))  # vGPU's MIG geometries

    elector = LeaderElector(client,  # type: ignore[arg-type]
                            LeaseConfig(name=lease_name, namespace=lease_namespace,
                                        lease_duration=3.0, renew_deadline=2.0,
                                        retry_period=0.01),
                            identity="test-identity")
    runner = threading.Thread(target=elector.run, args=(elector.stop, lambda: None))
    runner.start()
    runner.join(10.0)
    assert not runner.is_alive()
    return [_verb_of(*call) for call in client.calls]


def test_rbac_grants_exactly_what_the_scheduler_uses() -> None:
    args = _run_args()
    cluster_role = _one("ClusterRole", "lahar-scheduler")
    role = _one("Role")
    assert role["metadata"]["namespace"] == args.leader_elect_resource_namespace

    reflected = {(spec.api_version.rpartition("/")[0], spec.plural, verb)
                 for spec in RESOURCES for verb in ("list", "watch")}
    assert reflected <= CLUSTER_NEEDS
    calls = _recorded_calls(args.leader_elect_resource_namespace,
                            args.leader_elect_resource_name)
    used = {(group, resource, verb) for group, resource, verb, _, _ in calls}
    assert used - CLUSTER_NEEDS - LEASE_NEEDS == set(), "a call the tables do not know"
    assert CLUSTER_NEEDS - used - reflected == set(), "a table entry no code path uses"
    assert {c for c in used if c[0] == "coordination.k8s.io"} == LEASE_NEEDS
    lease_calls = [c for c in calls if c[0] == "coordination.k8s.io"]
    assert {c[3] for c in lease_calls} == {args.leader_elect_resource_namespace}

    assert _grants(cluster_role["rules"]) == CLUSTER_NEEDS
    assert _grants(role["rules"]) == LEASE_NEEDS
    for rule in role["rules"]:
        if rule.get("resourceNames"):
            assert rule["resourceNames"] == [args.leader_elect_resource_name]
            assert "create" not in rule["verbs"], "create cannot be limited by name"
    named = {c[2] for c in lease_calls if c[4]}
    by_name = {v for r in role["rules"] if r.get("resourceNames") for v in r["verbs"]}
    assert named <= by_name


def test_rbac_bindings_name_the_scheduler_account() -> None:
    account = _one("ServiceAccount")
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = _one(kind)
        assert binding["roleRef"]["kind"] == role_kind
        assert binding["roleRef"]["name"] == _one(role_kind)["metadata"]["name"]
        assert binding["subjects"] == [{"kind": "ServiceAccount",
                                        "name": account["metadata"]["name"],
                                        "namespace": account["metadata"]["namespace"]}]
    assert _one("RoleBinding")["metadata"]["namespace"] == _one("Role")["metadata"]["namespace"]


# -- hack/ ----------------------------------------------------------------------------------

def test_kind_config_has_one_control_plane_and_two_workers() -> None:
    config = yaml.safe_load((ROOT / "hack" / "kind-config.yaml").read_text())
    assert config["kind"] == "Cluster"
    assert sorted(n["role"] for n in config["nodes"]) == ["control-plane", "worker", "worker"]


def test_e2e_script_deploys_the_node_agent_with_fake_gpus_the_agent_accepts() -> None:
    """The kind runner's JSON patch, with its shell variables filled in, is valid JSON that adds
    flags ``lahar node-agent`` parses to the DaemonSet of ``conf/deploy/node-agent/``, selects
    the workers ``hack/kind-config.yaml`` labels, and the conf it installs turns GPU share on."""
    from scheduler.deviceconf import device_support

    script = (ROOT / "hack" / "run-e2e-kind.sh").read_text()
    (patch,) = re.findall(r'patch daemonset "\$AGENT" --type=json -p "(\[.*?\])"', script,
                          flags=re.S)
    values = {"args_path": "/spec/template/spec/containers/0/args/-", "GPUS_PER_NODE": "2",
              "GPU_MEMORY_MIB": "16384", "IMAGE": "lahar:e2e"}
    label_key = re.search(r'GPU_NODE_LABEL_KEY="([^"]+)"', script)
    assert label_key is not None
    text = re.sub(r"\$\{GPU_NODE_LABEL_KEY//\\/+/~1\}",
                  label_key.group(1).replace("/", "~1"), patch)
    text = re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], text)
    operations = json.loads(text.replace('\\"', '"'))
    args = [op["value"] for op in operations if op["path"].endswith("/args/-")]
    assert args == ["--fake-gpus=2", "--fake-gpu-memory=16384Mi"]
    parsed = build_parser().parse_args(["node-agent", *args])
    assert (parsed.fake_gpus, parsed.fake_gpu_memory) == (2, "16384Mi")
    (selector,) = [op for op in operations if "/nodeSelector/" in op["path"]]
    kind = yaml.safe_load((ROOT / "hack" / "kind-config.yaml").read_text())
    workers = [n.get("labels") or {} for n in kind["nodes"] if n["role"] == "worker"]
    key = selector["path"].rsplit("/", 1)[1].replace("~1", "/")
    assert workers and all(labels.get(key) == selector["value"] for labels in workers)
    daemonset = yaml.safe_load((ROOT / "conf" / "deploy" / "node-agent" / "40-daemonset.yaml")
                               .read_text())
    assert re.search(rf'AGENT="{daemonset["metadata"]["name"]}"', script)
    assert "nodeSelector" in daemonset["spec"]["template"]["spec"]  # the patch adds a key to it
    assert 'conf/gpushare.conf' in script
    assert device_support(load_conf(ROOT / "conf" / "gpushare.conf")).config.gpu_sharing
    assert "set -euo pipefail" in script and "trap cleanup EXIT" in script


@pytest.mark.parametrize("script", sorted((ROOT / "hack").glob("*.sh")), ids=lambda p: p.name)
def test_shell_scripts_pass_shellcheck(script: Path) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not on PATH")
    result = subprocess.run(["shellcheck", "--format=gcc", str(script)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_manifest_is_json_serialisable() -> None:
    # kubectl sends JSON; YAML-only values (dates, non-string keys) would not survive.
    for obj in _objects():
        json.dumps(obj)


# -- optional admission policy ---------------------------------------------------------------

POLICY_FILE = DEPLOY / "optional" / "validating-admission-policy.yaml"
VAP_API = "admissionregistration.k8s.io/v1beta1"


def _policies() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in _documents(POLICY_FILE)
            if doc["kind"] == "ValidatingAdmissionPolicy"}


def test_admission_policy_is_optional_and_outside_the_default_install() -> None:
    assert POLICY_FILE not in MANIFESTS  # `kubectl apply -f conf/deploy/` is not recursive
    kustomization = yaml.safe_load((CONF / "kustomization.yaml").read_text())
    assert not any("optional" in entry for entry in kustomization["resources"])
    header = POLICY_FILE.read_text().split("apiVersion:", 1)[0]
    assert "Optional" in header and "never a substitute" in header


def test_admission_policies_name_the_volcano_resources_and_are_bound() -> None:
    documents = _documents(POLICY_FILE)
    assert {doc["apiVersion"] for doc in documents} == {VAP_API}
    assert sorted(doc["kind"] for doc in documents) == [
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding"]
    policies = _policies()
    resources = {}
    for name, policy in policies.items():
        assert "namespace" not in policy["metadata"]  # cluster-scoped
        assert policy["spec"]["failurePolicy"] == "Fail"
        (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
        assert rule["apiGroups"] == ["scheduling.volcano.sh"]
        assert rule["apiVersions"] == ["v1beta1"]
        assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
        (resources[name],) = rule["resources"]
        for validation in policy["spec"]["validations"]:
            assert validation["reason"] in ("Invalid", "Forbidden")
    assert resources == {"lahar-queue-parent-not-itself": "queues",
                         "lahar-podgroup-min-member-not-negative": "podgroups"}
    (queue_check,) = policies["lahar-queue-parent-not-itself"]["spec"]["validations"]
    assert "object.spec.parent != object.metadata.name" in queue_check["expression"]
    (group_check,) = policies["lahar-podgroup-min-member-not-negative"]["spec"]["validations"]
    assert "object.spec.minMember >= 0" in group_check["expression"]
    bindings = [doc for doc in documents if doc["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert sorted(b["spec"]["policyName"] for b in bindings) == sorted(policies)
    for binding in bindings:
        assert binding["spec"]["validationActions"] == ["Deny"]
        assert "namespace" not in binding["metadata"]


def test_admission_policies_read_fields_the_crds_declare() -> None:
    """CEL in a policy is type-checked against the CRD schema: the fields must exist there."""
    queue_spec = _schema(_crd("queues.scheduling.volcano.sh"))["properties"]["spec"]
    assert queue_spec["properties"]["parent"]["type"] == "string"
    group_spec = _schema(_crd("podgroups.scheduling.volcano.sh"))["properties"]["spec"]
    assert group_spec["properties"]["minMember"]["type"] == "integer"


@pytest.mark.parametrize(("policy", "obj", "allowed"), [
    ("lahar-queue-parent-not-itself", {"metadata": {"name": "q"}, "spec": {"parent": "q"}},
     False),
    ("lahar-queue-parent-not-itself", {"metadata": {"name": "q"}, "spec": {"parent": "eng"}},
     True),
    ("lahar-queue-parent-not-itself", {"metadata": {"name": "q"}, "spec": {}}, True),
    ("lahar-queue-parent-not-itself", {"metadata": {"name": "q"}}, True),
    ("lahar-podgroup-min-member-not-negative",
     {"metadata": {"name": "pg"}, "spec": {"minMember": -3}}, False),
    ("lahar-podgroup-min-member-not-negative",
     {"metadata": {"name": "pg"}, "spec": {"minMember": 0}}, True),
    ("lahar-podgroup-min-member-not-negative", {"metadata": {"name": "pg"}, "spec": {}}, True),
])
def test_admission_policy_expressions(policy: str, obj: dict[str, Any], allowed: bool) -> None:
    """Evaluated with cel-python where it is installed (the API server's CEL is cel-go)."""
    celpy = pytest.importorskip("celpy")
    environment = celpy.Environment()

    def evaluate(expression: str) -> Any:
        program = environment.program(environment.compile(expression))
        return program.evaluate({"object": celpy.json_to_cel(obj)})

    (validation,) = _policies()[policy]["spec"]["validations"]
    assert bool(evaluate(validation["expression"])) is allowed
    if not allowed:
        message = str(evaluate(validation["messageExpression"]))
        field = "spec.parent" if "queue" in policy else "spec.minMember"
        assert message.startswith(f"{field}: ")


# -- lahar node-agent (conf/deploy/node-agent/) -----------------------------------------------

NODE_AGENT = DEPLOY / "node-agent"
# What scheduler/cluster/kube/nodeaccess.py issues, and nothing else.
NODE_AGENT_NEEDS = {
    ("", "nodes", "get"), ("", "nodes", "patch"), ("", "nodes/status", "patch"),
    ("", "pods", "list"), ("", "pods", "watch"), ("", "pods", "patch"),
    ("scheduling.koordinator.sh", "devices", "get"),
    ("scheduling.koordinator.sh", "devices", "create"),
    ("scheduling.koordinator.sh", "devices", "update"),
    ("scheduling.koordinator.sh", "devices", "patch"),
}


def _agent_objects() -> list[dict[str, Any]]:
    return [doc for path in sorted(NODE_AGENT.glob("*.yaml")) for doc in _documents(path)]


def _agent_one(kind: str) -> dict[str, Any]:
    (found,) = [o for o in _agent_objects() if o["kind"] == kind]
    return found


def test_node_agent_daemonset_mounts_what_a_device_plugin_needs() -> None:
    daemonset = _agent_one("DaemonSet")
    assert daemonset["metadata"]["namespace"] == "lahar-system"
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["serviceAccountName"] == _agent_one("ServiceAccount")["metadata"]["name"]
    assert container["image"] == _container()["image"]
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert host["device-plugins"] == "/var/lib/kubelet/device-plugins"
    assert host["dev"] == "/dev" and mounts["dev"]["readOnly"] is True
    assert not mounts["device-plugins"].get("readOnly")
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    security = container["securityContext"]
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["readOnlyRootFilesystem"] is True
    conf = next(v for v in pod["volumes"] if v["name"] == "conf")
    assert conf["configMap"]["name"] == _one("ConfigMap")["metadata"]["name"]


def test_node_agent_args_are_accepted_by_lahar_node_agent() -> None:
    (container,) = _agent_one("DaemonSet")["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "node-agent"
    mounted = {m["mountPath"].rstrip("/") for m in container["volumeMounts"]}
    assert args.kubelet_dir.rstrip("/") in mounted
    assert Path(args.scheduler_conf).parent.as_posix() in mounted
    assert args.sysfs in mounted


def test_node_agent_rbac_is_exactly_what_the_agent_calls() -> None:
    role = _agent_one("ClusterRole")
    assert _grants(role["rules"]) == NODE_AGENT_NEEDS
    binding = _agent_one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (subject,) = binding["subjects"]
    assert (subject["name"], subject["namespace"]) == ("lahar-node-agent", "lahar-system")


def test_every_node_agent_call_is_granted() -> None:
    from scheduler.cluster.kube.nodeaccess import KubeNodeAccess

    node = {"metadata": {"name": "n1", "resourceVersion": "7", "annotations": {"hamivgpu": "x"}}}
    client = _RecordingClient({"/api/v1/nodes/n1": node, "/api/v1/pods": {"items": []}})
    access = KubeNodeAccess(client)  # type: ignore[arg-type]
    current = access.get_node("n1")
    current["metadata"]["annotations"] = {}
    access.replace_node(current)
    access.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    access.patch_node_status("n1", {"status": {"capacity": {"x": "1"}}})
    access.list_pods_on_node("n1")
    access.patch_pod_annotations("ns", "p", {"a": None})
    assert access.get_device("n1") is None
    access.create_device({"metadata": {"name": "n1"}})
    access.replace_device({"metadata": {"name": "n1"}})
    access.close()  # the pod mirror's watch: the recording client cannot stream
    used = {_verb_of(method, path, query)[:3] for method, path, query in client.calls}
    assert used <= NODE_AGENT_NEEDS, used - NODE_AGENT_NEEDS
    pod_lists = [query for method, path, query in client.calls if path == "/api/v1/pods"]
    assert pod_lists and all(q["fieldSelector"] == "spec.nodeName=n1" for q in pod_lists)


@pytest.mark.parametrize(("profile", "peer_hook_path", "library"), [
    # volcano-vgpu-device-plugin deployments/static/volcano-vgpu-device-plugin.yml:
    # HOOK_PATH=/usr/local/vgpu; pkg/plugin/server.go Allocate mounts HOOK_PATH/libvgpu.so.
    ("volcano", "/usr/local/vgpu", "/usr/local/vgpu/libvgpu.so"),
    # HAMi charts/hami/values.yaml global.gpuHookPath=/usr/local (HOOK_PATH in
    # templates/device-plugin/daemonsetnvidia.yaml); nvinternal/plugin/server.go Allocate
    # mounts HOOK_PATH/vgpu/libvgpu.so.
    ("hami", "/usr/local", "/usr/local/vgpu/libvgpu.so"),
])
def test_node_agent_hook_path_is_the_profiles_own(profile: str, peer_hook_path: str,
                                                   library: str) -> None:
    """The DaemonSet's environment gives each vGPU profile the ``HOOK_PATH`` its peer's
    DaemonSet sets, so ``Allocate``'s mounts name HAMi-core where that peer installs it, and
    that place is a host directory the DaemonSet mounts at the same path."""
    from scheduler.devices.base import DeviceConfig
    from scheduler.devices.node.resources import AgentConfig

    pod = _agent_one("DaemonSet")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value", "") for e in container["env"]}
    config = AgentConfig(node_name="n", devices=DeviceConfig(vgpu=True, profile=profile),
                         hook_path=env.get("HOOK_PATH", ""))
    assert config.vgpu_hook_path == peer_hook_path
    hook = config.vgpu_hook_path
    used = f"{hook}/vgpu/libvgpu.so" if profile == "hami" else f"{hook}/libvgpu.so"
    assert used == library
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    mounted = {m["mountPath"]: host.get(m["name"]) for m in container["volumeMounts"]}
    assert any(library.startswith(f"{path}/") and mounted[path] == path for path in mounted), (
        f"{library} is not under a host directory mounted at its own path")
