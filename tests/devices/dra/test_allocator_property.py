"""Invariants of the DRA allocator under random clusters and claims (hypothesis).

kube-scheduler's allocator guarantees (structured/internal/experimental
allocator_experimental.go, ``allocateDevice``/``CmpRequestOverCapacity``) that a device without
``allowMultipleAllocations`` goes to one claim only, that the capacity consumed on a shared
device never exceeds what it publishes, and the scheduler's ``AllocatedState`` counts claims in
and out. Here: claims are allocated one after the other on a node, each result added to the
state as a scheduler would; then every result is removed again.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.devices.dra.allocator import (
    AllocatedState,
    AllocatorError,
    Features,
    Unschedulable,
    allocate,
)
from scheduler.devices.dra.model import AllocationResult, DeviceRequestResult
from scheduler.devices.dra.parse import (
    device_class_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.devices.dra.state import DeviceID

DRIVER = "gpu.example.com"
FEATURES = Features.all_enabled()
CLASSES = {c.name: c for c in (device_class_from_dict(
    {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expr}}]}})
    for name, expr in (("gpu", f'device.driver == "{DRIVER}"'),
                       ("big", f'device.capacity["{DRIVER}"].memory.compareTo(quantity("8Gi")) >= 0'),
                       ("model-a", f'device.attributes["{DRIVER}"].model == "a"')))}


@st.composite
def devices(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 5))):
        memory = draw(st.sampled_from([4, 8, 16]))
        device: dict[str, Any] = {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": draw(st.sampled_from(["a", "b"]))}},
            "capacity": {"memory": {"value": f"{memory}Gi"}},
        }
        if draw(st.booleans()):
            device["allowMultipleAllocations"] = True
        out.append(device)
    return out


@st.composite
def claims(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        requests = []
        for r in range(draw(st.integers(1, 2))):
            exactly: dict[str, Any] = {"deviceClassName": draw(st.sampled_from(sorted(CLASSES))),
                                       "count": draw(st.integers(1, 2))}
            if draw(st.booleans()):
                exactly["capacity"] = {"requests": {"memory": f"{draw(st.sampled_from([2, 4, 8]))}Gi"}}
            requests.append({"name": f"r{r}", "exactly": exactly})
        out.append({"metadata": {"name": f"c{i}", "namespace": "ns"},
                    "spec": {"devices": {"requests": requests}}})
    return out


def _slice(devs: list[dict[str, Any]]) -> Any:
    return resource_slice_from_dict({"metadata": {"name": "s"}, "spec": {
        "driver": DRIVER, "nodeName": "n1", "devices": devs,
        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}}})


def _check(kept: list[AllocationResult], devs: list[dict[str, Any]]) -> None:
    exclusive: Counter[str] = Counter()
    shared: dict[str, Decimal] = {}
    multi = {d["name"] for d in devs if d.get("allowMultipleAllocations")}
    capacity = {d["name"]: Decimal(int(d["capacity"]["memory"]["value"][:-2]) * 2**30) for d in devs}
    for result in kept:
        for r in result.results:
            if r.device in multi:
                assert r.share_id is not None
                assert r.consumed_capacity is not None
                shared[r.device] = shared.get(r.device, Decimal(0)) + r.consumed_capacity["memory"]
            else:
                exclusive[r.device] += 1
    assert all(n == 1 for n in exclusive.values()), exclusive
    assert not (set(exclusive) & set(shared))
    for name, used in shared.items():
        assert used <= capacity[name]


@settings(max_examples=60, deadline=None)
@given(devs=devices(), raw_claims=claims())
def test_no_double_allocation_and_capacity_respected(devs: list[dict[str, Any]],
                                                     raw_claims: list[dict[str, Any]]) -> None:
    """allocator_experimental.go allocateDevice / consumable_capacity.go CmpRequestOverCapacity:
    across claims allocated one after another, no exclusive device twice, no shared device
    over its capacity; removing every result empties the state."""
    slices = [_slice(devs)]
    state = AllocatedState()
    kept: list[AllocationResult] = []
    for raw in raw_claims:
        claim = resource_claim_from_dict(raw)
        try:
            [result] = allocate(node_name="n1", node_labels={}, claims=[claim], classes=CLASSES,
                                slices=slices, allocated=state, features=FEATURES,
                                share_id=lambda: "share")
        except Unschedulable:
            continue
        state.add(result)
        kept.append(result)
        _check(kept, devs)
    for result in kept:
        state.remove(result)
    assert state.is_empty()


@settings(max_examples=40, deadline=None)
@given(devs=devices(), raw_claims=claims())
def test_claims_together_match_claims_one_by_one_invariants(
        devs: list[dict[str, Any]], raw_claims: list[dict[str, Any]]) -> None:
    """allocator_experimental.go Allocate: claims allocated together (a gang) either all get
    devices, with the same invariants, or none; a rollback leaves the state as it was."""
    slices = [_slice(devs)]
    parsed = [resource_claim_from_dict(raw) for raw in raw_claims]
    before = AllocatedState()
    try:
        results = allocate(node_name="n1", node_labels={}, claims=parsed, classes=CLASSES,
                           slices=slices, allocated=before, features=FEATURES,
                           share_id=lambda: "share")
    except (Unschedulable, AllocatorError):
        return
    assert len(results) == len(parsed)
    _check(results, devs)
    state = before.copy()
    for result in results:
        state.add(result)
    for result in results:
        state.remove(result)
    assert state == before


def test_remove_keeps_other_holders() -> None:
    """AllocatedState: removing one claim's share of a device keeps the other claim's share and
    its consumed capacity (allocatedstate.go counts every share)."""
    device = DeviceID(DRIVER, "n1", "gpu-0")
    state = AllocatedState()
    one = DeviceRequestResult("r", DRIVER, "n1", "gpu-0", share_id="a",
                              consumed_capacity={"memory": Decimal(4)})
    two = DeviceRequestResult("r", DRIVER, "n1", "gpu-0", share_id="b",
                              consumed_capacity={"memory": Decimal(2)})
    first = AllocationResult((one,))
    second = AllocationResult((two,))
    state.add(first)
    state.add(second)
    state.remove(first)
    assert state.capacity[device] == {"memory": Decimal(2)}
    assert state.is_allocated(device)
    state.remove(second)
    assert state.is_empty()
