"""Joint GPU + RDMA allocation and allocate hints: every worked example of the reference §2.3.

Matches ``jointAllocate`` / ``allocateDevices`` / ``defaultAllocateDevices`` (preferred PCIe
round-robin, PR #2646) and ``filterNodeDevice`` (``PCIeLevel``) of
``pkg/scheduler/plugins/deviceshare/device_allocator.go`` and the hint handling of
``devicehandler_default.go`` (koordinator-sh/koordinator). Where §2.3 shows Koordinator
failing (SamePCIe after a GPU choice it never revisits) the test expects the better result
and says so.
"""

from __future__ import annotations

import json
from typing import Any

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
    nic,
    pcie_of,
    topo_gpus,
    topo_nics,
)

JOINT = "scheduling.koordinator.sh/device-joint-allocate"
HINT = "scheduling.koordinator.sh/device-allocate-hint"
RDMA = "koordinator.sh/rdma"


def joint(same_pcie: bool = False) -> dict[str, str]:
    spec: dict[str, Any] = {"deviceTypes": ["gpu", "rdma"]}
    if same_pcie:
        spec["requiredScope"] = "SamePCIe"
    return {JOINT: json.dumps(spec)}


def hint(**by_type: dict[str, Any]) -> dict[str, str]:
    return {HINT: json.dumps(by_type)}


def run_on(devices: list[Any], *pods: dict[str, Any], held: list[Any] = ()) -> Any:  # type: ignore[assignment]
    objs = [fg_node("n1", gpus=8, nics=8), device_object("n1", devices), *held, *pods]
    return simulate(objs, conf=finegrained_conf())


def nic_roots(run: Any, pod: str, devices: list[Any]) -> list[str]:
    by_minor = {d["minor"]: d["topology"]["pcieID"] for d in devices if d["type"] == "rdma"}
    return [by_minor[m] for m in minors(run, pod, "rdma")]


EIGHT_ROOTS = topo_gpus(gpus_per_root=1, roots=8)


def test_four_gpus_one_rdma_take_a_nic_on_every_gpu_root() -> None:
    """§2.3 row 1 (and row 2 with SamePCIe: identical)."""
    devices = EIGHT_ROOTS + topo_nics([1] * 8)
    for same in (False, True):
        run = run_on(devices, fg_pod("p", nvidia=4, rdma=1, annotations=joint(same)))
        assert sorted(minors(run, "p")) == [0, 1, 2, 3]
        assert sorted(nic_roots(run, "p", devices)) == [pcie_of(r) for r in range(4)]
        assert all(e["resources"] == {RDMA: "1"} for e in allocated(run, "p")["rdma"])


def test_missing_nics_without_required_scope_fill_from_elsewhere() -> None:
    """§2.3 row 3: only P0 of N0 has a NIC → 1 local NIC and 3 from N1."""
    devices = EIGHT_ROOTS + topo_nics([1, 0, 0, 0, 1, 1, 1, 1])
    run = run_on(devices, fg_pod("p", nvidia=4, rdma=1, annotations=joint()))
    assert sorted(minors(run, "p")) == [0, 1, 2, 3]
    roots = nic_roots(run, "p", devices)
    assert roots[0] == pcie_of(0) and len(roots) == 4


def test_same_pcie_searches_another_gpu_set_instead_of_failing() -> None:
    """§2.3 row 3 with SamePCIe: Koordinator keeps GPUs 0-3 and fails (P1..P3 lack NICs);
    searching GPU sets in the tree's order finds N1, where every root has a NIC."""
    devices = EIGHT_ROOTS + topo_nics([1, 0, 0, 0, 1, 1, 1, 1])
    run = run_on(devices, fg_pod("p", nvidia=4, rdma=1, annotations=joint(same_pcie=True)))
    assert sorted(minors(run, "p")) == [4, 5, 6, 7]
    assert sorted(nic_roots(run, "p", devices)) == [pcie_of(r) for r in range(4, 8)]


def test_same_pcie_fails_only_when_no_combination_exists() -> None:
    devices = EIGHT_ROOTS + topo_nics([1, 0, 0, 0, 1, 0, 1, 0])
    run = run_on(devices, fg_pod("p", nvidia=4, rdma=1, annotations=joint(same_pcie=True)))
    assert run.node_of("p") is None
    assert "Device Joint-Allocate rules violation" in run.reason("p")
    two = run_on(devices, fg_pod("q", nvidia=3, rdma=1, annotations=joint(same_pcie=True)))
    assert sorted(minors(two, "q")) == [0, 4, 6]


