"""vGPU ``Allocate`` contract: the scheduler's annotations in, the exact container answer out.

Follows volcano-vgpu's ``pkg/plugin/vgpu/plugin.go`` ``Allocate`` (with ``util.go``
``GetNextDeviceRequest``, ``EraseNextDeviceTypeFromAnnotation``, ``PodAllocationTrySuccess``
and ``PodAllocationFailed``) in volcano-sh/devices, and HAMi's
``pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go`` ``Allocate`` (HAMi-core
environment and mounts; ``GetPendingPod`` serving the pod the ``hami.io/mutex.lock`` names).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.names import HAMI, VOLCANO, VGpuNames
from scheduler.devices.node.allocate import AllocationError, Allocator, Mount
from scheduler.devices.node.nodelock import format_lock
from scheduler.devices.node.resources import AgentConfig, Endpoint
from tests.builders import make_node
from tests.devices.nodeagent.cluster import MemoryCluster, pod, vgpu_annotations
from tests.devices.nodeagent.conftest import inventory

NOW = 1_767_225_600.0
INV = inventory(gpus=2)
A, B = INV.gpus[0].uuid, INV.gpus[1].uuid
PROFILES = pytest.mark.parametrize("names", [VOLCANO, HAMI], ids=lambda n: n.profile)


def setup(names: VGpuNames, *, lock_owner: str = "ml/train") -> tuple[MemoryCluster, Allocator]:
    lock = format_lock(NOW - 5, owner=lock_owner if names.lock_with_owner else None)
    cluster = MemoryCluster(make_node("gpu-1", annotations={names.lock: lock}))
    config = AgentConfig(node_name="gpu-1", devices=DeviceConfig(
        vgpu=True, node_lock=True, profile=names.profile))
    allocator = Allocator(access=cluster, config=config, inventory=lambda: INV,
                          clock=lambda: NOW, sleep=lambda _: None, new_id=lambda: "c0ffee")
    return cluster, allocator


def devices(names: VGpuNames, *containers: str) -> str:
    return "".join(c + ";" for c in containers) if names.profile == "hami" else ";".join(containers)


@PROFILES
def test_two_containers_are_served_in_order_then_success_and_unlock(names: VGpuNames) -> None:
    cluster, allocator = setup(names)
    text = devices(names, f"{A},NVIDIA,4096,25:{B},NVIDIA,4096,25:", f"{A},NVIDIA,2048,0:")
    cluster.pods.append(pod("train", containers=[("main", {names.count: "2"}),
                                                 ("side", {names.count: "1"})],
                            annotations=vgpu_annotations(names, text, bind_time=100)))
    endpoint = Endpoint(names.count, "vgpu")
    (first,) = allocator.allocate(endpoint, [["x-0", "x-1"]])
    hook = "/usr/local/vgpu" if names.profile == "volcano" else "/usr/local"
    cache = "/tmp/vgpu" if names.profile == "volcano" else f"{hook}/vgpu"
    assert dict(first.envs) == {
        "NVIDIA_VISIBLE_DEVICES": f"{A},{B}",
        "CUDA_DEVICE_MEMORY_LIMIT_0": "4096m", "CUDA_DEVICE_MEMORY_LIMIT_1": "4096m",
        "CUDA_DEVICE_SM_LIMIT": "25",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": f"{cache}/c0ffee.cache"}
    if names.profile == "volcano":
        assert first.mounts == (
            Mount("/usr/local/vgpu/libvgpu.so", f"{hook}/libvgpu.so", True),
            Mount("/tmp/vgpu", f"{hook}/vgpu/containers/uid-train_main", False),
            Mount("/tmp/vgpulock", "/tmp/vgpulock", False),
            Mount("/etc/ld.so.preload", f"{hook}/ld.so.preload", True))
    else:
        assert first.mounts == (
            Mount(f"{hook}/vgpu/libvgpu.so", f"{hook}/vgpu/libvgpu.so", True),
            Mount(f"{hook}/vgpu", f"{hook}/vgpu/containers/uid-train_main", False),
            Mount("/tmp/vgpulock", "/tmp/vgpulock", False),
            Mount("/etc/ld.so.preload", f"{hook}/vgpu/ld.so.preload", True))
    # the first container is erased; the pod still allocating, the node still locked
    left = cluster.pod_annotations("train")
    assert left[names.to_allocate] == devices(names, "", f"{A},NVIDIA,2048,0:")
    assert left[names.bind_phase] == "allocating" and names.lock in cluster.node_annotations()
    (second,) = allocator.allocate(endpoint, [["y-0"]])
    assert second.envs["NVIDIA_VISIBLE_DEVICES"] == A and second.container == "side"
    assert second.envs["CUDA_DEVICE_SM_LIMIT"] == "0"
    done = cluster.pod_annotations("train")
    assert done[names.bind_phase] == "success"
    assert done[names.allocated] == text  # the durable record stays
    assert names.lock not in cluster.node_annotations()


def test_cuda_disable_control_drops_the_preload_mount() -> None:
    cluster, allocator = setup(VOLCANO)
    cluster.pods.append(pod("p", containers=[("main", {VOLCANO.count: "1"})],
                            env={"main": [{"name": "CUDA_DISABLE_CONTROL", "value": "true"}]},
                            annotations=vgpu_annotations(VOLCANO, f"{A},NVIDIA,1024,10:",
                                                         bind_time=1)))
    (answer,) = allocator.allocate(Endpoint(VOLCANO.count, "vgpu"), [["x"]])
    assert "/etc/ld.so.preload" not in [m.container_path for m in answer.mounts]


@PROFILES
def test_oldest_bind_time_first_and_count_must_match(names: VGpuNames) -> None:
    cluster, allocator = setup(names, lock_owner="")
    for name, stamp, text in (("late", 300, f"{A},NVIDIA,1024,0:"),
                              ("two", 100, f"{A},NVIDIA,1024,0:{B},NVIDIA,1024,0:"),
                              ("early", 200, f"{B},NVIDIA,1024,0:")):
        cluster.pods.append(pod(name, containers=[("main", {names.count: "1"})],
                                annotations=vgpu_annotations(names, devices(names, text),
                                                             bind_time=stamp)))
    endpoint = Endpoint(names.count, "vgpu")
    served = [allocator.allocate(endpoint, [["x"]])[0].pod for _ in range(2)]
    assert served == ["ml/early", "ml/late"]  # "two" asks for 2, kubelet for 1
    (answer,) = allocator.allocate(endpoint, [["x", "y"]])
    assert answer.pod == "ml/two"


def test_hami_serves_the_pod_the_lock_names_first() -> None:
    cluster, allocator = setup(HAMI, lock_owner="ml/second")
    for name, stamp in (("first", 100), ("second", 200)):
        cluster.pods.append(pod(name, containers=[("main", {HAMI.count: "1"})],
                                annotations=vgpu_annotations(HAMI, f"{A},NVIDIA,1024,0:;",
                                                             bind_time=stamp)))
    (answer,) = allocator.allocate(Endpoint(HAMI.count, "vgpu"), [["x"]])
    assert answer.pod == "ml/second" and HAMI.lock not in cluster.node_annotations()


@PROFILES
def test_no_pod_waits_says_so_and_only_volcano_releases_the_lock(names: VGpuNames) -> None:
    """volcano-vgpu ``pkg/plugin/server.go:377-385`` (``Allocate``) releases the lock when
    ``GetPendingPod`` finds nothing; HAMi ``nvinternal/plugin/server.go:757-761`` returns the
    error and leaves the lock (its release there is commented out): it belongs to a bind in
    flight, whose owner releases it (``pkg/util/nodelock/nodelock.go:175`` ``ReleaseNodeLock``)."""
    cluster, allocator = setup(names)
    before = cluster.node_annotations()[names.lock]
    cluster.pods.append(pod("done", containers=[("main", {names.count: "1"})], annotations={
        **vgpu_annotations(names, f"{A},NVIDIA,1024,0:", bind_time=1),
        names.bind_phase: "success"}))
    with pytest.raises(AllocationError, match="node gpu-1: no pending pod is in bind phase"):
        allocator.allocate(Endpoint(names.count, "vgpu"), [["x"]])
    if names.lock_with_owner:
        assert cluster.node_annotations()[names.lock] == before
    else:
        assert names.lock not in cluster.node_annotations()
    assert cluster.pod_annotations("done")[names.bind_phase] == "success"


def test_hami_failed_allocate_keeps_a_lock_another_pod_holds() -> None:
    """A bind in flight (``ml/inflight`` holds ``hami.io/mutex.lock``) keeps its lock when an
    ``Allocate`` fails for another pod: HAMi's ``PodAllocationFailed``
    (``nvinternal/plugin/util.go:407-414``) releases with the owner check of
    ``pkg/util/nodelock/nodelock.go:194-199``, and a call that finds no pod releases nothing
    (``nvinternal/plugin/server.go:757-761``). Otherwise a second pod could be locked onto
    the node while the first one's bind is still under way."""
    cluster, allocator = setup(HAMI, lock_owner="ml/inflight")
    lock = cluster.node_annotations()[HAMI.lock]
    with pytest.raises(AllocationError, match="no pending pod"):
        allocator.allocate(Endpoint(HAMI.count, "vgpu"), [["x"]])
    assert cluster.node_annotations()[HAMI.lock] == lock
    cluster.pods.append(pod("bad", containers=[("main", {HAMI.count: "1"})],
                            annotations=vgpu_annotations(HAMI, "garbage", bind_time=1)))
    with pytest.raises(AllocationError, match="ml/bad"):
        allocator.allocate(Endpoint(HAMI.count, "vgpu"), [["x"]])
    assert cluster.pod_annotations("bad")[HAMI.bind_phase] == "failed"
    assert cluster.node_annotations()[HAMI.lock] == lock


