"""The node agent's DRA devices and ResourceSlices, allocated by Lahar's own DRA allocator.

The slices are what ``k8s.io/dynamic-resource-allocation/resourceslice``'s controller would
publish for the devices (``resourceslice/resourceslicecontroller.go``, one pool per node); the
device shapes follow NVIDIA's k8s-dra-driver-gpu (``cmd/gpu-kubelet-plugin/deviceinfo.go``:
``GetDevice`` of a GPU and a MIG device, ``type``/``uuid``/``index``/``minor``/... attributes,
``memory`` capacity) and HAMi's sharing by consumable ``memory``/``cores`` capacity. Every
slice built here goes through ``resource_slice_from_dict`` and ``allocate``
(``structured/internal/experimental/allocator_experimental.go`` as ported in
scheduler/devices/dra), and the DeviceClasses shipped in conf/deploy/dra/ select the devices.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.devices.dra.allocator import (
    AllocatedState,
    Features,
    Unschedulable,
    allocate,
)
from scheduler.devices.dra.model import AllocationResult
from scheduler.devices.dra.parse import (
    device_class_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.devices.node.dra.devices import (
    device_for_name,
    device_wire,
    dra_devices,
    gpu_facts,
    mig_layout,
    semver,
)
from scheduler.devices.node.dra.slices import PoolSpec, build_slices, unhealthy_taint
from scheduler.devices.node.inventory import Inventory, Nic, fake_gpus
from scheduler.devices.node.modes import FakeMig, parse_fake_mig

GIB = 2**30
NODE = "dra-node-1"
DRIVER = "gpu.lahar.dev"
CLASSES_YAML = Path(__file__).resolve().parents[3] / "conf" / "deploy" / "dra" / \
    "10-deviceclasses.yaml"
ALL = Features.all_enabled()


def _inventory(gpus: int = 2, *, nics: int = 0, model: str = "NVIDIA A100-SXM4-80GB",
               memory: int = 80 * GIB) -> Inventory:
    return Inventory(gpus=fake_gpus(NODE, gpus, memory, model=model), driver="535.104.05",
                     fake=True,
                     nics=tuple(Nic(minor=i, bus_id=f"0000:{0x18 + i:02x}:00.0",
                                    pcie=f"pci0000:{i * 0x20:02x}",
                                    vfs=(f"0000:{0x18 + i:02x}:00.1",)) for i in range(nics)))


def _classes() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(CLASSES_YAML.read_text()) if d]
    return {d["metadata"]["name"]: device_class_from_dict(d) for d in docs}


def _slices(inventory: Inventory, *, mode: str = "exclusive", mig: Any = None,
            taints: bool = False, unhealthy: tuple[str, ...] = ()) -> list[Any]:
    spec = PoolSpec(node_name=NODE, mode=mode, device_taints=taints)
    return [resource_slice_from_dict(s) for s in build_slices(
        spec, inventory, generation=1, mig=mig, unhealthy=unhealthy)]


def _claim(name: str, *requests: dict[str, Any], constraints: list[Any] | None = None) -> Any:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return resource_claim_from_dict({"metadata": {"name": name, "namespace": "default"},
                                     "spec": {"devices": devices}})


def _req(name: str, device_class: str, *, count: int = 1, capacity: dict[str, str] | None = None,
         selector: str = "") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": exactly}


def _allocate(claims: list[Any], slices: list[Any], *, state: AllocatedState | None = None,
              features: Features = ALL) -> list[AllocationResult]:
    return allocate(node_name=NODE, node_labels={}, claims=claims, classes=_classes(),
                    slices=slices, allocated=state or AllocatedState(), features=features)


def _devices(result: AllocationResult) -> list[str]:
    return sorted(r.device for r in result.results)


# -- devices -------------------------------------------------------------------------------
def test_names_are_stable_dns_labels_and_the_reverse_lookup_refuses_what_is_not_here() -> None:
    inv = _inventory(2, nics=1)
    mig = mig_layout(FakeMig(parse_fake_mig("1g.10gb:2,2g.20gb:1")), inv)
    names = [d.name for d in dra_devices(inv, mig)]
    assert names == ["gpu-0", "gpu-0-mig-1g10gb-0", "gpu-0-mig-1g10gb-1", "gpu-0-mig-2g20gb-2",
                     "gpu-1", "gpu-1-mig-1g10gb-0", "gpu-1-mig-1g10gb-1", "gpu-1-mig-2g20gb-2",
                     "rdma-0", "rdma-0-vf-0"]
    for device in dra_devices(inv, mig):
        assert device_for_name(inv, device.name, mig) == device
    assert device_for_name(inv, "gpu-0-mig-1g10gb-0", mig).mig.uuid.startswith("MIG-")  # type: ignore[union-attr]
    for missing in ("gpu-2", "gpu-0-mig-1g10gb-5", "gpu-0-mig-2g20gb-0", "rdma-1",
                    "rdma-0-vf-1", "gpu-x", "GPU-0", "gpu-0-mig-1g10gb-0"):
        lookup = device_for_name(inv, missing, mig if missing != "gpu-0-mig-1g10gb-0" else None)
        assert lookup is None, missing


def test_a_gpu_carries_nvidias_attributes_and_hamis_capacity() -> None:
    inv = _inventory(1)
    (gpu,) = dra_devices(inv)
    wire = device_wire(gpu, mode="exclusive", driver_version=inv.driver)
    attrs = wire["attributes"]
    assert attrs["type"] == {"string": "gpu"}
    assert attrs["uuid"] == {"string": inv.gpus[0].uuid}
    assert attrs["index"] == {"int": 0} and attrs["minor"] == {"int": 0}
    assert attrs["productName"] == {"string": "NVIDIA A100-SXM4-80GB"}
    assert attrs["architecture"] == {"string": "Ampere"}
    assert attrs["cudaComputeCapability"] == {"version": "8.0.0"}
    assert attrs["driverVersion"] == {"version": "535.104.5"}
    assert attrs["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:00"}
    assert wire["capacity"] == {"memory": {"value": "80Gi"}, "cores": {"value": "100"}}
    assert "allowMultipleAllocations" not in wire
    shared = device_wire(gpu, mode="shared", driver_version=inv.driver)
    assert shared["allowMultipleAllocations"] is True
    assert shared["capacity"]["memory"]["requestPolicy"] == {
        "default": "80Gi", "validRange": {"min": "1Mi", "max": "80Gi", "step": "1Mi"}}
    assert shared["capacity"]["cores"]["requestPolicy"]["validRange"]["step"] == "1"
    with pytest.raises(ValueError, match="DRA mode 'mps'"):
        device_wire(gpu, mode="mps")


def test_versions_and_models() -> None:
    assert semver("550.54.15") == "550.54.15" and semver("8.0") == "8.0.0"
    assert semver("fake") == "" and semver("1.2.3.4") == ""
    assert gpu_facts("NVIDIA H100 80GB HBM3") == ("Hopper", "9.0")
    assert gpu_facts("NVIDIA L40S") == ("Ada Lovelace", "8.9")
    assert gpu_facts("Tesla T4") == ("Turing", "7.5")
    assert gpu_facts("NVIDIA Lahar-Fake-GPU") == ("", "")
    (gpu,) = dra_devices(_inventory(1, model="NVIDIA Lahar-Fake-GPU"))
    assert "architecture" not in device_wire(gpu, mode="exclusive")["attributes"]


# -- slices and the allocator --------------------------------------------------------------
def test_one_pool_per_node_and_the_whole_gpu_class_allocates_cards() -> None:
    raw = build_slices(PoolSpec(node_name=NODE, node_uid="u-1"), _inventory(2), generation=3)
    (one,) = raw
    assert one["metadata"]["name"] == f"{NODE}-{DRIVER}-0"
    assert one["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "u-1", "controller": True}
    assert one["spec"]["pool"] == {"name": NODE, "generation": 3, "resourceSliceCount": 1}
    assert one["spec"]["nodeName"] == NODE and one["spec"]["driver"] == DRIVER
    slices = [resource_slice_from_dict(s) for s in raw]
    (result,) = _allocate([_claim("c", _req("gpu", "gpu.lahar.dev", count=2))], slices)
    assert _devices(result) == ["gpu-0", "gpu-1"]
    with pytest.raises(Unschedulable):
        _allocate([_claim("c", _req("gpu", "gpu.lahar.dev", count=3))], slices)


def test_the_shared_class_matches_only_shareable_cards_and_memory_adds_up() -> None:
    inv = _inventory(1, memory=16 * GIB)
    with pytest.raises(Unschedulable):  # exclusive cards are not shareable
        _allocate([_claim("c", _req("s", "shared-gpu.lahar.dev",
                                    capacity={"memory": "4Gi"}))], _slices(inv))
    slices = _slices(inv, mode="shared")
    state = AllocatedState()
    for name, memory in (("a", "10Gi"), ("b", "6Gi")):
        (result,) = _allocate([_claim(name, _req("s", "shared-gpu.lahar.dev",
                                                 capacity={"memory": memory, "cores": "30"}))],
                              slices, state=state)
        (got,) = result.results
        assert got.device == "gpu-0" and got.share_id
        assert got.consumed_capacity == {"memory": Decimal(int(memory[:-2]) * GIB),
                                         "cores": Decimal(30)}
        state.add(result)
    with pytest.raises(Unschedulable):  # 16Gi are taken
        _allocate([_claim("c", _req("s", "shared-gpu.lahar.dev", capacity={"memory": "1Mi"}))],
                  slices, state=state)


def test_a_shared_request_without_capacity_takes_the_card() -> None:
    """HAMi's policy: the defaults are the whole memory and all 100 cores."""
    slices = _slices(_inventory(1, memory=16 * GIB), mode="shared")
    (result,) = _allocate([_claim("c", _req("s", "shared-gpu.lahar.dev"))], slices)
    (got,) = result.results
    assert got.consumed_capacity == {"memory": Decimal(16 * GIB), "cores": Decimal(100)}