def test_round_robin_over_gpu_roots_before_a_second_nic_on_one_root() -> None:
    """§2.3 row 4: P0 has 3 NICs; 8 GPUs → one NIC on each of the 8 roots (PR #2646)."""
    devices = EIGHT_ROOTS + topo_nics([3, 1, 1, 1, 1, 1, 1, 1])
    run = run_on(devices, fg_pod("p", nvidia=8, rdma=1, annotations=joint()))
    assert sorted(nic_roots(run, "p", devices)) == sorted(pcie_of(r) for r in range(8))


def test_numa_tier_prefers_nics_on_the_gpus_numa_node() -> None:
    """Without a NIC on a GPU root, a NIC on the same NUMA node comes before remote ones
    (Koordinator goes straight to score order over the whole node)."""
    devices = [gpu(m, numa=0, pcie=pcie_of(m)) for m in range(2)]
    devices += [nic(0, numa=1, pcie=pcie_of(5)), nic(1, numa=1, pcie=pcie_of(6)),
                nic(2, numa=0, pcie=pcie_of(0)), nic(3, numa=0, pcie=pcie_of(3))]
    run = run_on(devices, fg_pod("p", nvidia=2, rdma=1, annotations=joint()))
    assert minors(run, "p", "rdma") == [2, 3]


def test_one_vf_from_each_of_two_pfs_lowest_bus_id() -> None:
    """§2.3 row 5: ``rdma: 2`` + vfSelector + RequestsAsCount → 2 PFs × (rdma 1, one VF)."""
    devices = [nic(0, vfs=4), nic(1, vfs=4, pcie="pci1")]
    held = [bound_pod("old", node="n1", rdma=1, allocation={"rdma": [
        {"minor": 0, "resources": {RDMA: "1"},
         "extension": {"vfs": [{"minor": -1, "busID": "0000:50:00.1"}]}}]})]
    pod = fg_pod("p", rdma=2, annotations=hint(rdma={"vfSelector": {},
                                                      "allocateStrategy": "RequestsAsCount"}))
    run = run_on(devices, pod, held=held)
    entries = {e["minor"]: e for e in allocated(run, "p")["rdma"]}
    assert sorted(entries) == [0, 1]
    assert entries[0]["extension"]["vfs"] == [{"minor": -1, "busID": "0000:50:00.2"}]
    assert entries[1]["extension"]["vfs"] == [{"minor": -1, "busID": "0000:51:00.1"}]
    assert all(e["resources"] == {RDMA: "1"} for e in entries.values())


def test_vf_selector_on_a_node_without_vfs_is_refused() -> None:
    run = run_on([nic(0)], fg_pod("p", rdma=1, annotations=hint(rdma={"vfSelector": {}})))
    assert "Insufficient rdma VirtualFunctions" in run.reason("p")


PCIE_LEVEL = hint(rdma={"exclusivePolicy": "PCIeLevel"})


def test_pcie_level_takes_only_fully_free_roots() -> None:
    """§2.3 row 6: 2 PFs on P0, 2 on P1, one on P1 partly used → only P0 PFs. Koordinator
    computes these roots (``filterFreeDevicesByPCIe``, device_cache.go:383) and discards
    them (device_cache.go:384), so it enforces nothing; Lahar's enforcement is documented
    in docs/devices.md as a fix of that hole."""
    devices = [nic(0, pcie="p0"), nic(1, pcie="p0"), nic(2, pcie="p1"), nic(3, pcie="p1")]
    held = [bound_pod("old", node="n1", rdma=10, allocation={"rdma": [
        {"minor": 3, "resources": {RDMA: "10"}}]})]
    run = run_on(devices, fg_pod("p", rdma=1, annotations=PCIE_LEVEL), held=held)
    assert minors(run, "p", "rdma")[0] in (0, 1)


def test_pcie_level_exclusivity_is_symmetric_and_survives_a_restart() -> None:
    """A root held under PCIeLevel refuses later plain pods of the type too, also when the
    ledger is rebuilt from the holder's annotations (Koordinator enforces neither side: its
    only check, device_cache.go:382-384, drops its result)."""
    devices = [nic(0, pcie="p0"), nic(1, pcie="p0"), nic(2, pcie="p1")]
    holder = bound_pod("holder", node="n1", rdma=1, allocation={"rdma": [
        {"minor": 0, "resources": {RDMA: "1"}}]})
    holder["metadata"]["annotations"].update(PCIE_LEVEL)
    run = run_on(devices, fg_pod("plain", rdma=50), fg_pod("plain2", rdma=50), held=[holder])
    assert minors(run, "plain", "rdma") == [2]
    assert minors(run, "plain2", "rdma") == [2]


