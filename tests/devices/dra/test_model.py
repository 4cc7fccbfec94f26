"""The DRA parsers' errors, gates parsing, a missing class, and the CEL compile cache.

Requests kube-scheduler's allocator rejects (allocator_testing.go ``empty-class``,
``unknown-selector``, ``unknown-allocation-mode``, ``unknown-constraint``) are rejected here by
the parser naming the field; ``no-classes``/``unknown-class`` are Unschedulable as the
dynamicresources PreFilter reports them.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.devices.dra import cel
from scheduler.devices.dra.allocator import (
    AllocatedState,
    AllocatorError,
    Features,
    Unschedulable,
    allocate,
)
from scheduler.devices.dra.parse import (
    allocation_from_dict,
    allocation_to_dict,
    device_class_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.devices.dra.state import FeatureGateError
from scheduler.devices.dra.wire import DRAObjectError
from tests.devices.dra.builders import claim, cls, one_device, req


def _claim_with(exactly: dict[str, Any], constraints: list[Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "r", "exactly": exactly}]}
    if constraints is not None:
        devices["constraints"] = constraints
    return {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": devices}}


@pytest.mark.parametrize(("exactly", "constraints", "message"), [
    ({"deviceClassName": "a", "count": 0}, None,
     "ResourceClaim ns/c: field spec.devices.requests[0].exactly.count: must be positive"),
    ({"count": 1}, None, "field spec.devices.requests[0].exactly.deviceClassName: required"),
    ({"deviceClassName": "a", "selectors": [{}]}, None,
     "field spec.devices.requests[0].exactly.selectors[0].cel.expression: required"),
    ({"deviceClassName": "a", "allocationMode": "future-mode"}, None,
     "field spec.devices.requests[0].exactly.allocationMode: unsupported value 'future-mode'"),
    ({"deviceClassName": "a", "capacity": {"requests": {"memory": "lots"}}}, None,
     "field spec.devices.requests[0].exactly.capacity.requests[memory]: bad quantity"),
], ids=["count", "empty-class", "unknown-selector", "unknown-allocation-mode", "bad-quantity"])
def test_claim_errors_name_the_field(exactly: dict[str, Any], constraints: Any, message: str) -> None:
    with pytest.raises(DRAObjectError, match=None) as info:
        resource_claim_from_dict(_claim_with(exactly, constraints))
    assert message in str(info.value)


def test_unknown_constraint_is_the_allocators_error() -> None:
    """allocator_testing.go unknown-constraint: an empty constraint is kube-scheduler's error."""
    parsed = resource_claim_from_dict(_claim_with({"deviceClassName": "class-a"}, [{}]))
    with pytest.raises(AllocatorError, match=r"constraint #0: empty constraint"):
        allocate(node_name="node-1", node_labels={}, claims=[parsed],
                 classes={"class-a": device_class_from_dict(cls("class-a", "driver-a"))},
                 slices=[], allocated=AllocatedState(), features=Features())


def test_slice_needs_one_node_selection() -> None:
    raw = one_device("s", "node-1", "p", "d")
    raw["spec"]["allNodes"] = True
    with pytest.raises(DRAObjectError, match="ResourceSlice s: field spec: exactly one of"):
        resource_slice_from_dict(raw)


@pytest.mark.parametrize("name", ["no-classes", "unknown-class"])
def test_missing_class_is_unschedulable(name: str) -> None:
    """allocator_testing.go no-classes / unknown-class (Unschedulable here, see docs/dra.md)."""
    parsed = resource_claim_from_dict(claim("claim-0", req("req-0", "unknown-class")))
    classes = {} if name == "no-classes" else {"class-a": cls("class-a", "driver-a")}
    with pytest.raises(Unschedulable, match="device class unknown-class does not exist"):
        allocate(node_name="node-1", node_labels={}, claims=[parsed],
                 classes={k: device_class_from_dict(v) for k, v in classes.items()},
                 slices=[resource_slice_from_dict(one_device("s", "node-1", "p", "driver-a"))],
                 allocated=AllocatedState(), features=Features())


