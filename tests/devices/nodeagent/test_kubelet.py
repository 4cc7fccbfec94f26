"""The agent as kubelet drives it over gRPC: registration, ListAndWatch, health, restarts.

Registration, ``ListAndWatch`` and the re-registration after a kubelet restart follow the
peers' device plugins (volcano-device-plugin ``pkg/plugin/nvidia/server.go`` ``Serve`` /
``Register`` / ``ListAndWatch`` and ``cmd/vgpu/main.go``'s restart on a new ``kubelet.sock``;
HAMi ``nvinternal/plugin/server.go``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc
import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.names import VOLCANO
from scheduler.devices.node.nodelock import NodeLocker, NodeLockError, format_lock
from tests.builders import make_node
from tests.devices.nodeagent.cluster import MemoryCluster, pod, vgpu_annotations
from tests.devices.nodeagent.conftest import Running
from tests.devices.nodeagent.fakekubelet import FakeKubelet

ALL = {"volcano.sh/vgpu-number", "nvidia.com/gpu", "koordinator.sh/gpu-core",
       "koordinator.sh/gpu-memory-ratio", "koordinator.sh/gpu", "koordinator.sh/rdma"}


def test_every_resource_registers_and_lists_its_virtual_devices(
        kubelet: FakeKubelet, start_agent: Callable[..., Running]) -> None:
    start_agent(DeviceConfig(vgpu=True, finegrained=True), split_count=4)
    assert kubelet.wait_registered(ALL)
    assert {r for r, _, _ in kubelet.registrations} == ALL
    assert len(kubelet.healthy("volcano.sh/vgpu-number")) == 2 * 4
    assert len(kubelet.healthy("nvidia.com/gpu")) == 2
    assert len(kubelet.healthy("koordinator.sh/gpu-core")) == 200
    options = kubelet.plugins["nvidia.com/gpu"].stub.GetDevicePluginOptions(
        __import__("scheduler.devices.node.kubeletapi.api_pb2", fromlist=["Empty"]).Empty())
    assert options.get_preferred_allocation_available and not options.pre_start_required


def test_an_unhealthy_card_leaves_list_and_watch_within_a_second(
        kubelet: FakeKubelet, start_agent: Callable[..., Running]) -> None:
    run = start_agent(DeviceConfig(vgpu=True), split_count=2)
    assert kubelet.wait_registered({"volcano.sh/vgpu-number"})
    bad = run.source.read().gpus[1].uuid
    began = time.monotonic()
    run.source.set_health(bad, False)
    assert kubelet.wait(lambda: len(kubelet.healthy("volcano.sh/vgpu-number")) == 2, timeout=1.0)
    assert time.monotonic() - began < 1.0
    assert all(not i.startswith(bad) for i in kubelet.healthy("volcano.sh/vgpu-number"))
    # the register annotation says so too, and recovery comes back the same way
    assert run.agent.reported.wait(1.0)
    assert kubelet.wait(lambda: f"{bad},2,16384,NVIDIA-NVIDIA Lahar-Fake-GPU,false" in
                        run.cluster.node_annotations().get(VOLCANO.register, ""), timeout=1.0)
    run.source.set_health(bad, True)
    assert kubelet.wait(lambda: len(kubelet.healthy("volcano.sh/vgpu-number")) == 4, timeout=1.0)


def test_kubelet_restart_means_serving_and_registering_again(
        kubelet: FakeKubelet, start_agent: Callable[..., Running]) -> None:
    run = start_agent(DeviceConfig(gpu_sharing=True))
    assert kubelet.wait_registered({"volcano.sh/gpu-memory"})
    kubelet.restart()
    assert kubelet.wait_registered({"volcano.sh/gpu-memory"}, timeout=5.0)
    assert len(kubelet.registrations) == 2
    assert run.agent.plugins is not None and run.agent.plugins.registrations == 2
    run.cluster.pods.append(pod("p", annotations={"volcano.sh/gpu-index": "1",
                                                  "volcano.sh/predicate-time": "1"},
                                containers=[("main", {"volcano.sh/gpu-memory": "100"})]))
    answer = kubelet.allocate("volcano.sh/gpu-memory", 100)
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == "1"


def test_a_refused_allocate_is_a_grpc_error_naming_the_pod(
        kubelet: FakeKubelet, start_agent: Callable[..., Running]) -> None:
    run = start_agent(DeviceConfig(vgpu=True, node_lock=True))
    assert kubelet.wait_registered({"volcano.sh/vgpu-number"})
    annotations = vgpu_annotations(VOLCANO, "nonsense", bind_time=1)
    run.cluster.pods.append(pod("broken", annotations=annotations,
                                containers=[("main", {"volcano.sh/vgpu-number": "1"})]))
    with pytest.raises(grpc.RpcError) as caught:
        kubelet.allocate("volcano.sh/vgpu-number", 1)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "pod ml/broken has an unreadable volcano.sh/devices-to-allocate" in \
        caught.value.details()
    assert run.cluster.pod_annotations("broken")[VOLCANO.bind_phase] == "failed"


def test_agent_restart_between_two_containers_finishes_the_handshake(
        kubelet: FakeKubelet, start_agent: Callable[..., Running]) -> None:
    cluster = MemoryCluster(make_node("gpu-1", annotations={VOLCANO.lock: format_lock(
        time.time())}))
    first = start_agent(DeviceConfig(vgpu=True, node_lock=True), cluster=cluster)
    assert kubelet.wait_registered({"volcano.sh/vgpu-number"})
    a, b = (g.uuid for g in first.source.read().gpus)
    text = f"{a},NVIDIA,1000,10:;{b},NVIDIA,2000,20:"
    cluster.pods.append(pod("two", annotations=vgpu_annotations(VOLCANO, text, bind_time=1),
                            containers=[("a", {"volcano.sh/vgpu-number": "1"}),
                                        ("b", {"volcano.sh/vgpu-number": "1"})]))
    assert kubelet.allocate("volcano.sh/vgpu-number", 1).envs["NVIDIA_VISIBLE_DEVICES"] == a
    first.agent.stop()
    registered = len(kubelet.registrations)
    start_agent(DeviceConfig(vgpu=True, node_lock=True), cluster=cluster, source=first.source)
    assert kubelet.wait(lambda: len(kubelet.registrations) > registered)
    assert kubelet.wait_registered({"volcano.sh/vgpu-number"})
    answer = kubelet.allocate("volcano.sh/vgpu-number", 1)
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == b
    assert answer.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2000m"
    assert cluster.pod_annotations("two")[VOLCANO.bind_phase] == "success"
    assert VOLCANO.lock not in cluster.node_annotations()


def test_two_pods_racing_for_the_node_lock_pass_one_at_a_time(
        kubelet: FakeKubelet, start_agent: Callable[..., Running]) -> None:
    """Two schedulers try to lock the node for their pod while the agent admits: one wins at a
    time, each pod is served once, by its own devices, and the lock ends released."""
    cluster = MemoryCluster(make_node("gpu-1"))
    run = start_agent(DeviceConfig(vgpu=True, node_lock=True), cluster=cluster)
    assert kubelet.wait_registered({"volcano.sh/vgpu-number"})
    a, b = (g.uuid for g in run.source.read().gpus)
    cards = {"one": a, "two": b}
    lockers = {name: NodeLocker(access=cluster, sleep=lambda _: time.sleep(0.001))
               for name in cards}
    served: dict[str, str] = {}
    errors: list[BaseException] = []
    gate = threading.Barrier(2)

    def scheduler(name: str) -> None:
        gate.wait()
        while True:
            try:
                lockers[name].acquire("gpu-1", VOLCANO.lock)
                break
            except NodeLockError:
                time.sleep(0.005)  # locked by the other one: wait for the agent to release
        with cluster.lock:
            cluster.pods.append(pod(name, annotations=vgpu_annotations(
                VOLCANO, f"{cards[name]},NVIDIA,1000,0:", bind_time=1),
                containers=[("main", {"volcano.sh/vgpu-number": "1"})]))
        try:
            answer = kubelet.allocate("volcano.sh/vgpu-number", 1, preferred=False)
            served[name] = answer.envs["NVIDIA_VISIBLE_DEVICES"]
        except BaseException as exc:
            errors.append(exc)

    # A lock younger than the TTL blocks the other scheduler until the agent releases it.
    threads = [threading.Thread(target=scheduler, args=(n,)) for n in cards]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors and served == cards
    assert VOLCANO.lock not in cluster.node_annotations()
    assert {cluster.pod_annotations(n)[VOLCANO.bind_phase] for n in cards} == {"success"}
