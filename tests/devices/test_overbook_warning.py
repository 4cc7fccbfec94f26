"""Bound pods that together hold more of a card than it has: both keep their usage (a bound
pod's usage is never dropped), the card takes no new pod, and the node gets one warning naming
the card and the pods.
"""

from __future__ import annotations

from typing import Any

import pytest

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
from tests.devices.finegrained_helpers import (
    GIB,
    device_object,
    fg_node,
    fg_pod,
    finegrained_conf,
    gpu,
    minors,
    shared_gpu,
)
from tests.devices.finegrained_helpers import bound_pod as fg_bound_pod

Obj = dict[str, Any]


def bound_vgpu_pod(name: str, entry: str) -> Obj:
    return vgpu_pod(name, memory=1000, node="n1", phase="Running",
                    annotations={"volcano.sh/vgpu-node": "n1", "volcano.sh/vgpu-ids-new": entry})


@pytest.mark.parametrize(
    ("split", "entries", "excess"),
    [
        pytest.param(10, ["GPU-0,NVIDIA,6000,10:", "GPU-0,NVIDIA,6000,10:"],
                     "memory 12000/10000 MiB", id="memory"),
        pytest.param(10, ["GPU-0,NVIDIA,1000,60:", "GPU-0,NVIDIA,1000,60:"],
                     "cores 120/100%", id="cores"),
        pytest.param(1, ["GPU-0,NVIDIA,1000,10:", "GPU-0,NVIDIA,1000,10:"],
                     "shares 2/1", id="shares"),
    ],
)
def test_two_bound_pods_overbooking_a_vgpu_card(split: int, entries: list[str],
                                                excess: str) -> None:
    """Volcano's ``addResource`` / ``HAMICoreFactory.AddPod`` (vgpu/device_info.go,
    hamicore.go) add every bound pod's usage without a capacity check, so both stay counted;
    Lahar does the same and also warns once, on the Node, naming card and pods."""
    objs = [vgpu_node("n1", [card("GPU-0", memory=10000, split=split)]),
            bound_vgpu_pod("a", entries[0]), bound_vgpu_pod("b", entries[1]),
            vgpu_pod("new", memory=100, cores=0)]
    session, _ = device_session(objs, conf=vgpu_conf())
    [gpu] = session.nodes["n1"].others["hamivgpu"].cards
    assert gpu.used_num == 2
    assert (gpu.used_mem, gpu.used_cores) == tuple(
        sum(int(e.split(",")[i].rstrip(":")) for e in entries) for i in (2, 3))
    run = simulate(objs, conf=vgpu_conf())
    assert run.node_of("a") == run.node_of("b") == "n1"
    assert run.node_of("new") is None  # the card has nothing left to give
    [event] = run.events("DeviceOverbooked")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "Node" and event["involvedObject"]["name"] == "n1"
    assert event["message"] == (
        f"node n1: vGPU card GPU-0 is overbooked by the pods bound to it ({excess}; pods "
        f"default/a, default/b); every pod keeps its usage, so the card takes no new pod until "
        f"enough of them end")


def test_one_warning_however_often_the_ledger_is_rebuilt() -> None:
    """As ``test_two_bound_pods_overbooking_a_vgpu_card`` (``addResource``, vgpu/device_info.go,
    charges every bound pod). The Reporter logs each distinct warning once; a third pod
    arriving on an already overbooked card adds no second warning."""
    objs = [vgpu_node("n1", [card("GPU-0", memory=10000), card("GPU-1", memory=10000)]),
            bound_vgpu_pod("a", "GPU-0,NVIDIA,6000,0:"),
            bound_vgpu_pod("b", "GPU-0,NVIDIA,6000,0:"),
            bound_vgpu_pod("c", "GPU-0,NVIDIA,1000,0:"),
            *(vgpu_pod(f"p{i}", memory=2000) for i in range(4))]
    run = simulate(objs, conf=vgpu_conf())
    assert len(run.events("DeviceOverbooked")) == 1
    assert all(run.node_of(f"p{i}") is None or
               "GPU-1" in run.pod(f"p{i}")["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"]
               for i in range(4))


def test_pods_within_the_card_raise_no_warning() -> None:
    """Exactly full is not overbooked: ``checkNodeGPUSharingPredicateAndScore`` (vgpu/utils.go)
    itself fills a card to its memory and 100 % cores."""
    objs = [vgpu_node("n1", [card("GPU-0", memory=10000)]),
            bound_vgpu_pod("a", "GPU-0,NVIDIA,5000,50:"),
            bound_vgpu_pod("b", "GPU-0,NVIDIA,5000,50:")]
    assert simulate(objs, conf=vgpu_conf()).events("DeviceOverbooked") == []


def test_two_bound_pods_overbooking_a_gpushare_card() -> None:
    """Volcano's GPU share ``AddResource`` (gpushare/device_info.go) adds each bound pod's memory
    to the card it names, unchecked; both stay counted here too, with one warning."""
    objs = [gpu_node("n1", cards=2, card_memory=8000),
            bound_gpu_pod("a", node="n1", index="1", memory=6000),
            bound_gpu_pod("b", node="n1", index="1", memory=4000),
            gpu_pod("c", memory=6000), gpu_pod("d", memory=6000)]
    session, _ = device_session(objs, conf=gpushare_conf())
    assert [c.used for c in session.nodes["n1"].others["GpuShare"].cards] == [0, 10000]
    run = simulate(objs, conf=gpushare_conf())
    assert len([name for name in ("c", "d") if run.node_of(name)]) == 1  # only card 0 is open
    [event] = run.events("DeviceOverbooked")
    assert event["involvedObject"]["kind"] == "Node"
    assert event["message"] == (
        "node n1: GPU card 1 is overbooked by the pods bound to it (memory 10000/8000; pods "
        "default/a, default/b); every pod keeps its usage, so the card takes no new pod until "
        "enough of them end")


def test_two_bound_pods_overbooking_a_finegrained_gpu() -> None:
    """Koordinator's ``nodeDevice.updateCacheUsed`` (deviceshare/device_cache.go) adds a bound
    pod's allocation without a capacity check; both pods stay charged here too, the GPU offers
    nothing more, and the Node gets one warning naming the device and the pods."""
    objs = [fg_node("n1", gpus=2), device_object("n1", [gpu(0), gpu(1)]),
            fg_bound_pod("a", node="n1", nvidia=1, allocation={"gpu": [shared_gpu(0, 100)]}),
            fg_bound_pod("b", node="n1", gpu_core=50, gpu_memory_ratio=50,
                         allocation={"gpu": [shared_gpu(0, 50)]}),
            fg_pod("new", gpu_core=10, gpu_memory_ratio=10)]
    run = simulate(objs, conf=finegrained_conf())
    assert run.node_of("a") == run.node_of("b") == "n1"
    assert minors(run, "new") == [1]  # GPU 0 has nothing left to give
    [event] = run.events("DeviceOverbooked")
    assert event["involvedObject"]["kind"] == "Node"
    assert event["message"] == (
        f"node n1: gpu 0 is overbooked by the pods bound to it (koordinator.sh/gpu-core 150/100, "
        f"koordinator.sh/gpu-memory {24 * GIB}/{16 * GIB}, koordinator.sh/gpu-memory-ratio "
        f"150/100; pods default/a, default/b); every pod keeps its usage, so the device takes no "
        f"new pod until enough of them end")
