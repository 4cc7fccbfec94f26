"""``lahar run --hypernode-discovery-config``: the controller around the pure discovery, its
optional RBAC and Deployment patch, driven against a recording client."""

from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from scheduler.cluster.discovery import LABEL_SOURCE, SOURCE_LABEL
from scheduler.cluster.kube.client import ApiError
from scheduler.cluster.kube.discovery import DiscoveryController
from scheduler.cluster.kube.flags import normalize
from scheduler.cluster.kube.retry import RetryPolicy
from scheduler.commands.cli import build_parser
from tests.builders import make_node

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ROOT / "conf" / "deploy" / "optional"
HN = "/apis/topology.volcano.sh/v1alpha1/hypernodes"
CONFIG = """networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        a2:
          - nodeLabel: volcano.sh/tor
          - nodeLabel: kubernetes.io/hostname
"""


class _Server:
    """Answers HyperNode writes as an API server would (resourceVersion bumped, 409 on a
    create of an existing name, 404 on a delete of a missing one) and records them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 0

    def request_json(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        self.calls.append((method, path))
        body = copy.deepcopy(options.get("body"))
        self.version += 1
        if method == "POST":
            name = body["metadata"]["name"]
            if name in self.objects:
                raise ApiError(409, "AlreadyExists")
            body["metadata"]["resourceVersion"] = str(self.version)
            self.objects[name] = body
            return copy.deepcopy(body)
        if path.endswith("/status"):  # the status subresource: only status is taken
            assert method == "PUT"
            name = path.rsplit("/", 2)[1]
            stored = self.objects[name]
            stored["status"] = body.get("status") or {}
            stored["metadata"]["resourceVersion"] = str(self.version)
            return copy.deepcopy(stored)
        name = path.rsplit("/", 1)[1]
        if method == "DELETE":
            if self.objects.pop(name, None) is None:
                raise ApiError(404, "NotFound")
            return {}
        assert method == "PUT"
        body["metadata"]["resourceVersion"] = str(self.version)
        body.pop("status", None)  # the main resource leaves status as it was
        if "status" in self.objects.get(name, {}):
            body["status"] = self.objects[name]["status"]
        self.objects[name] = body
        return copy.deepcopy(body)


def _controller(tmp_path: Path, server: _Server, **options: Any) -> DiscoveryController:
    path = tmp_path / "volcano-controller.conf"
    path.write_text(CONFIG)
    controller = DiscoveryController(server, str(path),  # type: ignore[arg-type]
                                     retry=RetryPolicy(attempts=1), **options)
    assert controller.load_config()
    return controller


def _spec_calls(server: _Server) -> list[tuple[str, str]]:
    """The writes of HyperNode objects themselves, not of their status."""
    return [(m, p) for m, p in server.calls if not p.endswith("/status")]


def _tor_nodes(controller: DiscoveryController, tors: dict[str, str]) -> None:
    for name, tor in tors.items():
        controller.observe("Node", "ADDED", make_node(name, labels={"volcano.sh/tor": tor}))


def test_reconcile_creates_then_settles(tmp_path: Path) -> None:
    """reconcileTopology (hypernode_controller.go:190): one tier-1 HyperNode per tor value;
    the answers feed the controller's mirror, so the next reconcile writes nothing."""
    server = _Server()
    controller = _controller(tmp_path, server)
    _tor_nodes(controller, {"n1": "t1", "n2": "t1", "n3": "t2"})
    plan = controller.reconcile()
    assert [m for m, _ in _spec_calls(server)] == ["POST", "POST"]
    assert len(plan.create) == 2
    assert controller.reconcile().empty
    assert len(server.calls) == 4  # and the two statuses (syncHyperNodeStatus), once


def test_label_changes_update_and_delete_only_owned(tmp_path: Path) -> None:
    """A node moving tor updates the HyperNodes; a tor value gone deletes its HyperNode; a
    hand-made HyperNode is never written (the source label marks ownership)."""
    server = _Server()
    controller = _controller(tmp_path, server)
    controller.observe("HyperNode", "ADDED", {"metadata": {"name": "hand", "labels": {}},
                                              "spec": {"tier": 1}})
    _tor_nodes(controller, {"n1": "t1", "n2": "t2"})
    controller.reconcile()
    for obj in server.objects.values():  # the watch echoes what was created
        controller.observe("HyperNode", "ADDED", obj)
    server.calls.clear()
    controller.observe("Node", "MODIFIED", make_node("n2", labels={"volcano.sh/tor": "t1"}))
    plan = controller.reconcile()
    assert [m for m, _ in _spec_calls(server)] == ["PUT", "DELETE"]
    (updated,) = plan.update
    assert [m["selector"]["exactMatch"]["name"] for m in updated["spec"]["members"]] == [
        "n1", "n2"]
    assert all(not path.endswith("/hand") for _, path in server.calls)
    assert {o["metadata"]["labels"][SOURCE_LABEL] for o in server.objects.values()} == {
        LABEL_SOURCE}


