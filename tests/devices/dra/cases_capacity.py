"""Ported table cases, part 6: binding conditions with partitionable devices and consumable
capacity (TestAllocator in k8s.io/dynamic-resource-allocation
structured/internal/allocatortesting/allocator_testing.go, the cases of the same names)."""

from __future__ import annotations

from typing import Any

from tests.devices.dra.builders import (
    CLAIM0,
    CLAIM1,
    CLASS_A,
    DEV1,
    DEV2,
    DEV3,
    DRIVER_A,
    NODE1,
    POOL1,
    REQ0,
    REQ1,
    SLICE1,
    SLICE2,
    SLICE3,
    SLICE4,
    SUB0,
    SUB1,
    Case,
    all_req,
    claim,
    cls,
    dev,
    first,
    gates,
    in_use,
    label_selector,
    local,
    match,
    one_device,
    req,
    res,
    result,
    sl,
    sub,
)

A = cls(CLASS_A, DRIVER_A)
MULTI = cls(CLASS_A, DRIVER_A, extra="device.allowMultipleAllocations == true")
SINGLE = cls(CLASS_A, DRIVER_A, extra="device.allowMultipleAllocations == false")
CC = gates(consumable_capacity=True)
BINDING_PD = gates(partitionable_devices=True, device_binding_conditions=True,
                   resource_claim_device_status=True)
CAP0 = "capacity-0"
SHARE = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"


def ask(name: str, amount: str | None = None, **extra: Any) -> dict[str, Any]:
    """A one-device request, asking ``amount`` of capacity-0 when given."""
    if amount is not None:
        extra["capacity"] = {"requests": {CAP0: amount}}
    return req(name, CLASS_A, 1, **extra)


def ask_all(name: str, amount: str) -> dict[str, Any]:
    return all_req(name, CLASS_A, capacity={"requests": {CAP0: amount}})


