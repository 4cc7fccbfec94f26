"""A bound pod's device annotations read entry by entry: a bad entry is reported by name and
left out, and every other entry keeps holding its card (nothing a good entry holds is freed).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.devices.codec import read_index_list, read_pod_devices
from tests.builders import simulate
from tests.devices.conftest import (
    bound_gpu_pod,
    card,
    device_session,
    gpu_node,
    gpu_pod,
    gpushare_conf,
    vgpu_conf,
    vgpu_node,
    vgpu_pod,
)
from tests.devices.finegrained_helpers import ALLOCATED as FG_ALLOCATED
from tests.devices.finegrained_helpers import (
    GIB,
    bound_pod,
    device_object,
    fg_node,
    fg_pod,
    finegrained_conf,
    gpu,
    minors,
    nic,
    shared_gpu,
)

Obj = dict[str, Any]
IDS = "volcano.sh/vgpu-ids-new"
TO_ALLOCATE = "volcano.sh/devices-to-allocate"


def bound_vgpu_pod(name: str, annotations: dict[str, str], *, node: str = "n1") -> Obj:
    return vgpu_pod(name, memory=6000, node=node, phase="Running",
                    annotations={"volcano.sh/vgpu-node": node, **annotations})


def vgpu_used(objs: list[Obj], node: str = "n1", *, profile: str = "volcano"
              ) -> list[tuple[int, int, int]]:
    """(slots, MiB, cores) in use per card of ``node`` as the first cycle sees it."""
    session, _ = device_session(objs, conf=vgpu_conf(profile=profile))
    return [(c.used_num, c.used_mem, c.used_cores)
            for c in session.nodes[node].others["hamivgpu"].cards]


def messages(run: Any, reason: str) -> list[str]:
    return [e["message"] for e in run.events(reason)]


# -- vGPU ----------------------------------------------------------------------------------------
def test_a_bad_vgpu_entry_keeps_the_good_entries_charged() -> None:
    """Volcano's ``decodeContainerDevices`` (vgpu/utils.go) skips an entry whose memory or cores
    is not an unsigned integer and keeps the others; ``addResource`` (device_info.go) charges
    them. Before, one such entry made Lahar ignore the whole annotation, leaving the card 6000
    MiB emptier than it is and letting ``big`` overbook it."""
    held = bound_vgpu_pod("held", {IDS: "GPU-0,NVIDIA,6000,30:;GPU-0,NVIDIA,lots,0:"})
    objs = [vgpu_node("n1", [card("GPU-0", memory=10000)]), held,
            vgpu_pod("big", memory=6000), vgpu_pod("small", memory=4000)]
    assert vgpu_used(objs) == [(1, 6000, 30)]
    run = simulate(objs, conf=vgpu_conf())
    assert run.node_of("big") is None
    assert "no vGPU card of the node has 6000 MiB free" in run.reason("big")
    assert run.node_of("small") == "n1"
    [event] = run.events("InvalidDeviceAnnotation")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "Pod" and event["involvedObject"]["name"] == "held"
    assert event["message"] == (
        "pod default/held on node n1: annotation volcano.sh/vgpu-ids-new: container 1 entry "
        "'GPU-0,NVIDIA,lots,0': memory must be an integer, got 'lots'; that entry is not "
        "counted, the others are")


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        pytest.param("GPU-1,NVIDIA,4000", "is not UUID,Type,usedMemMiB,usedCores",
                     id="three-fields"),
        pytest.param("GPU-1,NVIDIA,4000,-5", "cores must be at least 0, got -5",
                     id="negative-cores"),
        pytest.param(",NVIDIA,4000,0", "is not UUID,Type,usedMemMiB,usedCores", id="no-uuid"),
        pytest.param("garbage", "is not UUID,Type,usedMemMiB,usedCores", id="no-comma"),
    ],
)
def test_each_kind_of_bad_vgpu_entry_is_named_and_skipped(entry: str, why: str) -> None:
    """``decodeContainerDevices`` (vgpu/utils.go): fewer than four fields or an unparsable
    ``ParseUint`` leaves that entry out (an entry without a comma is skipped there silently;
    here it is reported too); the other card stays charged."""
    text = f"GPU-0,NVIDIA,3000,20:{entry}:"
    objs = [vgpu_node("n1", [card("GPU-0", memory=10000), card("GPU-1", memory=10000)]),
            bound_vgpu_pod("held", {IDS: text})]
    assert vgpu_used(objs) == [(1, 3000, 20), (0, 0, 0)]
    run = simulate(objs, conf=vgpu_conf())
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert f"container 0 entry {entry!r}" in message and why in message


def test_fields_past_the_fourth_are_ignored_as_volcano_does() -> None:
    """``decodeContainerDevices`` (vgpu/utils.go) reads the first four fields of an entry."""
    objs = [vgpu_node("n1", [card("GPU-0", memory=10000)]),
            bound_vgpu_pod("held", {IDS: "GPU-0,NVIDIA,3000,20,extra:"})]
    assert vgpu_used(objs) == [(1, 3000, 20)]


def test_unreadable_durable_annotation_falls_back_to_devices_to_allocate() -> None:
    """Volcano's ``addResource`` (device_info.go) reads ``vgpu-ids-new`` only; when it has no
    readable entry Lahar counts what ``devices-to-allocate`` still records rather than
    nothing, and says so."""
    objs = [vgpu_node("n1", [card("GPU-0", memory=10000)]),
            bound_vgpu_pod("held", {IDS: "GPU-0,NVIDIA,lots,0:",
                                    TO_ALLOCATE: "GPU-0,NVIDIA,7000,10:"}),
            vgpu_pod("big", memory=4000)]
    assert vgpu_used(objs) == [(1, 7000, 10)]
    run = simulate(objs, conf=vgpu_conf())
    assert run.node_of("big") is None
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert message == (
        "pod default/held on node n1: annotation volcano.sh/vgpu-ids-new has no readable entry "
        "(container 0 entry 'GPU-0,NVIDIA,lots,0': memory must be an integer, got 'lots'); its "
        "volcano.sh/devices-to-allocate is counted instead")


def test_nothing_readable_is_a_warning_naming_pod_and_annotation() -> None:
    """With no readable entry anywhere nothing can name a card: the pod's vGPU usage is not
    counted (as in Volcano's ``addResource``, which then finds no device), and the warning
    says so."""
    objs = [vgpu_node("n1", [card("GPU-0", memory=10000)]),
            bound_vgpu_pod("held", {IDS: "GPU-0;NVIDIA"})]
    assert vgpu_used(objs) == [(0, 0, 0)]
    run = simulate(objs, conf=vgpu_conf())
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert message.startswith("pod default/held on node n1: annotation volcano.sh/vgpu-ids-new "
                              "has no readable entry (")
    assert message.endswith("); its vGPU usage is not counted")


def test_hami_profile_reads_its_terminated_list_entry_by_entry() -> None:
    """HAMi's ``hami.io/vgpu-devices-allocated`` ends each container with ``;``; HAMi's own
    ``DecodePodDevices`` drops the pod on a short entry, Lahar keeps the good ones (a bad part
    never frees what the good parts hold)."""
    node = vgpu_node("n1", [card("GPU-0", memory=10000)])
    node["metadata"]["annotations"] = {
        "hami.io/node-nvidia-register": '[{"id":"GPU-0","count":10,"devmem":10000,'
                                        '"devcore":100,"type":"NVIDIA-A100","health":true}]'}
    node["status"]["allocatable"]["nvidia.com/gpu"] = "10"
    held = bound_vgpu_pod("held", {"hami.io/vgpu-devices-allocated":
                                   "GPU-0,NVIDIA,5000,0:;GPU-0,NVIDIA:;"})
    assert vgpu_used([node, held], profile="hami") == [(1, 5000, 0)]


# -- GPU share -----------------------------------------------------------------------------------
def test_a_bad_gpu_index_item_keeps_the_other_cards_held() -> None:
    """Volcano's ``GetGPUIndex`` (gpushare/share.go) returns nothing for one bad item, freeing
    the cards the good items name; Lahar reports the item and keeps card 0 held."""
    objs = [gpu_node("n1", cards=2, card_memory=8000),
            bound_gpu_pod("held", node="n1", index="0,zz", memory=6000),
            gpu_pod("a", memory=6000), gpu_pod("b", memory=6000)]
    session, _ = device_session(objs, conf=gpushare_conf())
    assert [c.used for c in session.nodes["n1"].others["GpuShare"].cards] == [6000, 0]
    run = simulate(objs, conf=gpushare_conf())
    placed = [name for name in ("a", "b") if run.node_of(name)]
    assert len(placed) == 1
    assert run.pod(placed[0])["metadata"]["annotations"]["volcano.sh/gpu-index"] == "1"
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert message == ("pod default/held on node n1: annotation volcano.sh/gpu-index '0,zz': "
                       "item 1 must be an integer, got 'zz'; that item is not counted, cards 0 "
                       "are")


def test_an_unreadable_gpu_index_names_pod_and_annotation() -> None:
    """``GetGPUIndex`` (gpushare/share.go) returns nil here too. No item readable: no card can
    be charged; the warning names the pod and annotation."""
    objs = [gpu_node("n1", cards=2), bound_gpu_pod("held", node="n1", index="first", memory=4000)]
    run = simulate(objs, conf=gpushare_conf())
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert message == ("pod default/held on node n1 has an unreadable volcano.sh/gpu-index "
                       "annotation (item 0 must be an integer, got 'first'); its GPU usage is "
                       "not counted")


def test_a_held_card_with_an_invalid_request_is_counted_whole_with_a_warning() -> None:
    """Volcano's GPU share ``AddResource`` (gpushare/device_info.go) charges the pod's
    ``getGPUMemoryOfPod`` per named card. When that request is invalid the pod still holds the
    card it names: the whole card is charged (never less than it may use), and the warning
    says why."""
    held = bound_gpu_pod("held", node="n1", index="1", memory=4000, number=1)
    objs = [gpu_node("n1", cards=2, card_memory=8000), held]
    session, _ = device_session(objs, conf=gpushare_conf())
    assert [c.used for c in session.nodes["n1"].others["GpuShare"].cards] == [0, 8000]
    run = simulate(objs, conf=gpushare_conf())
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert message.startswith("pod default/held on node n1 holds cards (volcano.sh/gpu-index) "
                              "but its GPU request is not valid (")
    assert "requests both volcano.sh/gpu-memory and volcano.sh/gpu-number" in message
    assert message.endswith("); each card it holds is counted whole")


# -- the readers ----------------------------------------------------------------------------------
def test_readers_keep_positions_and_name_what_they_leave_out() -> None:
    """``DecodePodDevices`` / ``decodeContainerDevices`` (vgpu/utils.go) keep one list per
    container, empty ones included; ``GetGPUIndex`` (gpushare/share.go) splits on commas."""
    held = read_pod_devices("GPU-a,NVIDIA,1,2:bad:;GPU-b,NVIDIA,3,4:;", terminated=True)
    assert [[d.uuid for d in c] for c in held.containers] == [["GPU-a"], ["GPU-b"]]
    assert held.skipped == ("container 0 entry 'bad' is not UUID,Type,usedMemMiB,usedCores",)
    indices = read_index_list("2,,x,0")
    assert indices.indices == (2, 0)
    assert indices.skipped == ("item 1 is empty", "item 2 must be an integer, got 'x'")
    assert read_index_list(" ").skipped == ("no card index",)


# -- fine-grained (Koordinator) ------------------------------------------------------------------
def fine_objs(allocation: Any, *pending: Obj) -> list[Obj]:
    node = fg_node("n1", gpus=2)
    return [node, device_object("n1", [gpu(0), gpu(1)]),
            bound_pod("held", node="n1", allocation=allocation, nvidia=1), *pending]


def fine_used(objs: list[Obj]) -> dict[tuple[str, int], dict[str, int]]:
    session, _ = device_session(objs, conf=finegrained_conf())
    return dict(session.nodes["n1"].others["FineGrained"].ledger.used)


WHOLE_GPU = {"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory": 16 * GIB,
             "koordinator.sh/gpu-memory-ratio": 100}


def test_a_bad_device_allocated_entry_keeps_the_other_devices_held() -> None:
    """Koordinator's ``nodeDeviceCache.updatePod`` (deviceshare/eventhandler_pod.go) drops the
    pod when ``GetDeviceAllocations`` fails on any part, freeing GPU 0 here; Lahar leaves out
    only the entry without an integer minor."""
    allocation = {"gpu": [shared_gpu(0, 100), {"minor": "one", "resources": {}}]}
    objs = fine_objs(allocation, fg_pod("two", nvidia=2), fg_pod("one", nvidia=1))
    assert fine_used(objs) == {("gpu", 0): WHOLE_GPU}
    run = simulate(objs, conf=finegrained_conf())
    assert run.node_of("two") is None
    assert minors(run, "one") == [1]
    [event] = run.events("InvalidDeviceAnnotation")
    assert event["involvedObject"]["name"] == "held"
    assert event["message"] == (
        "pod default/held on node n1: annotation scheduling.koordinator.sh/device-allocated: "
        "gpu[1]: field minor must be an integer; that entry is not counted; the rest of it is "
        "counted")


@pytest.mark.parametrize(
    ("resources", "used", "why"),
    [
        pytest.param({"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50",
                      "koordinator.sh/gpu-memory": "lots"},
                     {"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50,
                      "koordinator.sh/gpu-memory": 16 * GIB},
                     "resources[koordinator.sh/gpu-memory]: ", id="unreadable-quantity"),
        pytest.param({"koordinator.sh/gpu-core": "-50", "koordinator.sh/gpu-memory-ratio": "50"},
                     {"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory-ratio": 50},
                     "resources[koordinator.sh/gpu-core]: '-50' is negative", id="negative"),
        pytest.param(["koordinator.sh/gpu-core"], WHOLE_GPU,
                     "field resources must be a map; the whole device is counted",
                     id="resources-not-a-map"),
    ],
)
def test_an_unreadable_quantity_counts_the_device_whole_in_it(resources: Any,
                                                              used: dict[str, int],
                                                              why: str) -> None:
    """A quantity ``GetDeviceAllocations`` (apis/extension/device_share.go) cannot unmarshal
    makes Koordinator drop the pod; Lahar keeps the device and charges its whole total in that
    resource, so nothing the pod may hold is handed out again (a negative quantity would free
    capacity and is treated the same)."""
    objs = fine_objs({"gpu": [{"minor": 0, "resources": resources}]})
    assert fine_used(objs) == {("gpu", 0): used}
    run = simulate(objs, conf=finegrained_conf())
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert message.startswith("pod default/held on node n1: annotation "
                              "scheduling.koordinator.sh/device-allocated: gpu[0] (minor 0): ")
    assert why in message


def test_an_unreadable_device_allocated_names_pod_and_annotation() -> None:
    """``GetDeviceAllocations`` (apis/extension/device_share.go) fails as in Koordinator's
    ``updatePod``. Not a JSON map at all: no device can be named, so nothing is charged for
    the pod."""
    objs = fine_objs({})
    objs[2]["metadata"]["annotations"][FG_ALLOCATED] = "{gpu: [0]}"
    assert fine_used(objs) == {}
    run = simulate(objs, conf=finegrained_conf())
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert message.startswith("pod default/held on node n1 has an unreadable "
                              "scheduling.koordinator.sh/device-allocated annotation (not JSON: ")
    assert message.endswith("); its device usage is not counted")


def test_a_bad_vf_entry_is_named_and_the_device_stays_held() -> None:
    """Koordinator's ``nodeDevice.updateCacheUsed`` (deviceshare/device_cache.go) records a
    pod's VFs by ``busID``; a VF without one cannot be recorded, the device's own share can."""
    objs = [fg_node("n1", gpus=0, nics=1), device_object("n1", [nic(0, vfs=2)]),
            bound_pod("held", node="n1", rdma=1, allocation={"rdma": [
                {"minor": 0, "resources": {"koordinator.sh/rdma": "1"},
                 "extension": {"vfs": [{"minor": -1}, {"minor": -1, "busID": "0000:50:00.2"}]}}]})]
    session, _ = device_session(objs, conf=finegrained_conf())
    ledger = session.nodes["n1"].others["FineGrained"].ledger
    assert ledger.used == {("rdma", 0): {"koordinator.sh/rdma": 1}}
    assert ledger.vfs_used == {("rdma", 0): {"0000:50:00.2"}}
    run = simulate(objs, conf=finegrained_conf())
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert "rdma[0] (minor 0): extension.vfs[0] has no busID; that VF is not counted" in message


def test_an_unreadable_hint_of_a_bound_pod_is_reported() -> None:
    """``GetDeviceAllocateHints`` (apis/extension/device_share.go) fails on it. The bound
    pod's ``device-allocate-hint`` says which PCIe roots it holds exclusively;
    unreadable, nothing is held exclusively and the warning names pod and annotation."""
    objs = fine_objs({"gpu": [shared_gpu(0, 100)]})
    objs[2]["metadata"]["annotations"]["scheduling.koordinator.sh/device-allocate-hint"] = "{"
    run = simulate(objs, conf=finegrained_conf())
    [message] = messages(run, "InvalidDeviceAnnotation")
    assert message.startswith("pod default/held on node n1 holds devices but its "
                              "scheduling.koordinator.sh/device-allocate-hint cannot be read (")