def test_only_topology_label_changes_make_it_due(tmp_path: Path) -> None:
    """UpdateNode (discovery/label/label.go:368) re-discovers only when a configured label
    changed; DeleteHyperNode (label.go:385) re-discovers when a HyperNode goes."""
    controller = _controller(tmp_path, _Server())
    controller._due.clear()
    controller.observe("Node", "ADDED", make_node("n1", labels={"unrelated": "x"}))
    assert not controller._due.is_set()
    controller.observe("Node", "MODIFIED", make_node("n1", labels={"volcano.sh/tor": "t"}))
    assert controller._due.is_set()
    controller._due.clear()
    owned = {"metadata": {"name": "h", "labels": {SOURCE_LABEL: LABEL_SOURCE}}}
    controller.observe("HyperNode", "ADDED", owned)
    assert not controller._due.is_set()
    controller.observe("HyperNode", "DELETED", owned)
    assert controller._due.is_set()


def test_no_writes_while_not_leading_and_bad_config_keeps_the_previous(tmp_path: Path) -> None:
    server = _Server()
    leading = {"now": False}
    controller = _controller(tmp_path, server, leading=lambda: leading["now"])
    _tor_nodes(controller, {"n1": "t1"})
    controller.reconcile()
    assert server.calls == []
    Path(controller.config_path).write_text("networkTopologyDiscovery: 7\n")
    time.sleep(0.01)
    assert not controller.load_config()
    assert controller.config.enabled
    leading["now"] = True
    controller.reconcile()
    assert [m for m, _ in _spec_calls(server)] == ["POST"]


def test_disabled_config_writes_nothing(tmp_path: Path) -> None:
    """Volcano stops a source that is no longer enabled (manager.go handleRemovedSources) and
    leaves its HyperNodes alone."""
    server = _Server()
    controller = _controller(tmp_path, server)
    controller.observe("HyperNode", "ADDED", {"metadata": {
        "name": "hypernode-a2-tier1-x", "labels": {SOURCE_LABEL: LABEL_SOURCE}}})
    Path(controller.config_path).write_text(
        "networkTopologyDiscovery: [{source: label, enabled: false}]\n")
    time.sleep(0.01)
    assert controller.load_config() and not controller.config.enabled
    assert controller.reconcile().empty and server.calls == []


def test_thread_reconciles_once_synced(tmp_path: Path) -> None:
    server = _Server()
    synced = threading.Event()
    controller = _controller(tmp_path, server, synced=synced.is_set, debounce=0.01, poll=0.01)
    _tor_nodes(controller, {"n1": "t1"})
    stop = threading.Event()
    controller.start(stop)
    time.sleep(0.1)
    assert server.calls == []
    synced.set()
    deadline = time.monotonic() + 5
    while not server.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    controller.join(2.0)
    assert [m for m, _ in _spec_calls(server)] == ["POST"]


# -- the optional deploy files ------------------------------------------------------------------

def _optional() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((OPTIONAL / "hypernode-discovery.yaml").read_text())
            if d]


def test_optional_rbac_grants_exactly_the_discovery_writes(tmp_path: Path) -> None:
    server = _Server()
    controller = _controller(tmp_path, server)
    _tor_nodes(controller, {"n1": "t1", "n2": "t2"})
    controller.reconcile()
    controller.observe("Node", "MODIFIED", make_node("n2", labels={"volcano.sh/tor": "t1"}))
    controller.reconcile()
    spec = _spec_calls(server)
    verbs = {{"POST": "create", "PUT": "update", "DELETE": "delete"}[m] for m, _ in spec}
    assert {path.rsplit("/", 1)[0] if path != HN else path for _, path in spec} == {HN}
    status = [(m, p) for m, p in server.calls if p.endswith("/status")]
    assert status and {m for m, _ in status} == {"PUT"}
    (role,) = [d for d in _optional() if d["kind"] == "ClusterRole"]
    rule, status_rule = role["rules"]
    assert (rule["apiGroups"], rule["resources"]) == (["topology.volcano.sh"], ["hypernodes"])
    assert set(rule["verbs"]) == verbs == {"create", "update", "delete"}
    assert (status_rule["apiGroups"], status_rule["resources"], status_rule["verbs"]) == (
        ["topology.volcano.sh"], ["hypernodes/status"], ["update"])
    (binding,) = [d for d in _optional() if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "lahar-scheduler",
                                    "namespace": "lahar-system"}]


def test_deployment_patch_mounts_the_config_the_flag_names() -> None:
    deployment = next(d for d in yaml.safe_load_all(
        (ROOT / "conf" / "deploy" / "40-deployment.yaml").read_text()) if d)
    for op in json.loads((OPTIONAL / "hypernode-discovery-patch.json").read_text()):
        assert op["op"] == "add" and op["path"].endswith("/-")
        target: Any = deployment
        for part in op["path"].strip("/").split("/")[:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target.append(op["value"])
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = normalize(build_parser().parse_args(container["args"]))
    config = Path(args.hypernode_discovery_config)
    (mount,) = [m for m in container["volumeMounts"] if Path(m["mountPath"]) == config.parent]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    (configmap,) = [d for d in _optional() if d["kind"] == "ConfigMap"]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    assert configmap["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert config.name in configmap["data"]
    from scheduler.cluster.discovery import parse_discovery_config

    parsed = parse_discovery_config(configmap["data"][config.name], source="configmap")
    assert parsed.enabled and parsed.topology_types and not parsed.warnings