def shared(name: str, capacity: str | None = None, *, ranged: str = "",
           valid: tuple[str, ...] = (), value: str = "", multi: bool = True,
           **extra: Any) -> dict[str, Any]:
    """A device with capacity-0: plain, with the range policy (default/min/step 2, max 4), or
    with valid values (the first is the default; the capacity ``value`` or the last)."""
    out = dev(name, **extra)
    if multi:
        out["allowMultipleAllocations"] = True
    if capacity is not None:
        out["capacity"] = {CAP0: {"value": capacity}}
    elif ranged:
        out["capacity"] = {CAP0: {"value": ranged, "requestPolicy": {
            "default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}}}
    elif valid:
        out["capacity"] = {CAP0: {"value": value or valid[-1], "requestPolicy": {
            "default": valid[0], "validValues": list(valid)}}}
    return out


def share(request: str, device: str, amount: str | None) -> dict[str, Any]:
    extra: dict[str, Any] = {"shareID": SHARE}
    if amount is not None:
        extra["consumedCapacity"] = {CAP0: amount}
    return res(request, DRIVER_A, POOL1, device, **extra)


def one(*devices: dict[str, Any]) -> list[dict[str, Any]]:
    return [sl(SLICE1, NODE1, POOL1, DRIVER_A, *devices)]


def _bound(name: str, memory: str, conditions: tuple[str, str] | None, counter_set: str = "counter-set-1",
           **extra: Any) -> dict[str, Any]:
    out = dev(name, {"memory": memory}, consumesCounters=[
        {"counterSet": counter_set, "counters": {"memory": {"value": memory}}}], **extra)
    if conditions:
        out["bindingConditions"] = [conditions[0]]
        out["bindingFailureConditions"] = [conditions[1]]
    return out


def _bound_res(device: str, conditions: tuple[str, str] | None, **extra: Any) -> dict[str, Any]:
    if conditions:
        extra.update(bindingConditions=[conditions[0]], bindingFailureConditions=[conditions[1]])
    return res(REQ0, DRIVER_A, POOL1, device, **extra)


def _counter_slice(name: str, count: int, counter_set: str = "counter-set-1") -> dict[str, Any]:
    return sl(name, NODE1, POOL1, DRIVER_A, count=count, counters=[
        {"name": counter_set, "counters": {"memory": {"value": "8Gi"}}}])


PREPARE = ("IsPrepare", "BindingFailed")
TAINT_KEY1 = {"key": "key1", "value": "value1", "effect": "NoSchedule"}
TOL_KEY1 = {"operator": "Exists", "key": "key1", "effect": "NoSchedule"}

CASES = [
    Case("node-restriction", [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         [sl(SLICE1, label_selector("planet", "earth"), POOL1, DRIVER_A,
             dev(DEV1, bindsToNode=True))],
         features=gates(device_binding_conditions=True, resource_claim_device_status=True),
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1))]),
    Case("partitionable-devices-with-binding-conditions", [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1, "4Gi", PREPARE), count=2),
          _counter_slice(SLICE2, 2)], features=BINDING_PD,
         expect=[result(local(NODE1), _bound_res(DEV1, PREPARE))]),
    Case("partitionable-devices-with-binding-conditions-multiple",
         [claim(CLAIM0, req(REQ0, CLASS_A, 2))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1, "4Gi", PREPARE),
             _bound(DEV2, "4Gi", ("IsPrepare2", "BindingFailed2")), count=2),
          _counter_slice(SLICE2, 2)], features=BINDING_PD,
         expect=[result(local(NODE1), _bound_res(DEV1, PREPARE),
                        _bound_res(DEV2, ("IsPrepare2", "BindingFailed2")))]),
    Case("partitionable-devices-with-binding-conditions-multi-slices",
         [claim(CLAIM0, req(REQ0, CLASS_A, 2))], [A],
         [sl(SLICE4, NODE1, POOL1, DRIVER_A, _bound(DEV1, "4Gi", PREPARE), count=4),
          _counter_slice(SLICE3, 4),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, _bound(DEV2, "4Gi", None, "counter-set-2"), count=4),
          _counter_slice(SLICE1, 4, "counter-set-2")], features=BINDING_PD,
         expect=[result(local(NODE1), _bound_res(DEV2, None), _bound_res(DEV1, PREPARE))]),
    Case("partitionable-devices-with-binding-conditions-and-taints",
         [claim(CLAIM0, req(REQ0, CLASS_A, 2))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1, "4Gi", PREPARE, taints=[TAINT_KEY1]),
             _bound(DEV2, "4Gi", None)), _counter_slice(SLICE2, 1)],
         features=gates(partitionable_devices=True, device_binding_conditions=True,
                        resource_claim_device_status=True, device_taints=True)),
    Case("partitionable-devices-with-binding-conditions-and-taints-tolerated",
         [claim(CLAIM0, req(REQ0, CLASS_A, 2, tolerations=[TOL_KEY1]))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1, "4Gi", PREPARE, taints=[TAINT_KEY1]),
             _bound(DEV2, "4Gi", None), count=2), _counter_slice(SLICE2, 2)],
         features=gates(partitionable_devices=True, device_binding_conditions=True,
                        resource_claim_device_status=True, device_taints=True),
         expect=[result(local(NODE1), _bound_res(DEV1, PREPARE, tolerations=[TOL_KEY1]),
                        _bound_res(DEV2, None, tolerations=[TOL_KEY1]))]),
    Case("consumable-capacity-disabled-feature", [claim(CLAIM0, ask(REQ0, "1"))], [A],
         [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
         features=gates(device_binding_conditions=True, resource_claim_device_status=True),
         error="request req-0: has capacity requests, but the DRAConsumableCapacity feature is "
               "disabled"),
    Case("consumable-capacity-disabled-feature-with-prioritized-list",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, capacity={"requests": {CAP0: "1"}}),
                              sub(SUB1, CLASS_A, capacity={"requests": {CAP0: "1"}})))], [A],
         [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
         features=gates(prioritized_list=True, device_binding_conditions=True,
                        resource_claim_device_status=True),
         error="subrequest subReq-0: has capacity requests, but the DRAConsumableCapacity feature "
               "is disabled"),
    Case("consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
         [claim(CLAIM0, ask(REQ0, "1"))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, {"capacity-1": "1"}, allowMultipleAllocations=True))],
         features=CC),
    Case("consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
         [claim(CLAIM0, ask_all(REQ0, "1"))], [MULTI],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, {"capacity-1": "1"}, allowMultipleAllocations=True))],
         features=CC),
    Case("consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
         [claim(CLAIM0, ask(REQ0)), claim(CLAIM1, ask(REQ0))], [MULTI], one(shared(DEV1)),
         features=CC, expect=[result(local(NODE1), share(REQ0, DEV1, None))] * 2),
    Case("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
         [claim(CLAIM0, ask(REQ0)), claim(CLAIM1, ask(REQ0))], [MULTI],
         one(shared(DEV1, "1"), shared(DEV2, "1")), features=CC,
         expect=[result(local(NODE1), share(REQ0, DEV1, "1")),
                 result(local(NODE1), share(REQ0, DEV2, "1"))]),
    Case("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
         [claim(CLAIM0, ask(REQ0)), claim(CLAIM1, ask(REQ0))], [MULTI], one(shared(DEV1, "2")),
         features=CC),
    Case("consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
         [claim(CLAIM0, ask(REQ0, "1")), claim(CLAIM1, ask(REQ0, "1"))], [MULTI],
         one(shared(DEV1, "2")), features=CC,
         expect=[result(local(NODE1), share(REQ0, DEV1, "1"))] * 2),
    Case("consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
         [claim(CLAIM0, ask(REQ0)), claim(CLAIM1, ask(REQ0))], [MULTI],
         one(shared(DEV1, ranged="4")), features=CC,
         expect=[result(local(NODE1), share(REQ0, DEV1, "2"))] * 2),
    Case("consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
         [claim(CLAIM0, ask(REQ0, "2"))], [MULTI], one(shared(DEV1, valid=("1", "3"))),
         features=CC, expect=[result(local(NODE1), share(REQ0, DEV1, "3"))]),
    Case("consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
         [claim(CLAIM0, ask(REQ0, "1")), claim(CLAIM1, ask(REQ0, "2"))], [MULTI],
         one(shared(DEV1, ranged="2")), features=CC),
    Case("consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
         [claim(CLAIM0, ask(REQ0, "6"))], [MULTI], one(shared(DEV1, ranged="10")), features=CC),
    Case("consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
         [claim(CLAIM0, ask(REQ0, "2"))], [MULTI], one(shared(DEV1, ranged="4")), features=CC,
         allocated_capacity={in_use(DRIVER_A, POOL1, DEV1): {CAP0: "2"}},
         expect=[result(local(NODE1), share(REQ0, DEV1, "2"))]),
    Case("consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
         [claim(CLAIM0, ask(REQ0, "2"))], [MULTI],
         one(shared(DEV1, ranged="2"), shared(DEV2, ranged="2")), features=CC,
         allocated_capacity={in_use(DRIVER_A, POOL1, DEV1): {CAP0: "2"}},
         expect=[result(local(NODE1), share(REQ0, DEV2, "2"))]),
    Case("consumable-capacity-with-multi-allocatable-device-backtrack",
         [claim(CLAIM0, ask(REQ0, "2"), ask(REQ1, "2"),
                constraints=[match(f"{DRIVER_A}/stringAttribute")]),
          claim(CLAIM1, ask(REQ0, "2"))], [A],
         one(shared(DEV2, ranged="2",
                    attributes={"stringAttribute": {"string": "stringAttributeValue1"}}),
             shared(DEV1, ranged="4",
                    attributes={"stringAttribute": {"string": "stringAttributeValue2"}})),
         features=CC,
         expect=[result(local(NODE1), share(REQ0, DEV1, "2"), share(REQ1, DEV1, "2")),
                 result(local(NODE1), share(REQ0, DEV2, "2"))]),
    Case("consumable-capacity-multi-allocatable-device-with-subrequest",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, capacity={"requests": {CAP0: "4"}}),
                              sub(SUB1, CLASS_A, capacity={"requests": {CAP0: "2"}})))],
         [MULTI], one(shared(DEV1, ranged="2")), features=gates(consumable_capacity=True,
                                                                 prioritized_list=True),
         expect=[result(local(NODE1), share(f"{REQ0}/{SUB1}", DEV1, "2"))]),
    Case("consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
         [claim(CLAIM0, ask(REQ0, "2"))], [MULTI], one(shared(DEV1, ranged="2")), features=CC,
         allocated_capacity={in_use(DRIVER_A, POOL1, DEV1): {CAP0: "2"}}),
    Case("consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
         [claim(CLAIM0, ask_all(REQ0, "2"))], [MULTI], one(shared(DEV1, "2"), shared(DEV2)),
         features=CC, expect=[result(local(NODE1), share(REQ0, DEV1, "2"))]),
    Case("consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
         [claim(CLAIM0, ask_all(REQ0, "2"))], [MULTI], one(shared(DEV1, "2"), shared(DEV2, "1")),
         features=CC, expect=[result(local(NODE1), share(REQ0, DEV1, "2"))]),
    Case("consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
         [claim(CLAIM0, ask(REQ0, "1"), ask_all(REQ1, "1"))], [A],
         one(shared(DEV1, "2"), shared(DEV2, "1")), features=CC,
         expect=[result(local(NODE1), share(REQ0, DEV1, "1"), share(REQ1, DEV1, "1"),
                        share(REQ1, DEV2, "1"))]),
    Case("consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
         [claim(CLAIM0, ask_all(REQ0, "1"))], [A], one(shared(DEV1, "2"), shared(DEV2, "1")),
         features=CC, allocated_capacity={in_use(DRIVER_A, POOL1, DEV1): {CAP0: "1"}},
         expect=[result(local(NODE1), share(REQ0, DEV1, "1"), share(REQ0, DEV2, "1"))]),
    Case("consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
         [claim(CLAIM0, ask(REQ0, "1"), ask_all(REQ1, "1"))], [A],
         one(shared(DEV1, "1"), shared(DEV2, "1")), features=CC),
    Case("consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
         [claim(CLAIM0, ask_all(REQ0, "1"))], [A], one(shared(DEV1, "1"), shared(DEV2, "1")),
         features=CC, allocated_capacity={in_use(DRIVER_A, POOL1, DEV1): {CAP0: "1"}},
         expect=[result(local(NODE1), share(REQ0, DEV2, "1"))]),
    Case("consumable-capacity-dedicated-device-with-consumable-capacity-request",
         [claim(CLAIM0, ask(REQ0, "1"))], [SINGLE], one(shared(DEV1, "1", multi=False)),
         features=CC, expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1))]),
    Case("consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",
         [claim(CLAIM0, ask(REQ0, "1")), claim(CLAIM1, ask(REQ0, "1"))], [SINGLE],
         one(shared(DEV1, ranged="2", multi=False)), features=CC),
    Case("consumable-capacity-multi-allocatable-device-with-zero-request-policy",
         [claim(CLAIM0, ask(REQ0)), claim(CLAIM1, ask(REQ0))], [MULTI],
         one(shared(DEV1, valid=("0",), value="1")), features=CC,
         expect=[result(local(NODE1), share(REQ0, DEV1, "0"))] * 2),
    Case("consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
         [claim(CLAIM0, ask(REQ0, "1"))], [MULTI], one(shared(DEV1, valid=("0",), value="1")),
         features=CC),
    Case("consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
         [claim(CLAIM0, ask(REQ0, "1")), claim(CLAIM1, ask(REQ0, "1"))], [MULTI],
         one(shared(DEV1, ranged="4")), features=CC,
         expect=[result(local(NODE1), share(REQ0, DEV1, "2"))] * 2),
    Case("consumable-capacity-multi-allocatable-device-with-range-policy-step",
         [claim(CLAIM0, ask(REQ0, "3"))], [MULTI], one(shared(DEV1, ranged="4")), features=CC,
         expect=[result(local(NODE1), share(REQ0, DEV1, "4"))]),
    Case("consumable-capacity-multi-allocatable-device-with-valid-values-policy",
         [claim(CLAIM0, ask(REQ0, "2"))], [MULTI], one(shared(DEV1, valid=("1", "2"), value="4")),
         features=CC, expect=[result(local(NODE1), share(REQ0, DEV1, "2"))]),
    Case("partitionable-devices-with-binding-conditions-some-devices-no-conditions",
         [claim(CLAIM0, req(REQ0, CLASS_A, 3))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1, "2Gi", PREPARE), _bound(DEV2, "2Gi", None),
             _bound(DEV3, "4Gi", ("IsReady", "BindingTimeout")), count=2),
          _counter_slice(SLICE2, 2)], features=BINDING_PD,
         expect=[result(local(NODE1), _bound_res(DEV1, PREPARE), _bound_res(DEV2, None),
                        _bound_res(DEV3, ("IsReady", "BindingTimeout")))]),
]