def test_mig_instances_are_partitionable_and_exclude_the_whole_card() -> None:
    inv = _inventory(1)
    mig = mig_layout(FakeMig(parse_fake_mig("1g.10gb:2,3g.40gb:1")), inv)
    raw = build_slices(PoolSpec(node_name=NODE), inv, generation=1, mig=mig)
    assert [list(s["spec"]) for s in raw] == [
        ["driver", "nodeName", "pool", "sharedCounters"], ["driver", "nodeName", "pool", "devices"]]
    assert raw[0]["spec"]["sharedCounters"] == [{"name": "gpu-0-counters", "counters": {
        "memory": {"value": "80Gi"}, "compute-slices": {"value": "7"}}}]
    slices = [resource_slice_from_dict(s) for s in raw]
    (result,) = _allocate([_claim("c", _req("m", "mig.lahar.dev", count=2,
                                            selector="device.attributes['gpu.lahar.dev']"
                                                     ".profile == '1g.10gb'"))], slices)
    assert _devices(result) == ["gpu-0-mig-1g10gb-0", "gpu-0-mig-1g10gb-1"]
    state = AllocatedState()
    state.add(result)
    with pytest.raises(Unschedulable):  # the instances hold part of the card's counters
        _allocate([_claim("w", _req("g", "gpu.lahar.dev"))], slices, state=state)
    (mig_only,) = _allocate([_claim("m", _req("m", "mig.lahar.dev", selector=(
        "device.attributes['gpu.lahar.dev'].profile == '3g.40gb'")))], slices, state=state)
    assert _devices(mig_only) == ["gpu-0-mig-3g40gb-2"]


