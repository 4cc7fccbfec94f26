"""Ported table cases, part 10: shared devices that consume counters, and per-device node
selection across drivers (TestAllocator in k8s.io/dynamic-resource-allocation
structured/internal/allocatortesting/allocator_testing.go, the cases of the same names)."""

from __future__ import annotations

from typing import Any

from tests.devices.dra.builders import (
    CLAIM0,
    CLASS_A,
    CLASS_B,
    DEV1,
    DEV2,
    DEV3,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    PER_DEVICE,
    POOL1,
    POOL2,
    REGION1,
    REQ0,
    REQ1,
    REQ2,
    SLICE1,
    SLICE2,
    SLICE3,
    SLICE4,
    SUB0,
    SUB1,
    Case,
    claim,
    cls,
    first,
    gates,
    in_use,
    label_selector,
    local,
    req,
    res,
    result,
    sl,
    sub,
)
from tests.devices.dra.cases_capacity import MULTI, SHARE, ask
from tests.devices.dra.cases_partitionable import counters, part

CS1, CS2 = "counter-set-1", "counter-set-2"
ALL_GATES = gates(prioritized_list=True, partitionable_devices=True, consumable_capacity=True)
RANGE = {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}


def _mem(size: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{size}")) >= 0'


def _cap0(at_least: str) -> str:
    return f'device.capacity["{DRIVER_A}"]["capacity-0"].compareTo(quantity("{at_least}")) >= 0'


def _res(request: str, device: str, consumed: dict[str, str], driver: str = DRIVER_A) -> dict[str, Any]:
    return res(request, driver, POOL1, device, shareID=SHARE, consumedCapacity=consumed)


def _two_capacity_device(name: str, cap0: str) -> dict[str, Any]:
    out = part(name, {CS1: {"capacity-0": cap0}, CS2: {"capacity-1": "4"}},
               allowMultipleAllocations=True)
    out["capacity"]["capacity-1"]["requestPolicy"] = RANGE
    return out


def _per_device(name: str, **where: Any) -> dict[str, Any]:
    return part(name, {CS1: {"memory": "4Gi"}}, **where)


CASES = [
    Case("allow-multiple-allocations-with-partitionable-device",
         [claim(CLAIM0, req(REQ0, CLASS_A), first(REQ1, sub(SUB0, CLASS_A, 1, _mem("6Gi")),
                                                   sub(SUB1, CLASS_A, 1, _mem("4Gi"))))], [MULTI],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, *(
             part(name, {CS1: {"memory": m}}, allowMultipleAllocations=True)
             for name, m in ((DEV1, "4Gi"), (DEV2, "6Gi"), (DEV3, "4Gi"))), count=2),
          counters(SLICE2, NODE1, POOL1, 2, {CS1: {"memory": "8Gi"}})], features=ALL_GATES,
         expect=[result(local(NODE1), _res(REQ0, DEV1, {"memory": "4Gi"}),
                        _res(f"{REQ1}/{SUB1}", DEV3, {"memory": "4Gi"}))]),
    Case("allow-multiple-allocations-with-shared-device-counter-cross-cycle",
         [claim(CLAIM0, ask(REQ0, "1", selectors=[
             {"cel": {"expression": f'device.attributes["{DRIVER_A}"].mode == "b"'}}]))], [MULTI],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, *(
             part(name, {CS1: {"capacity-0": "1"}}, allowMultipleAllocations=True,
                  attributes={"mode": {"string": mode}}) for name, mode in ((DEV1, "a"), (DEV2, "b"))),
             count=2),
          counters(SLICE2, NODE1, POOL1, 2, {CS1: {"capacity-0": "1"}})],
         features=gates(partitionable_devices=True, consumable_capacity=True),
         allocated_capacity={in_use(DRIVER_A, POOL1, DEV1): {"capacity-0": "1"}}),
    Case("consumable-capacity-with-partitionable-device-multiple-capacity-pools",
         [claim(CLAIM0, ask(REQ0, "1"), ask(REQ2, "2"),
                first(REQ1, sub(SUB0, CLASS_A, 1, _cap0("4"), capacity={"requests": {"capacity-0": "1"}}),
                      sub(SUB1, CLASS_A, 1, _cap0("2"), capacity={"requests": {"capacity-0": "1"}})))],
         [cls(CLASS_A, DRIVER_A)],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _two_capacity_device(DEV1, "2"),
             _two_capacity_device(DEV2, "4"), _two_capacity_device(DEV3, "2"), count=2),
          counters(SLICE2, NODE1, POOL1, 2, {CS1: {"capacity-0": "4"}, CS2: {"capacity-1": "8"}})],
         features=ALL_GATES,
         expect=[result(local(NODE1), _res(REQ0, DEV1, {"capacity-0": "1", "capacity-1": "2"}),
                        _res(REQ2, DEV3, {"capacity-0": "2", "capacity-1": "2"}),
                        _res(f"{REQ1}/{SUB1}", DEV1, {"capacity-0": "1", "capacity-1": "2"}))]),
    Case("partitionable-devices-per-device-node-selection-node-selector-multiple-devices",
         [claim(CLAIM0, req(REQ0, CLASS_A, 3), req(REQ1, CLASS_B, 3))],
         [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
         [sl(SLICE1, PER_DEVICE, POOL1, DRIVER_A,
             _per_device(DEV1, nodeSelector=label_selector("region", REGION1)),
             _per_device(DEV2, nodeName=NODE1), _per_device(DEV3, allNodes=True), count=2),
          counters(SLICE2, PER_DEVICE, POOL1, 2, {CS1: {"memory": "18Gi"}}),
          sl(SLICE3, NODE1, POOL2, DRIVER_B, *(part(d, {CS2: {"memory": "4Gi"}})
                                               for d in (DEV1, DEV2, DEV3)), count=2),
          {**counters(SLICE4, NODE1, POOL2, 2, {CS2: {"memory": "12Gi"}}),
           "spec": {**counters(SLICE4, NODE1, POOL2, 2, {CS2: {"memory": "12Gi"}})["spec"],
                    "driver": DRIVER_B}}],
         features=gates(partitionable_devices=True, prioritized_list=True),
         expect=[result(local(NODE1), *(res(REQ0, DRIVER_A, POOL1, d) for d in (DEV1, DEV2, DEV3)),
                        *(res(REQ1, DRIVER_B, POOL2, d) for d in (DEV1, DEV2, DEV3)))]),
]
