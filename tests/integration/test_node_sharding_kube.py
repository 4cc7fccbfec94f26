"""Node sharding through the API: ``lahar shard-controller`` writing NodeShards and two
``lahar run`` schedulers in hard mode, each on its shard, against the API server double.

Follows Volcano's sharding controller (pkg/controllers/sharding/sharding_controller.go:
syncShards, applyAssignment, createShard, cleanupStaleNodeShards) and scheduler cache
(pkg/scheduler/cache/shard_coordinator.go: UpdateNodeShardStatus).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kube_helpers import RunningScheduler, make_node, wait_until

from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.shardcontroller import ShardController
from scheduler.cluster.sharding.config import parse_sharding_yaml
from tests.apiserver import DEFAULT_COLLECTIONS, ApiServerDouble
from tests.apiserver.store import NODESHARDS

BANDS = """
schedulerConfigs:
  - name: busy
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.5, maxCPUUtil: 1.0}}
  - name: idle
    policies:
      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.49}}
      - {name: node-limit, arguments: {maxNodes: 2}}
"""


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    double = ApiServerDouble(collections=(*DEFAULT_COLLECTIONS, NODESHARDS),
                             status_subresources=("queues", "pods", "nodeshards"))
    double.start()
    try:
        yield double
    finally:
        double.stop()


def running_pod(name: str, node: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running"}}


def shard_nodes(apiserver: ApiServerDouble, name: str) -> list[str] | None:
    shard = apiserver.get(NODESHARDS, name)
    return None if shard is None else list(shard["spec"]["nodesDesired"])


def test_controller_writes_shards_by_allocation_band(apiserver: ApiServerDouble) -> None:
    """Nodes at 50% CPU or more go to ``busy``; of the rest ``idle`` takes two, fullest first
    (allocation-rate's score); a change of rate moves nodes; a scheduler dropped from the
    config loses its NodeShard."""
    for i in range(4):
        apiserver.create("v1/nodes", make_node(f"n{i}", cpu="4"))
    apiserver.create("v1/pods", running_pod("p0", "n0", "3"))
    apiserver.create("v1/pods", running_pod("p1", "n1", "1"))
    apiserver.create("v1/pods", running_pod("p2", "n2", "500m"))
    client = KubeClient.for_host(apiserver.url)
    try:
        controller = ShardController(client, config=parse_sharding_yaml(BANDS),
                                     sync_period=60.0)
        group = controller.reflectors()
        controller.reflectors = lambda: group  # type: ignore[method-assign]
        controller.run(threading.Event(), once=True)
        assert not any(thread.is_alive() for thread in group.threads)  # --once ends them
        del controller.reflectors
        assert shard_nodes(apiserver, "busy") == ["n0"]
        assert shard_nodes(apiserver, "idle") == ["n1", "n2"]
        # A node filling up is a significant change; the next sync moves it.
        apiserver.create("v1/pods", running_pod("p3", "n1", "2"))
        apiserver.create(NODESHARDS, {"apiVersion": "shard.volcano.sh/v1alpha1",
                                      "kind": "NodeShard", "metadata": {"name": "gone"},
                                      "spec": {"nodesDesired": ["n3"]}})
        stop = threading.Event()
        runner = threading.Thread(target=controller.run, args=(stop,), daemon=True)
        runner.start()
        try:
            # One sync writes busy, idle and the deletion one request after another: wait for
            # the last of them, not the first.
            wait_until(lambda: (shard_nodes(apiserver, "busy"), shard_nodes(apiserver, "idle"),
                                shard_nodes(apiserver, "gone"))
                       == (["n0", "n1"], ["n2", "n3"], None), timeout=10.0,
                       message="busy shard takes n1, idle takes n3, gone is deleted")
        finally:
            stop.set()
            runner.join(10.0)
    finally:
        client.close()
    writes = {(r.method, r.path.split("?")[0]) for r in apiserver.requests
              if r.method in ("POST", "PATCH", "PUT", "DELETE")}
    assert writes == {("POST", "/apis/shard.volcano.sh/v1alpha1/nodeshards"),
                      ("PATCH", "/apis/shard.volcano.sh/v1alpha1/nodeshards/busy"),
                      ("PATCH", "/apis/shard.volcano.sh/v1alpha1/nodeshards/idle"),
                      ("DELETE", "/apis/shard.volcano.sh/v1alpha1/nodeshards/gone")}


def test_two_hard_schedulers_keep_to_their_shards(apiserver: ApiServerDouble) -> None:
    """Two ``lahar run`` with distinct names and ``--scheduler-sharding-mode hard``: every pod
    lands in its scheduler's shard, and each scheduler reports its shard's status."""
    for i in range(4):
        apiserver.create("v1/nodes", make_node(f"n{i}", cpu="2"))
    for name, nodes in (("a", ["n0", "n1"]), ("b", ["n2", "n3"])):
        apiserver.create(NODESHARDS, {"apiVersion": "shard.volcano.sh/v1alpha1",
                                      "kind": "NodeShard", "metadata": {"name": name},
                                      "spec": {"nodesDesired": nodes}})
    for i in range(8):
        scheduler = "a" if i % 2 else "b"
        apiserver.create("v1/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default"},
            "spec": {"schedulerName": scheduler, "containers": [
                {"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending"}})
    runs = [RunningScheduler("--master", apiserver.url, "--leader-elect=false",
                             "--schedule-period=50ms", f"--scheduler-name={name}",
                             "--scheduler-sharding-mode=hard",
                             f"--scheduler-sharding-name={name}",
                             "--enable-podgroup-controller")
            for name in ("a", "b")]
    try:
        def placed() -> dict[str, str]:
            pods = [apiserver.get("v1/pods", f"default/p{i}") or {} for i in range(8)]
            return {f"p{i}": pod.get("spec", {}).get("nodeName", "")
                    for i, pod in enumerate(pods)}
        wait_until(lambda: all(placed().values()), timeout=15.0, message="all pods bound")
        for name, node in placed().items():
            odd = int(name[1:]) % 2 == 1
            assert node in (("n0", "n1") if odd else ("n2", "n3")), (name, node)
        wait_until(lambda: (apiserver.get(NODESHARDS, "a") or {}).get("status", {}).get(
            "nodesInUse") == ["n0", "n1"], timeout=5.0, message="shard a's status")
        assert apiserver.get(NODESHARDS, "b")["status"] == {  # type: ignore[index]
            "nodesInUse": ["n2", "n3"], "nodesToAdd": [], "nodesToRemove": []}
    finally:
        for run in runs:
            run.stop()


def test_optional_rbac_grants_what_scheduler_and_controller_call() -> None:
    """conf/deploy/optional/node-sharding.yaml: the scheduler reads NodeShards and patches
    their status; the controller reads nodes, pods and NodeShards and creates, patches and
    deletes NodeShards. Nothing more."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "conf" / "deploy" / "optional"
    documents = [d for d in yaml.safe_load_all((path / "node-sharding.yaml").read_text()) if d]
    roles = {d["metadata"]["name"]: d for d in documents if d["kind"] == "ClusterRole"}

    def grants(role: str) -> set[tuple[str, str, str]]:
        return {(group, resource, verb) for rule in roles[role]["rules"]
                for group in rule["apiGroups"] for resource in rule["resources"]
                for verb in rule["verbs"]}

    shard = "shard.volcano.sh"
    assert grants("lahar-scheduler-node-sharding") == {
        (shard, "nodeshards", "list"), (shard, "nodeshards", "watch"),
        (shard, "nodeshards/status", "patch")}
    assert grants("lahar-shard-controller") == {
        ("", "nodes", "list"), ("", "nodes", "watch"), ("", "pods", "list"),
        ("", "pods", "watch"), (shard, "nodeshards", "list"), (shard, "nodeshards", "watch"),
        (shard, "nodeshards", "create"), (shard, "nodeshards", "patch"),
        (shard, "nodeshards", "delete")}
    bindings = {d["roleRef"]["name"]: d["subjects"] for d in documents
                if d["kind"] == "ClusterRoleBinding"}
    assert set(bindings) == set(roles)
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "shard-controller"
    from scheduler.commands.cli import build_parser

    build_parser().parse_args(container["args"])  # every flag is accepted
    scheduler = next(d for d in yaml.safe_load_all(
        (path.parent / "40-deployment.yaml").read_text()) if d)
    (scheduler_container,) = scheduler["spec"]["template"]["spec"]["containers"]
    args = list(scheduler_container["args"])
    for op in json.loads((path / "node-sharding-patch.json").read_text()):
        assert op["op"] == "add" and op["path"] == "/spec/template/spec/containers/0/args/-"
        args.append(op["value"])
    parsed = build_parser().parse_args(args)
    assert (parsed.scheduler_sharding_mode, parsed.scheduler_sharding_name) == ("hard",
                                                                                "volcano")


def test_once_fails_when_the_shards_cannot_be_written(apiserver: ApiServerDouble,
                                                      tmp_path: Any,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``lahar shard-controller --once`` exits 1 when a NodeShard write failed (here: refused
    by the server), and 2 for a configuration that does not parse."""
    from scheduler.commands.cli import main

    apiserver.create("v1/nodes", make_node("n0", cpu="4"))
    apiserver.fail("POST", "^/apis/shard.volcano.sh/", 403, times=10)
    config = tmp_path / "sharding.yaml"
    config.write_text(BANDS)
    assert main(["shard-controller", "--master", apiserver.url, "--sharding-config",
                 str(config), "--once"]) == 1
    assert "NodeShard write(s) failed" in capsys.readouterr().err
    config.write_text("schedulerConfigs: []")
    assert main(["shard-controller", "--master", apiserver.url, "--sharding-config",
                 str(config), "--once"]) == 2
    assert "at least one schedulerConfig entry" in capsys.readouterr().err


def test_a_node_changes_hands_only_once_its_old_shard_lets_it_go(
        apiserver: ApiServerDouble) -> None:
    """The hand-over of getAvailableNodesFromShard: n2 added to shard a's nodesDesired is not
    a's while shard b's status still lists it in nodesInUse (a reports it in nodesToAdd); once
    b's spec drops it, b's scheduler writes its new status and a's scheduler places there."""
    for i in range(4):
        apiserver.create("v1/nodes", make_node(f"n{i}", cpu="2", labels={"name": f"n{i}"}))
    for name, nodes in (("a", ["n0", "n1"]), ("b", ["n2", "n3"])):
        apiserver.create(NODESHARDS, {"apiVersion": "shard.volcano.sh/v1alpha1",
                                      "kind": "NodeShard", "metadata": {"name": name},
                                      "spec": {"nodesDesired": nodes}})
    apiserver.create("v1/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wants-n2", "namespace": "default"},
        "spec": {"schedulerName": "a", "nodeSelector": {"name": "n2"}, "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"}})
    runs = [RunningScheduler("--master", apiserver.url, "--leader-elect=false",
                             "--schedule-period=50ms", f"--scheduler-name={name}",
                             "--scheduler-sharding-mode=hard",
                             f"--scheduler-sharding-name={name}")
            for name in ("a", "b")]

    def status(name: str) -> dict[str, Any]:
        return dict((apiserver.get(NODESHARDS, name) or {}).get("status") or {})

    def node_of_pod() -> str:
        return str((apiserver.get("v1/pods", "default/wants-n2") or {}).get("spec", {})
                   .get("nodeName", ""))

    try:
        wait_until(lambda: status("b").get("nodesInUse") == ["n2", "n3"], timeout=10.0,
                   message="b uses n2 and n3")
        shard_a = apiserver.get(NODESHARDS, "a")
        assert shard_a is not None
        shard_a["spec"]["nodesDesired"] = ["n0", "n1", "n2"]
        apiserver.update(NODESHARDS, shard_a)
        wait_until(lambda: status("a").get("nodesToAdd") == ["n2"], timeout=5.0,
                   message="a waits for n2")
        time.sleep(0.5)  # several cycles of a
        assert node_of_pod() == ""
        shard_b = apiserver.get(NODESHARDS, "b")
        assert shard_b is not None
        shard_b["spec"]["nodesDesired"] = ["n3"]
        apiserver.update(NODESHARDS, shard_b)
        wait_until(lambda: node_of_pod() == "n2", timeout=10.0, message="the pod on n2")
        assert status("b")["nodesInUse"] == ["n3"]
        wait_until(lambda: status("a").get("nodesInUse") == ["n0", "n1", "n2"], timeout=5.0,
                   message="a uses n2")
    finally:
        for run in runs:
            run.stop()