def test_volcano_failed_allocate_releases_whatever_holds_the_lock() -> None:
    """volcano-vgpu ``pkg/util/util.go:309-321`` ``PodAllocationFailed`` calls
    ``nodelock.ReleaseNodeLock(nodeName, VGPUDeviceName)``, which has no owner to check."""
    cluster, allocator = setup(VOLCANO)
    cluster.pods.append(pod("bad", containers=[("main", {VOLCANO.count: "1"})],
                            annotations=vgpu_annotations(VOLCANO, "garbage", bind_time=1)))
    with pytest.raises(AllocationError, match="ml/bad"):
        allocator.allocate(Endpoint(VOLCANO.count, "vgpu"), [["x"]])
    assert VOLCANO.lock not in cluster.node_annotations()


BROKEN = [
    pytest.param("garbage", "unreadable", id="garbage"),
    pytest.param("GPU-x,NVIDIA,lots,0:", "unreadable", id="memory-not-int"),
    pytest.param("GPU-ffff,NVIDIA,1024,0:", "GPU-ffff, which node gpu-1 does not have",
                 id="unknown-card"),
    pytest.param(None, "has no", id="missing"),
]


@PROFILES
@pytest.mark.parametrize(("text", "fragment"), BROKEN)
def test_malformed_annotation_fails_the_pod_names_it_and_releases(
        names: VGpuNames, text: str | None, fragment: str) -> None:
    cluster, allocator = setup(names, lock_owner="ml/bad")
    annotations = vgpu_annotations(names, text or "", bind_time=1)
    if text is None:
        del annotations[names.to_allocate]
    cluster.pods.append(pod("bad", containers=[("main", {names.count: "1"})],
                            annotations=annotations))
    with pytest.raises(AllocationError) as caught:
        allocator.allocate(Endpoint(names.count, "vgpu"), [["x"]])
    assert "ml/bad" in str(caught.value) and fragment in str(caught.value)
    assert cluster.pod_annotations("bad")[names.bind_phase] == "failed"
    assert names.lock not in cluster.node_annotations()


