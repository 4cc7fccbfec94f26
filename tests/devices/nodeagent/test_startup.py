"""What keeps the agent's start-up and ``Allocate`` cheap: the modules imported before it
registers with kubelet, the deferred API connection, the Node replace's single write, and the
watched pods of the node (with a list when the watch has not brought the pod yet)."""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from scheduler.cluster.kube.client import ApiError, KubeClient
from scheduler.cluster.kube.nodeaccess import KubeNodeAccess
from scheduler.commands.nodeagent import _DeferredAccess
from scheduler.devices.base import DeviceConfig
from scheduler.devices.names import VOLCANO
from scheduler.devices.node.allocate import Allocator
from scheduler.devices.node.nodelock import format_lock
from scheduler.devices.node.resources import AgentConfig, Endpoint
from tests.apiserver.store import STANDALONE_COLLECTIONS, ApiServerDouble
from tests.builders import make_node
from tests.devices.nodeagent.cluster import MemoryCluster, pod, vgpu_annotations
from tests.devices.nodeagent.conftest import inventory

NOW = 1_767_225_600.0
INV = inventory(gpus=2)


def test_the_agent_serves_without_importing_the_kubernetes_client_numpy_or_the_conf() -> None:
    # Everything node_agent_main imports before agent.start() registers with kubelet.
    code = (
        "import sys\n"
        "import scheduler.commands.cli, scheduler.commands.nodeagent\n"
        "import scheduler.devices.node.agent, scheduler.devices.node.inventory\n"
        "import scheduler.devices.node.report, scheduler.devices.node.resources\n"
        "print(sorted(m for m in ('kubernetes', 'numpy', 'scheduler.conf', 'plugins')"
        " if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


class _Access:
    def get_node(self, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}}


def test_deferred_access_waits_for_the_connection() -> None:
    access = _DeferredAccess()
    got: list[dict[str, Any]] = []
    caller = threading.Thread(target=lambda: got.append(access.get_node("n1")))
    caller.start()
    caller.join(0.2)
    assert caller.is_alive() and not got  # waits: not connected yet
    access.connect(_Access())
    caller.join(5)
    assert got == [{"metadata": {"name": "n1"}}]


def test_deferred_access_without_a_connection_fails() -> None:
    access = _DeferredAccess()
    access.connect(None)
    with pytest.raises(RuntimeError, match="no connection"):
        access.get_node("n1")


class _Client:
    """Answers KubeNodeAccess's requests from one stored Node, recording them."""

    def __init__(self) -> None:
        self.node: dict[str, Any] = {"metadata": {
            "name": "n1", "resourceVersion": "7", "annotations": {"lock": "t", "keep": "1"},
            "labels": {"a": "b"}}}
        self.calls: list[tuple[str, Any]] = []

    def request_json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((method, kwargs.get("body")))
        if method == "PATCH":
            meta = self.node["metadata"]
            for part in ("annotations", "labels"):
                for key, value in (kwargs["body"]["metadata"].get(part) or {}).items():
                    if value is None:
                        meta[part].pop(key, None)
                    else:
                        meta[part][key] = value
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return copy.deepcopy(self.node)


def test_replace_after_a_read_is_one_merge_patch_of_the_difference() -> None:
    client = _Client()
    access = KubeNodeAccess(client)  # type: ignore[arg-type]
    node = access.get_node("n1")
    del node["metadata"]["annotations"]["lock"]
    access.replace_node(node)
    assert [m for m, _ in client.calls] == ["GET", "PATCH"]
    assert client.calls[1][1] == {"metadata": {"resourceVersion": "7",
                                               "annotations": {"lock": None}}}


def test_replace_of_a_node_read_elsewhere_reads_it_and_refuses_a_stale_version() -> None:
    client = _Client()
    access = KubeNodeAccess(client)  # type: ignore[arg-type]
    stale = {"metadata": {"name": "n1", "resourceVersion": "6", "annotations": {}}}
    with pytest.raises(ApiError) as caught:
        access.replace_node(stale)
    assert caught.value.status == 409
    assert [m for m, _ in client.calls] == ["GET"]


def _wait(check: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _bound(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": {}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}]}}


def test_pods_on_the_node_come_from_a_watch_and_the_agents_own_patches_at_once() -> None:
    double = ApiServerDouble(collections=STANDALONE_COLLECTIONS)
    double.start()
    client = KubeClient.for_host(double.url)
    access = KubeNodeAccess(client)
    try:
        double.create("v1/pods", _bound("a", "n1"))
        double.create("v1/pods", _bound("elsewhere", "n2"))

        def names() -> list[str]:
            return sorted(p["metadata"]["name"] for p in access.list_pods_on_node("n1"))

        assert names() == ["a"]
        double.create("v1/pods", _bound("b", "n1"))
        mirror = access._node_pods["n1"]
        # The watch brought it (not the list names() falls back on while the mirror syncs).
        assert _wait(lambda: mirror.pods() is not None and names() == ["a", "b"])
        lists = len([r for r in double.requests_to("GET", r"/api/v1/pods$")
                     if "watch" not in r.query])
        access.patch_pod_annotations("default", "b", {"phase": "x"})
        (b,) = [p for p in access.list_pods_on_node("n1") if p["metadata"]["name"] == "b"]
        assert b["metadata"]["annotations"] == {"phase": "x"}  # no wait for the watch
        assert len([r for r in double.requests_to("GET", r"/api/v1/pods$")
                    if "watch" not in r.query]) == lists  # no list per call
        assert [p["metadata"]["name"] for p in access.list_pods_on_node_uncached("n1")
                ] == ["a", "b"]
    finally:
        access.close()
        client.close()
        double.stop()


class _LaggingCluster(MemoryCluster):
    """A mirror that has not seen the pods yet; the API server has."""

    def list_pods_on_node(self, node_name: str) -> list[dict[str, Any]]:
        self.calls.append("list_pods_on_node (mirror)")
        return []

    def list_pods_on_node_uncached(self, node_name: str) -> list[dict[str, Any]]:
        return super().list_pods_on_node(node_name)


def test_allocate_lists_the_pods_when_the_mirror_has_none_to_serve() -> None:
    lock = format_lock(NOW - 5)
    cluster = _LaggingCluster(make_node("gpu-1", annotations={VOLCANO.lock: lock}))
    config = AgentConfig(node_name="gpu-1", devices=DeviceConfig(vgpu=True, node_lock=True))
    allocator = Allocator(access=cluster, config=config, inventory=lambda: INV,
                          clock=lambda: NOW, sleep=lambda _: None, new_id=lambda: "c0ffee")
    uuid = INV.gpus[0].uuid
    cluster.pods.append(pod("train", containers=[("main", {VOLCANO.count: "1"})],
                            annotations=vgpu_annotations(VOLCANO, f"{uuid},NVIDIA,1024,5:",
                                                         bind_time=100)))
    (answer,) = allocator.allocate(Endpoint(VOLCANO.count, "vgpu"), [["x-0"]])
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == uuid and answer.container == "main"
    assert cluster.pod_annotations("train")[VOLCANO.bind_phase] == "success"
    assert VOLCANO.lock not in cluster.node_annotations()