def test_requests_as_count_with_device_level_takes_whole_devices() -> None:
    devices = [nic(m, pcie=f"p{m}") for m in range(3)]
    pod = fg_pod("p", rdma=2, annotations=hint(rdma={"allocateStrategy": "RequestsAsCount",
                                                      "exclusivePolicy": "DeviceLevel"}))
    run = run_on(devices, pod)
    assert [e["resources"] for e in allocated(run, "p")["rdma"]] == [{RDMA: "100"}] * 2


def test_apply_for_all_takes_every_matching_device_or_nothing() -> None:
    devices = [nic(0, labels={"net": "a"}), nic(1, labels={"net": "a"}),
               nic(2, labels={"net": "b"})]
    all_a = hint(rdma={"allocateStrategy": "ApplyForAll",
                       "selector": {"matchLabels": {"net": "a"}}})
    run = run_on(devices, fg_pod("p", rdma=30, annotations=all_a))
    assert minors(run, "p", "rdma") == [0, 1]
    held = [bound_pod("old", node="n1", rdma=80, allocation={"rdma": [
        {"minor": 1, "resources": {RDMA: "80"}}]})]
    full = run_on(devices, fg_pod("p", rdma=30, annotations=all_a), held=held)
    assert full.node_of("p") is None


def test_gpu_selector_and_required_topology_scope() -> None:
    devices = [gpu(0, labels={"tier": "slow"}, pcie="p0"), gpu(1, pcie="p0"),
               gpu(2, pcie="p1"), gpu(3, pcie="p2")]
    fast = hint(gpu={"selector": {"matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["slow"]}]}})
    run = run_on(devices, fg_pod("p", nvidia=1, annotations=fast))
    assert minors(run, "p") == [1]
    pcie = hint(gpu={"requiredTopologyScope": "PCIe"})
    ok = run_on(devices, fg_pod("p", nvidia=2, annotations=pcie))
    assert sorted(minors(ok, "p")) == [0, 1]
    refused = run_on(devices[1:], fg_pod("p", nvidia=2, annotations=pcie))
    assert "Insufficient Topology Scoped GPU Devices" in refused.reason("p")


def test_device_scope_means_one_card() -> None:
    device = hint(gpu={"requiredTopologyScope": "Device"})
    devices = topo_gpus()
    one = run_on(devices, fg_pod("p", gpu_core=50, gpu_memory_ratio=50, annotations=device))
    assert len(minors(one, "p")) == 1
    two = run_on(devices, fg_pod("p", nvidia=2, annotations=device))
    assert "requiredTopologyScope Device holds one GPU" in two.reason("p")


def test_multi_shared_gpus_from_the_reference_land_in_one_scope() -> None:
    """§2.3 last row: ``gpu.shared: 2``, 16Gi, core 100 → 2 GPUs × (8Gi, 50); Koordinator
    falls back to score order, here the two cards share a PCIe root."""
    run = run_on(topo_gpus(), fg_pod("p", gpu_shared=2, gpu_memory="16Gi", gpu_core=100))
    entries = allocated(run, "p")["gpu"]
    assert [e["minor"] for e in entries] == [0, 1]
    assert all(e["resources"]["koordinator.sh/gpu-memory"] == "8Gi" and
               e["resources"]["koordinator.sh/gpu-core"] == "50" for e in entries)


def test_bad_hint_or_joint_annotation_is_unresolvable_naming_the_field() -> None:
    bad_hint = fg_pod("a", rdma=1, annotations=hint(rdma={"exclusivePolicy": "Socket"}))
    bad_joint = fg_pod("b", nvidia=1, rdma=1, annotations={JOINT: '{"requiredScope": "x"}'})
    run = run_on([nic(0), gpu(0)], bad_hint, bad_joint)
    assert "field exclusivePolicy" in run.reason("a")
    assert "field requiredScope" in run.reason("b")


def test_gpu_as_a_secondary_is_chosen_as_usual_and_checked_against_the_rule() -> None:
    """Koordinator's GPU allocator ignores the preferred PCIe roots, so put the GPU first;
    with SamePCIe a GPU on another root than the NIC breaks the rule."""
    devices = [gpu(0, pcie="p0"), gpu(1, pcie="p1"), nic(0, pcie="p1")]
    rdma_first = {JOINT: json.dumps({"deviceTypes": ["rdma", "gpu"]})}
    run = run_on(devices, fg_pod("p", nvidia=1, rdma=1, annotations=rdma_first))
    assert minors(run, "p") == [0] and minors(run, "p", "rdma") == [0]
    same = {JOINT: json.dumps({"deviceTypes": ["rdma", "gpu"], "requiredScope": "SamePCIe"})}
    refused = run_on(devices, fg_pod("p", nvidia=1, rdma=1, annotations=same))
    assert "Device Joint-Allocate rules violation" in refused.reason("p")