def test_device_number_not_matched_fails_the_oldest_pod() -> None:
    cluster, allocator = setup(VOLCANO)
    cluster.pods.append(pod("p", containers=[("main", {VOLCANO.count: "2"})],
                            annotations=vgpu_annotations(
                                VOLCANO, f"{A},NVIDIA,1024,0:{B},NVIDIA,1024,0:", bind_time=1)))
    with pytest.raises(AllocationError, match="device number not matched"):
        allocator.allocate(Endpoint(VOLCANO.count, "vgpu"), [["x"]])
    assert cluster.pod_annotations("p")[VOLCANO.bind_phase] == "failed"


def test_lock_release_retries_conflicts() -> None:
    cluster, allocator = setup(VOLCANO)
    cluster.conflicts_to_inject = 3
    cluster.pods.append(pod("p", containers=[("main", {VOLCANO.count: "1"})],
                            annotations=vgpu_annotations(VOLCANO, f"{A},NVIDIA,1024,0:",
                                                         bind_time=1)))
    allocator.allocate(Endpoint(VOLCANO.count, "vgpu"), [["x"]])
    assert VOLCANO.lock not in cluster.node_annotations()
    assert cluster.calls.count("replace_node") == 4


def test_preferred_allocation_picks_ids_on_the_scheduler_s_cards() -> None:
    cluster, allocator = setup(VOLCANO)
    cluster.pods.append(pod("p", containers=[("main", {VOLCANO.count: "1"})],
                            annotations=vgpu_annotations(VOLCANO, f"{B},NVIDIA,1024,0:",
                                                         bind_time=1)))
    available = [f"{A}-0", f"{A}-1", f"{B}-0", f"{B}-1"]
    assert allocator.preferred(Endpoint(VOLCANO.count, "vgpu"), available, [], 1) == [f"{B}-0"]