def test_feature_gates_parse_as_kube_scheduler() -> None:
    features = Features.parse("DRAConsumableCapacity=true, DRAAdminAccess=false,OtherGate=true")
    assert features.consumable_capacity and not features.admin_access
    assert features.prioritized_list  # default kept
    with pytest.raises(FeatureGateError, match="unrecognized feature gate: OtherGate"):
        Features.parse("OtherGate=true", ignore_unknown=False)
    with pytest.raises(FeatureGateError, match=r'strconv.ParseBool: parsing "yes"'):
        Features.parse("DRAAdminAccess=yes")
    assert Features().to_gates()["DRAPartitionableDevices"] is False


def test_allocation_round_trip() -> None:
    wire: dict[str, Any] = {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x",
                                     "shareID": "s", "consumedCapacity": {"memory": "2Gi"}}],
                        "config": [{"source": "FromClaim", "opaque": {"driver": "d"}}]},
            "nodeSelector": {"nodeSelectorTerms": []}}
    back = allocation_to_dict(allocation_from_dict(wire))
    assert back["devices"]["results"][0]["consumedCapacity"] == {"memory": str(2 * 2**30)}
    assert back["devices"]["config"] == wire["devices"]["config"]


def test_selector_compiled_once() -> None:
    """Programs are compiled once per expression, not per device or per call."""
    expression = 'device.driver == "compile-once.example.com"'
    before = cel.compile_count()
    for _ in range(3):
        assert cel.compile_selector(expression) is cel.compile_selector(expression)
    assert cel.compile_count() == before + 1
    broken = cel.compile_selector("device.driver ==")
    assert broken.error


@pytest.mark.parametrize(("attribute", "message"), [
    ({}, "exactly one of int, bool, string, version (or their lists) is required"),
    ({"strings": []}, "must not be empty"),
    ({"versions": None}, "must not be empty"),
], ids=["with-distinct-constraints-unknown-type-attribute",
        "list-attributes-match-constaint-with-empty-or-unknown-type",
        "list-attributes-distinct-constaint-with-empty-or-unknown-type"])
def test_attribute_without_value_is_rejected(attribute: dict[str, Any], message: str) -> None:
    """allocator_testing.go: an attribute without a value (kube-scheduler: "unsupported
    attribute value" when a constraint reads it) is rejected by the parser, naming the field."""
    raw = one_device("s", "node-1", "p", "d")
    raw["spec"]["devices"][0]["attributes"] = {"a": attribute}
    with pytest.raises(DRAObjectError) as info:
        resource_slice_from_dict(raw)
    assert "field spec.devices[0].attributes[a]" in str(info.value)
    assert message in str(info.value)


def test_identical_devices_evaluated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A selector runs once per distinct device content; a runtime error is kept as well."""
    calls: list[str] = []
    original = cel.CompiledSelector.matches

    def counting(self: cel.CompiledSelector, activation: Any) -> bool:
        calls.append(self.expression)
        return original(self, activation)

    monkeypatch.setattr(cel.CompiledSelector, "matches", counting)
    raw = one_device("s", "node-1", "p", "once.example.com")
    raw["spec"]["devices"] = [{"name": f"g{i}", "attributes": {"model": {"string": "x"}}}
                              for i in range(3)]
    devices = resource_slice_from_dict(raw).devices
    good = cel.compile_selector('device.attributes["once.example.com"].model == "x"')
    bad = cel.compile_selector('device.attributes["once.example.com"].missing == "x"')
    assert all(cel.device_matches(good, d, "once.example.com", list_types=False) for d in devices)
    for d in devices:
        with pytest.raises(cel.CELError, match="missing"):
            cel.device_matches(bad, d, "once.example.com", list_types=False)
    assert calls == [good.expression, bad.expression]
    other = resource_slice_from_dict({**raw, "spec": {**raw["spec"], "devices": [
        {"name": "g9", "attributes": {"model": {"string": "y"}}}]}}).devices[0]
    assert not cel.device_matches(good, other, "once.example.com", list_types=False)
    assert len(calls) == 3
