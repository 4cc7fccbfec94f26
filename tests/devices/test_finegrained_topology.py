"""GPU placement by partition table and topology tree (Koordinator §1.9.3, §1.9.4).

Matches ``allocateByPartition`` / ``selectPartitionByBinPack`` and ``allocateByDeviceTopology``
/ ``allocateFromScope`` of ``pkg/scheduler/plugins/deviceshare/allocator_gpu.go``
(koordinator-sh/koordinator), plus the two documented improvements: multi-card shared requests
placed in one scope, and a meaningful ``Device`` scope.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.builders import simulate
from tests.devices.finegrained_helpers import (
    allocated,
    bound_pod,
    device_object,
    fg_node,
    fg_pod,
    finegrained_conf,
    gpu,
    minors,
    shared_gpu,
    topo_gpus,
)

PARTITION_SPEC = "scheduling.koordinator.sh/gpu-partition-spec"


def place(pod: dict[str, Any], *, held: tuple[int, ...] = (), devices: list[Any] | None = None,
          labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
          scoring: str = "LeastAllocated", node_labels: dict[str, str] | None = None) -> Any:
    """``labels`` go on the Device object, ``node_labels`` on the Node."""
    objs = [fg_node("n1", gpus=8, labels=node_labels),
            device_object("n1", devices if devices is not None else topo_gpus(),
                          labels=labels, annotations=annotations)]
    objs += [bound_pod(f"held-{m}", node="n1", allocation={"gpu": [shared_gpu(m)]})
             for m in held]
    return simulate([*objs, pod], conf=finegrained_conf(scoring=scoring))


@pytest.mark.parametrize(("count", "held", "expected"), [
    pytest.param(2, (), [0, 1], id="two-fit-one-pcie-root-lowest-first"),
    pytest.param(2, (0,), [2, 3], id="packs-beside-the-used-root-same-numa"),
    pytest.param(2, (0, 2), [4, 5], id="skips-roots-with-a-used-card"),
    pytest.param(3, (), [0, 1, 2], id="three-need-a-numa-node"),
    pytest.param(4, (1,), [4, 5, 6, 7], id="four-in-the-free-numa-node"),
    pytest.param(5, (), [0, 1, 2, 3, 4], id="five-need-the-whole-node"),
])
def test_whole_gpus_take_the_deepest_scope_with_topology_packing(
        count: int, held: tuple[int, ...], expected: list[int]) -> None:
    run = place(fg_pod("p", nvidia=count), held=held)
    assert sorted(minors(run, "p")) == expected


def test_shared_gpu_packs_by_topology_then_scores_within_the_scope() -> None:
    """Topology packing is independent of the scoring strategy: the used PCIe root wins, and
    within it LeastAllocated picks the emptier card."""
    run = place(fg_pod("p", gpu_core=20, gpu_memory_ratio=20), held=(0,))
    assert minors(run, "p") == [1]
    packed = place(fg_pod("p", gpu_core=20, gpu_memory_ratio=20), held=(0,),
                   scoring="MostAllocated")
    assert minors(packed, "p") == [0]


def test_multi_card_shared_request_is_placed_in_one_scope() -> None:
    """Koordinator's tree refuses ``gpu.shared`` > 1 (#2097) and falls back to score order;
    here both shares land under one PCIe root."""
    run = place(fg_pod("p", gpu_shared=2, gpu_memory_ratio=100, gpu_core=100),
                held=(2,))
    chosen = sorted(minors(run, "p"))
    assert chosen == [2, 3]
    entry = allocated(run, "p")["gpu"][0]["resources"]
    assert entry["koordinator.sh/gpu-memory-ratio"] == "50"


def test_gpus_without_topology_use_the_default_allocator() -> None:
    devices = [gpu(m, topology=False) for m in range(4)]
    run = place(fg_pod("p", nvidia=2), devices=devices, held=(0,))
    assert sorted(minors(run, "p")) == [1, 2]


H100 = {"node.koordinator.sh/gpu-vendor": "nvidia", "node.koordinator.sh/gpu-model": "H100"}


def test_builtin_h100_partitions_keep_larger_partitions_intact() -> None:
    """§2.3: GPU 1 used, 2 GPUs asked: {2,3} keeps {4-7} whole."""
    run = place(fg_pod("p", nvidia=2), held=(1,), node_labels=H100)
    assert sorted(minors(run, "p")) == [2, 3]


def test_partition_honoured_count_not_in_table_is_refused() -> None:
    run = place(fg_pod("p", nvidia=3, annotations={PARTITION_SPEC: "{}"}), node_labels=H100)
    assert run.node_of("p") is None
    assert "Unsupported number of GPU requests" in run.reason("p")


def test_partition_preferred_falls_through_to_the_tree() -> None:
    run = place(fg_pod("p", nvidia=3), node_labels=H100)
    assert sorted(minors(run, "p")) == [0, 1, 2]


def test_honour_without_a_table_is_refused_with_reason() -> None:
    run = place(fg_pod("p", nvidia=2), node_labels={"node.koordinator.sh/gpu-partition-policy":
                                                     "Honor"})
    assert run.node_of("p") is None
    assert "missing GPU Partition Table" in run.reason("p")


def test_partition_table_from_the_device_annotation_with_tiers_and_bandwidth() -> None:
    table = {"2": [{"minors": [0, 1], "allocationScore": 2, "ringBusBandwidth": "400Gi"},
                   {"minors": [6, 7], "allocationScore": 1, "ringBusBandwidth": "200Gi"}]}
    annotations = {"scheduling.koordinator.sh/gpu-partitions": json.dumps(table)}
    run = place(fg_pod("p", nvidia=2), annotations=annotations)
    assert sorted(minors(run, "p")) == [6, 7]  # tiers ascending, as Koordinator's code
    spec = {PARTITION_SPEC: json.dumps({"ringBusBandwidth": "300Gi"})}
    fast = place(fg_pod("p", nvidia=2, annotations=spec), annotations=annotations)
    assert sorted(minors(fast, "p")) == [0, 1]
    restricted = {PARTITION_SPEC: json.dumps({"allocatePolicy": "Restricted"})}
    held = place(fg_pod("p", nvidia=2, annotations=restricted), annotations=annotations,
                 held=(6,))
    assert held.node_of("p") is None
    assert "Insufficient Partitioned GPU Devices" in held.reason("p")


def test_unreadable_partition_spec_is_unresolvable() -> None:
    run = place(fg_pod("p", nvidia=2, annotations={PARTITION_SPEC: "{nope"}))
    assert run.node_of("p") is None
    assert PARTITION_SPEC in run.reason("p") and "not JSON" in run.reason("p")