@pytest.mark.parametrize(("value", "hami_disables", "volcano_disables"), [
    ("true", True, True), ("True", True, True), ("1", True, True), ("t", True, True),
    ("false", False, True), ("", False, True), ("tRuE", False, True), (" true", False, True),
    (None, False, False)])
def test_cuda_disable_control_as_each_peer_reads_it(
        value: str | None, hami_disables: bool, volcano_disables: bool) -> None:
    """HAMi ``nvinternal/plugin/server.go:866-884`` keeps the preload mount out only for a
    ``strconv.ParseBool`` true value; volcano-vgpu ``pkg/plugin/server.go:473-485`` for the
    variable being there at all."""
    env = [] if value is None else [{"name": "CUDA_DISABLE_CONTROL", "value": value}]
    for names, disables in ((HAMI, hami_disables), (VOLCANO, volcano_disables)):
        cluster, allocator = setup(names)
        cluster.pods.append(pod("p", containers=[("main", {names.count: "1"})],
                                env={"main": env}, annotations=vgpu_annotations(
                                    names, devices(names, f"{A},NVIDIA,1024,10:"),
                                    bind_time=1)))
        (answer,) = allocator.allocate(Endpoint(names.count, "vgpu"), [["x"]])
        preload = "/etc/ld.so.preload" in [m.container_path for m in answer.mounts]
        assert preload is not disables, names.profile


def _with_init(obj: dict[str, Any], name: str, limits: dict[str, str],
               env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    obj["spec"]["initContainers"] = [{"name": name, "image": "cuda", "env": env or [],
                                      "resources": {"limits": limits}}]
    return obj


def test_hami_serves_init_containers_first_in_its_annotation_order() -> None:
    """HAMi writes one entry per container, init containers first
    (``pkg/device/devices.go:639-691`` ``Resourcereqs``), and its device plugin maps entry i
    to ``InitContainers[i]``, then ``Containers[i - len(InitContainers)]``
    (``nvinternal/plugin/util.go:112-128`` ``popNextContainerDevices``): the init container
    gets its own devices, cache directory and preload mount, the app container its own."""
    cluster, allocator = setup(HAMI)
    text = devices(HAMI, f"{A},NVIDIA,1024,10:", f"{B},NVIDIA,2048,20:")
    cluster.pods.append(_with_init(pod(
        "p", containers=[("main", {HAMI.count: "1"})],
        env={"main": [{"name": "CUDA_DISABLE_CONTROL", "value": "true"}]},
        annotations=vgpu_annotations(HAMI, text, bind_time=1)), "warmup", {HAMI.count: "1"}))
    (first,) = allocator.allocate(Endpoint(HAMI.count, "vgpu"), [["x"]])
    assert first.container == "warmup" and first.envs["NVIDIA_VISIBLE_DEVICES"] == A
    assert Mount("/usr/local/vgpu", "/usr/local/vgpu/containers/uid-p_warmup",
                 False) in first.mounts
    assert "/etc/ld.so.preload" in [m.container_path for m in first.mounts]
    (second,) = allocator.allocate(Endpoint(HAMI.count, "vgpu"), [["x"]])
    assert second.container == "main" and second.envs["NVIDIA_VISIBLE_DEVICES"] == B
    assert "/etc/ld.so.preload" not in [m.container_path for m in second.mounts]
    assert cluster.pod_annotations("p")[HAMI.bind_phase] == "success"


@PROFILES
def test_entries_for_app_containers_only_skip_the_init_containers(names: VGpuNames) -> None:
    """volcano-vgpu ``pkg/util/util.go:233-250`` ``GetNextDeviceRequest`` returns
    ``p.Spec.Containers[idx]``: its entries (and an annotation with one entry per app
    container, in either profile) stand for the app containers."""
    cluster, allocator = setup(names)
    cluster.pods.append(_with_init(pod(
        "p", containers=[("main", {names.count: "1"})],
        annotations=vgpu_annotations(names, devices(names, f"{A},NVIDIA,1024,10:"),
                                     bind_time=1)), "setup", {}))
    (answer,) = allocator.allocate(Endpoint(names.count, "vgpu"), [["x"]])
    assert answer.container == "main"
