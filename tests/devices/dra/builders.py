"""Builders of resource.k8s.io/v1 wire objects for the DRA allocator tests, and the runner that
drives ``allocate`` and compares its results as kube-scheduler's table tests do (results per
claim in any order, devices per result in any order, shareIDs replaced by a fixed one)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from scheduler.devices.dra.allocator import (
    AllocatedState,
    AllocatorError,
    Features,
    Unschedulable,
    allocate,
)
from scheduler.devices.dra.parse import (
    allocation_to_dict,
    device_class_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.devices.dra.state import DeviceID

NODE1, NODE2 = "node-1", "node-2"
REGION1, REGION2 = "region-1", "region-2"
CLASS_A, CLASS_B = "class-a", "class-b"
DRIVER_A, DRIVER_B = "driver-a", "driver-b"
POOL1, POOL2, POOL3, POOL4 = "pool-1", "pool-2", "pool-3", "pool-4"
REQ0, REQ1, REQ2, REQ3 = "req-0", "req-1", "req-2", "req-3"
SUB0, SUB1 = "subReq-0", "subReq-1"
CLAIM0, CLAIM1 = "claim-0", "claim-1"
SLICE1, SLICE2, SLICE3, SLICE4 = "slice-1", "slice-2", "slice-3", "slice-4"
DEV0, DEV1, DEV2, DEV3, DEV4 = "device-0", "device-1", "device-2", "device-3", "device-4"
ALL = "<all nodes>"
PER_DEVICE = "<per device>"
FIXED_SHARE = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
OFF = Features(admin_access=False, prioritized_list=False, resource_claim_device_status=False)
"""The Go table's zero Features: every gate off unless the case turns it on."""


def gates(**on: bool) -> Features:
    return replace(OFF, **on)


def labels(node: str) -> dict[str, str]:
    return {"region": REGION1 if node == NODE1 else REGION2, "planet": "earth"}


def cls(name: str, driver: str, *, config: str = "", extra: str = "") -> dict[str, Any]:
    expression = f'device.driver == "{driver}"' + (f" && {extra}" if extra else "")
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if config:
        spec["config"] = [{"opaque": opaque(driver, config)}]
    return {"metadata": {"name": name}, "spec": spec}


def opaque(driver: str, attribute: str) -> dict[str, Any]:
    return {"driver": driver, "parameters": {attribute: attribute + "Value"}}


def req(name: str, device_class: str, count: int = 1, *selectors: str, **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount",
                               "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    exactly.update(extra)
    return {"name": name, "exactly": exactly}


def all_req(name: str, device_class: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, "allocationMode": "All",
                                      **extra}}


def sub(name: str, device_class: str, count: int = 1, *selectors: str, **extra: Any) -> dict[str, Any]:
    out = req(name, device_class, count, *selectors, **extra)["exactly"]
    return {"name": name, **out}


def first(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None,
          config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}


def match(attribute: str, *requests: str) -> dict[str, Any]:
    return {"matchAttribute": attribute, **({"requests": list(requests)} if requests else {})}


def distinct(attribute: str, *requests: str) -> dict[str, Any]:
    return {"distinctAttribute": attribute, **({"requests": list(requests)} if requests else {})}


def dev(name: str, capacity: dict[str, str] | None = None, attributes: dict[str, Any] | None = None,
        **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if capacity:
        out["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    if attributes:
        out["attributes"] = attributes
    out.update(extra)
    return out


def sl(name: str, node: Any, pool: str, driver: str, *devices: dict[str, Any], count: int = 1,
       generation: int = 1, counters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": generation,
                                                        "resourceSliceCount": count}}
    if node == ALL:
        spec["allNodes"] = True
    elif node == PER_DEVICE:
        spec["perDeviceNodeSelection"] = True
    elif isinstance(node, dict):
        spec["nodeSelector"] = node
    else:
        spec["nodeName"] = node
    if devices:
        spec["devices"] = list(devices)
    if counters:
        spec["sharedCounters"] = counters
    return {"metadata": {"name": name}, "spec": spec}


def one_device(name: str, node: Any, pool: str, driver: str, **kw: Any) -> dict[str, Any]:
    return sl(name, node, pool, driver, dev(DEV1), **kw)


def many(name: str, node: Any, pool: str, driver: str, count: int) -> dict[str, Any]:
    return sl(name, node, pool, driver, *(dev(f"device-{i}") for i in range(count)))


def label_selector(key: str, *values: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": key, "operator": "In", "values": list(values)}]}]}


def local(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def res(request: str, driver: str, pool: str, device: str, *, admin: bool = False,
        **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"request": request, "driver": driver, "pool": pool, "device": device}
    if admin:
        out["adminAccess"] = True
    out.update(extra)
    return out


def result(selector: dict[str, Any] | None, *results: dict[str, Any],
           config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"results": list(results)}
    if config:
        devices["config"] = config
    out: dict[str, Any] = {"devices": devices}
    if selector is not None:
        out["nodeSelector"] = selector
    return out


def in_use(driver: str, pool: str, device: str) -> DeviceID:
    return DeviceID(driver, pool, device)


@dataclass
class Case:
    """One table case: ``expect`` the results, or ``error`` a substring of the AllocatorError,
    or neither for "no allocation" (Unschedulable, ``reason`` a substring of it)."""

    name: str
    claims: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    node: str = NODE1
    features: Features = OFF
    allocated: list[DeviceID] = field(default_factory=list)
    allocated_capacity: dict[DeviceID, dict[str, str]] = field(default_factory=dict)
    expect: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    reason: str = ""
    nothing: bool = False
    """No claims: ``allocate`` returns an empty list."""


def _canon(obj: Any) -> Any:
    """Order-insensitive form (ConsistOf) of results, requirements and values."""
    if isinstance(obj, dict):
        return tuple(sorted((k, _canon(v)) for k, v in obj.items()))
    if isinstance(obj, list):
        return tuple(sorted((_canon(v) for v in obj), key=repr))
    return obj


def run_case(case: Case) -> None:
    from decimal import Decimal

    from scheduler.api.resource import parse_quantity

    state = AllocatedState()
    for device in case.allocated:
        state.devices[device] += 1
    for device, consumed in case.allocated_capacity.items():
        state.capacity[device] = {k: parse_quantity(v) for k, v in consumed.items()}
        state.shared_devices[device] += 1
    claims = [resource_claim_from_dict(c) for c in case.claims]
    classes = {c.name: c for c in (device_class_from_dict(c) for c in case.classes)}
    slices = [resource_slice_from_dict(s) for s in case.slices]
    kwargs = dict(node_name=case.node, node_labels=labels(case.node), claims=claims,
                  classes=classes, slices=slices, allocated=state, features=case.features,
                  share_id=lambda: FIXED_SHARE)
    if case.error:
        with pytest.raises(AllocatorError) as info:
            allocate(**kwargs)  # type: ignore[arg-type]
        assert case.error in str(info.value)
        return
    if case.nothing:
        assert allocate(**kwargs) == []  # type: ignore[arg-type]
        return
    if not case.expect:
        with pytest.raises(Unschedulable) as unsched:
            allocate(**kwargs)  # type: ignore[arg-type]
        assert case.reason in unsched.value.reason
        return
    got = [allocation_to_dict(r) for r in allocate(**kwargs)]  # type: ignore[arg-type]
    for r in case.expect:
        for entry in r["devices"]["results"]:
            if "consumedCapacity" in entry:
                entry["consumedCapacity"] = {
                    k: str(int(Decimal(parse_quantity(v)))) for k, v in entry["consumedCapacity"].items()}
    assert _canon(got) == _canon(case.expect)
