"""HyperNode ``status.nodeCount`` as Volcano's HyperNode controller writes it
(``pkg/controllers/hypernode/hypernode_handler.go`` ``syncHyperNodeStatus`` / ``actualNodeCnt``
over ``pkg/util/hypernode/member_selector.go`` ``GetMembers``): the distinct names the members
select, not the nodes under the HyperNode. Written by ``lahar run``'s discovery controller,
shown in ``lahar simulate``'s output and counted so by ``lahar inspect topology``."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.hypernode import hypernode_from_object, status_node_count
from scheduler.cluster.kube.client import ApiError
from scheduler.commands.cli import main
from scheduler.commands.inspect_topology import inspect_topology, render_topology
from tests.builders import make_hypernode, make_node
from tests.unit.test_discovery_controller import _controller, _Server

Obj = dict[str, Any]

# hypernode_handler_test.go:327 getNodes
NODES = {"node1": {"zone": "east"}, "node2": {}, "node3": {}, "node4": {"zone": "west"},
         "master": {}}


def _members(*members: Obj) -> Obj:
    return {"kind": "HyperNode", "metadata": {"name": "hn"},
            "spec": {"tier": 1, "members": list(members)}}


def _m(kind: str, selector: Obj) -> Obj:
    return {"type": kind, "selector": selector}


@pytest.mark.parametrize(
    ("members", "count"),
    [
        pytest.param([_m("Node", {"exactMatch": {"name": f"node{i}"}}) for i in (1, 2, 3)], 3,
                     id="exact-hypernode_handler_test.go:167"),
        pytest.param([_m("Node", {"exactMatch": {"name": "master"}}),
                      _m("Node", {"labelMatch": {"matchLabels": {"zone": "east"}}}),
                      _m("Node", {"regexMatch": {"pattern": "node[1-3]"}})], 4,
                     id="exact-label-regex-hypernode_handler_test.go:254"),
        pytest.param([_m("Node", {"exactMatch": {"name": "master"}}),
                      _m("Node", {"labelMatch": {}}),
                      _m("HyperNode", {"regexMatch": {"pattern": "node[2-4]"}})], 4,
                     id="empty-label-hypernode-regex-hypernode_handler_test.go:271"),
        pytest.param([_m("Node", {"exactMatch": {"name": "gone-1"}}),
                      _m("Node", {"exactMatch": {"name": "node1"}})], 2,
                     id="a-listed-node-that-does-not-exist-counts"),
        pytest.param([_m("HyperNode", {"exactMatch": {"name": "leaf-a"}}),
                      _m("HyperNode", {"exactMatch": {"name": "leaf-b"}})], 2,
                     id="hypernode-members-count-by-name"),
        pytest.param([_m("Node", {"regexMatch": {"pattern": "^node"}}),
                      _m("Node", {"exactMatch": {"name": "node1"}})], 4,
                     id="a-name-selected-twice-counts-once"),
        pytest.param([_m("Node", {"regexMatch": {"pattern": "(?=x)"}})], 0,
                     id="a-refused-pattern-selects-none"),
    ],
)
def test_status_node_count_is_volcanos_actual_node_count(members: list[Obj], count: int) -> None:
    assert status_node_count(hypernode_from_object(_members(*members)), NODES) == count


def _cluster() -> list[Obj]:
    """spine = leaf-a (n1, n2, and n9 which does not exist) + leaf-b (n3, n4)."""
    return [*(make_node(f"n{i}") for i in range(1, 5)),
            make_hypernode("leaf-a", tier=1, nodes=["n1", "n2", "n9"]),
            make_hypernode("leaf-b", tier=1, nodes=["n3", "n4"]),
            make_hypernode("spine", tier=2, hypernodes=["leaf-a", "leaf-b"])]


def test_simulate_output_carries_status_node_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(_cluster()))
    assert main(["simulate", str(path), "-o", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    counts = {o["metadata"]["name"]: o["status"]["nodeCount"]
              for o in items if o["kind"] == "HyperNode"}
    assert counts == {"leaf-a": 3, "leaf-b": 2, "spine": 2}


def test_inspect_topology_counts_as_volcano() -> None:
    """Before, the spine showed 4 (the nodes under it) where Volcano's status says 2."""
    report = inspect_topology(_cluster())
    assert report.node_counts == {"leaf-a": 3, "leaf-b": 2, "spine": 2}
    lines = render_topology(report).splitlines()
    assert lines[0].split()[:4] == ["HYPERNODE", "/", "NODE", "TIER"]
    assert "NODECOUNT" in lines[0]
    spine = next(line for line in lines if line.startswith("└── spine"))
    assert spine.split()[2:4] == ["2", "2"]