def test_a_gpu_and_an_rdma_nic_on_one_pcie_root() -> None:
    inv = _inventory(4, nics=2)  # GPUs 0,1 on pci0000:00, 2,3 on pci0000:20; NICs the same
    slices = _slices(inv)
    constraint = [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    (result,) = _allocate([_claim("c", _req("gpu", "gpu.lahar.dev", selector=(
        "device.attributes['gpu.lahar.dev'].index == 2")), _req("nic", "rdma.lahar.dev"),
        constraints=constraint)], slices)
    assert _devices(result) == ["gpu-2", "rdma-1"]


def test_an_unhealthy_card_is_removed_or_tainted() -> None:
    inv = _inventory(2)
    sick = replace(inv, gpus=(inv.gpus[0], replace(inv.gpus[1], healthy=False)))
    removed = _slices(sick)
    assert [d.name for s in removed for d in s.devices] == ["gpu-0"]
    assert [d.name for s in _slices(inv, unhealthy=("gpu-0",)) for d in s.devices] == ["gpu-1"]
    tainted = build_slices(PoolSpec(node_name=NODE, device_taints=True), sick, generation=1)
    devices = tainted[0]["spec"]["devices"]
    assert "taints" not in devices[0] and devices[1]["taints"] == [unhealthy_taint(DRIVER)]
    slices = [resource_slice_from_dict(s) for s in tainted]
    with pytest.raises(Unschedulable):
        _allocate([_claim("c", _req("gpu", "gpu.lahar.dev", count=2))], slices)
    (result,) = _allocate([_claim("c", _req("gpu", "gpu.lahar.dev"))], slices)
    assert _devices(result) == ["gpu-0"]


def test_many_devices_split_into_slices_of_the_api_limits() -> None:
    inv = _inventory(9)
    mig = mig_layout(FakeMig(parse_fake_mig("1g.10gb:7")), inv)
    raw = build_slices(PoolSpec(node_name=NODE), inv, generation=1, mig=mig)
    counters = [s for s in raw if "sharedCounters" in s["spec"]]
    devices = [s for s in raw if "devices" in s["spec"]]
    assert [len(s["spec"]["sharedCounters"]) for s in counters] == [8, 1]
    assert [len(s["spec"]["devices"]) for s in devices] == [64, 8]  # 9 × (1 + 7) = 72
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in raw} == {4}
    assert len({s["metadata"]["name"] for s in raw}) == 4
    slices = [resource_slice_from_dict(s) for s in raw]
    (result,) = _allocate([_claim("c", _req("m", "mig.lahar.dev", count=7, selector=(
        "device.attributes['gpu.lahar.dev'].index == 8")))], slices)  # in the second slice
    assert _devices(result) == [f"gpu-8-mig-1g10gb-{i}" for i in range(7)]


