"""Device sharing through the API server: GPU share card choice, vGPU with the node lock."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Case, default_conf
from tests.e2e.kube import annotations, eventually, raw


def _deviceshare_missing() -> bool:
    import plugins

    return "deviceshare" not in plugins.PLUGINS


def _nodeside() -> Any:
    try:
        return importlib.import_module("scheduler.devices.node.handshake")
    except ImportError:
        return None


def conf_with(arguments: dict[str, Any]) -> str:
    lines = "".join(f"      {key}: {str(value).lower() if isinstance(value, bool) else value}\n"
                    for key, value in arguments.items())
    return default_conf() + f"  - name: deviceshare\n    arguments:\n{lines}"


class ClusterAccess:
    """The node side's view of the cluster, through the official client (what a device plugin
    running on the node would use)."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.core = case.kube.core

    def get_node(self, name: str) -> dict[str, Any]:
        return raw(self.core.read_node, name)

    def replace_node(self, node: dict[str, Any]) -> dict[str, Any]:
        return raw(self.core.replace_node, node["metadata"]["name"], node)

    def list_pods_on_node(self, node_name: str) -> list[dict[str, Any]]:
        return list(raw(self.core.list_pod_for_all_namespaces,
                        field_selector=f"spec.nodeName={node_name}").get("items") or [])

    def patch_pod_annotations(self, namespace: str, name: str,
                              annotations: dict[str, str | None]) -> None:
        raw(self.core.patch_namespaced_pod, name, namespace,
            {"metadata": {"annotations": annotations}})


@pytest.fixture
def device_plugin(own_case: Case) -> Iterator[list[Any]]:
    """Runs the vGPU node-side handshake on the case's nodes, as the device plugin would."""
    module = _nodeside()
    from scheduler.devices.names import VOLCANO

    results: list[Any] = []
    stop = threading.Event()
    access = ClusterAccess(own_case)

    def loop() -> None:
        while not stop.wait(0.2):
            for node in list(own_case.nodes):
                try:
                    result = module.handshake_node(access, node, VOLCANO, time.time())
                except Exception:  # the node side retries on its next Allocate
                    continue
                if result is not None:
                    results.append(result)

    thread = threading.Thread(target=loop, daemon=True, name="device-plugin")
    thread.start()
    yield results
    stop.set()
    thread.join(5.0)


@pytest.mark.skipif(_deviceshare_missing(), reason="plugins.PLUGINS has no deviceshare plugin")
def test_gpu_share_picks_cards_and_writes_gpu_index(own_case: Case) -> None:
    case = own_case
    if not case.settings.fake_nodes:
        pytest.skip("needs nodes advertising known volcano.sh/gpu-* capacity "
                    "(LAHAR_E2E_FAKE_NODES=1)")
    # Two cards of 16000 MiB: each takes one 10000 MiB pod, a third pod fits on no single card
    # although the node still has 12000 MiB free in total.
    case.add_nodes(1, units=8, extra={"volcano.sh/gpu-memory": "32000",
                                      "volcano.sh/gpu-number": "2"})
    pods = [name for i in range(3)
            for name in case.job(f"infer-{i}", pods=1,
                                 limits={"volcano.sh/gpu-memory": "10000"})]
    scheduler = case.start_scheduler(conf=conf_with({"deviceshare.GPUSharingEnable": True}))
    scheduler.wait_serving()
    eventually(lambda: len(case.bound(pods)) == 2, what="two GPU pods bound")
    time.sleep(1.0)  # a few more cycles: the third must still wait
    bound = case.bound(pods)
    assert len(bound) == 2
    cards = sorted(annotations(case.kube.pod(case.namespace, pod)).get("volcano.sh/gpu-index", "")
                   for pod in bound)
    assert cards == ["0", "1"]
    (waiting,) = [pod for pod in pods if pod not in bound]
    eventually(lambda: case.kube.events(case.namespace, name=waiting,
                                        reason="FailedScheduling"),
               what="FailedScheduling on the pod no card can hold")


@pytest.mark.skipif(_deviceshare_missing(), reason="plugins.PLUGINS has no deviceshare plugin")
@pytest.mark.skipif(_nodeside() is None,
                    reason="scheduler.devices.node.handshake (the node-side handshake) is absent")
def test_vgpu_pods_pass_the_node_lock_one_after_another(own_case: Case,
                                                        device_plugin: list[Any]) -> None:
    case = own_case
    if not case.settings.fake_nodes:
        pytest.skip("needs a node with a known vGPU register annotation (LAHAR_E2E_FAKE_NODES=1)")
    from scheduler.devices.names import VOLCANO

    register = "GPU-e2e0,10,40000,NVIDIA-A100,true,hami-core:GPU-e2e1,10,40000,NVIDIA-A100,true,hami-core:"
    (node,) = case.add_nodes(1, units=8, annotations={VOLCANO.register: register},
                             extra={VOLCANO.count: "20", VOLCANO.memory: "80000",
                                    VOLCANO.cores: "200"})
    pods = [name for i in range(3)
            for name in case.job(f"train-{i}", pods=1,
                                 limits={VOLCANO.count: "1", VOLCANO.memory: "8000"})]
    scheduler = case.start_scheduler(conf=conf_with({
        "deviceshare.VGPUEnable": True, "deviceshare.VGPUProfile": "volcano",
        "deviceshare.NodeLockEnable": True}))
    scheduler.wait_serving()
    eventually(lambda: len(case.bound(pods)) == 3, timeout=60.0,
               what="all vGPU pods bound, one node lock at a time")
    eventually(lambda: all(annotations(case.kube.pod(case.namespace, pod))
                           .get(VOLCANO.bind_phase) == "success" for pod in pods),
               what="bind-phase success on every pod")
    eventually(lambda: VOLCANO.lock not in annotations(case.kube.node(node)),
               what="node lock released")
    # The handshake thread records its result after its last write to the API server, so
    # the writes above can be seen a moment before the record.
    eventually(lambda: len({result.pod for result in device_plugin}) == 3,
               what="a node-side handshake recorded for every pod")
    for pod in pods:
        assert annotations(case.kube.pod(case.namespace, pod)).get(VOLCANO.assigned_node) == node