def test_run_discovery_writes_status_node_count_of_every_hypernode(tmp_path: Path) -> None:
    """syncHyperNodeStatus (hypernode_handler.go:86): on a HyperNode's add or update, its
    status subresource gets the count when it differs; a matching one is left alone
    (hypernode_handler_test.go:194); a failed write is tried again."""
    server = _Server()
    controller = _controller(tmp_path, server)
    for i in range(1, 5):
        controller.observe("Node", "ADDED", make_node(f"n{i}"))
    for obj in _cluster()[4:]:
        server.objects[obj["metadata"]["name"]] = json.loads(json.dumps(obj))
        controller.observe("HyperNode", "ADDED", obj)
    matching = make_hypernode("leaf-c", tier=1, nodes=["n1"])
    matching["status"] = {"nodeCount": 1}
    controller.observe("HyperNode", "ADDED", matching)
    controller.reconcile()
    written = {p.rsplit("/", 2)[1]: m for m, p in server.calls if p.endswith("/status")}
    assert written == {"leaf-a": "PUT", "leaf-b": "PUT", "spine": "PUT"}
    assert {n: server.objects[n]["status"]["nodeCount"] for n in written} == {
        "leaf-a": 3, "leaf-b": 2, "spine": 2}
    server.calls.clear()
    controller.observe("HyperNode", "MODIFIED", server.objects["spine"])
    controller.reconcile()
    assert server.calls == []


class _FailingOnce(_Server):
    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def request_json(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        if path.endswith("/status") and not self.failed:
            self.failed = True
            self.calls.append((method, path))
            raise ApiError(500, "InternalError")
        return super().request_json(method, path, **options)


def test_a_failed_status_write_is_tried_again(tmp_path: Path) -> None:
    """hypernode_handler.go:73-76: an error puts the key back (AddRateLimited)."""
    server = _FailingOnce()
    controller = _controller(tmp_path, server)
    controller.observe("Node", "ADDED", make_node("n1"))
    obj = make_hypernode("leaf", tier=1, nodes=["n1"])
    server.objects["leaf"] = json.loads(json.dumps(obj))
    controller.observe("HyperNode", "ADDED", obj)
    assert not controller.sync_statuses()
    assert controller.sync_statuses()
    assert server.objects["leaf"]["status"] == {"nodeCount": 1}


def test_the_thread_writes_the_count_of_a_hypernode_added_later(tmp_path: Path) -> None:
    """A HyperNode added while ``lahar run`` runs (addHyperNode, hypernode_handler.go:33)
    gets its count from the controller's thread, without a discovery pass."""
    server = _Server()
    controller = _controller(tmp_path, server, debounce=0.01, poll=0.01)
    controller.observe("Node", "ADDED", make_node("n1"))
    stop = threading.Event()
    controller.start(stop)
    try:
        obj = make_hypernode("leaf", tier=1, nodes=["n1", "gone"])
        server.objects["leaf"] = json.loads(json.dumps(obj))
        controller.observe("HyperNode", "ADDED", obj)
        deadline = time.monotonic() + 5
        while "status" not in server.objects["leaf"] and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        controller.join(2.0)
    assert server.objects["leaf"]["status"] == {"nodeCount": 2}
    assert [m for m, p in server.calls if not p.endswith("/status")] == []