def test_cards_are_named_by_minor_as_nvidias_driver_names_them() -> None:
    """``GpuInfo.CanonicalName`` in k8s-dra-driver-gpu: ``gpu-<minor>``, not the NVML index."""
    inv = _inventory(2)
    swapped = replace(inv, gpus=(replace(inv.gpus[0], minor=5), replace(inv.gpus[1], minor=4)))
    assert [d.name for d in dra_devices(swapped)] == ["gpu-5", "gpu-4"]
    found = device_for_name(swapped, "gpu-4")
    assert found is not None and found.gpu == swapped.gpus[1]
    assert device_for_name(swapped, "gpu-0") is None


def test_in_the_shared_mode_a_whole_gpu_claim_keeps_the_card_and_mig_cards_are_not_shared() -> None:
    """A request of the whole class names no capacity, so it consumes the policy's defaults:
    all the memory and all 100 cores, leaving no share (``default`` in CapacityRequestPolicy,
    k8s.io/api resource/v1/types.go)."""
    inv = _inventory(1, memory=16 * GIB)
    slices = _slices(inv, mode="shared")
    (whole,) = _allocate([_claim("w", _req("g", "gpu.lahar.dev"))], slices)
    state = AllocatedState()
    state.add(whole)
    with pytest.raises(Unschedulable):
        _allocate([_claim("s", _req("s", "shared-gpu.lahar.dev", capacity={
            "memory": "1Gi", "cores": "1"}))], slices, state=state)
    mig = mig_layout(FakeMig(parse_fake_mig("1g.10gb:1")), inv)
    (card, _) = [device_wire(d, mode="shared", mig=mig) for d in dra_devices(inv, mig)]
    assert "allowMultipleAllocations" not in card and "consumesCounters" in card


def test_memory_is_published_in_the_api_servers_canonical_form() -> None:
    """The API server writes a quantity back canonically (``Quantity.String`` in
    k8s.io/apimachinery/pkg/api/resource: the largest exact binary suffix), so the publisher's
    compare of re-read and rebuilt slices only holds if they are built that way."""
    from scheduler.devices.node.dra.devices import mib_quantity

    assert [mib_quantity(m) for m in (81920, 9728, 1024, 16384 * 1024, 1, 0)] == [
        "80Gi", "9728Mi", "1Gi", "16Ti", "1Mi", "0"]
