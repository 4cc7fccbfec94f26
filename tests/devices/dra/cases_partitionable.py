"""Ported table cases, part 4: partitionable devices (sharedCounters / consumesCounters) and
per-device node selection (TestAllocator in k8s.io/dynamic-resource-allocation
structured/internal/allocatortesting/allocator_testing.go, the cases of the same names)."""

from __future__ import annotations

from typing import Any

from tests.devices.dra.builders import (
    CLAIM0,
    CLASS_A,
    DEV1,
    DEV2,
    DEV3,
    DRIVER_A,
    NODE1,
    NODE2,
    PER_DEVICE,
    POOL1,
    POOL2,
    REGION1,
    REQ0,
    REQ1,
    SLICE1,
    SLICE2,
    SLICE3,
    SLICE4,
    SUB0,
    SUB1,
    Case,
    claim,
    cls,
    dev,
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

A = cls(CLASS_A, DRIVER_A)
PD = gates(partitionable_devices=True)
PD_PL = gates(partitionable_devices=True, prioritized_list=True)
CS1, CS2 = "counter-set-1", "counter-set-2"


def part(name: str, uses: dict[str, dict[str, str]], *, from_counters: bool = True,
         **extra: Any) -> dict[str, Any]:
    """A device consuming counters; with ``from_counters`` its capacity is what it consumes."""
    capacity = {k: v for counters in uses.values() for k, v in counters.items()}
    return dev(name, capacity if from_counters else None, consumesCounters=[
        {"counterSet": s, "counters": {k: {"value": v} for k, v in c.items()}}
        for s, c in uses.items()], **extra)


def counters(name: str, node: Any, pool: str, count: int, sets: dict[str, dict[str, str]]
             ) -> dict[str, Any]:
    return sl(name, node, pool, DRIVER_A, count=count, counters=[
        {"name": s, "counters": {k: {"value": v} for k, v in c.items()}} for s, c in sets.items()])


def _mem(size: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{size}")) >= 0'


_THREE = sl(SLICE1, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "4Gi"}}),
            part(DEV2, {CS1: {"memory": "6Gi"}}), part(DEV3, {CS1: {"memory": "4Gi"}}), count=2)
_EIGHT = counters(SLICE2, NODE1, POOL1, 2, {CS1: {"memory": "8Gi"}})
_PL_CLAIM = claim(CLAIM0, req(REQ0, CLASS_A), first(REQ1, sub(SUB0, CLASS_A, 1, _mem("6Gi")),
                                                     sub(SUB1, CLASS_A, 1, _mem("4Gi"))))
_R0_D1 = res(REQ0, DRIVER_A, POOL1, DEV1)


def _pool(slice_name: str, pool: str, spec: list[tuple[str, str, str]]) -> dict[str, Any]:
    return sl(slice_name, NODE1, pool, DRIVER_A, *(
        part(name, {CS1: {"cpus": cpus, "memory": memory}}) for name, cpus, memory in spec), count=2)


CASES = [
    Case("partitionable-devices-single-device", [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "4Gi"}},
                                                   from_counters=False), count=2), _EIGHT],
         features=PD, expect=[result(local(NODE1), _R0_D1)]),
    Case("partitionable-devices-prioritized-list", [_PL_CLAIM], [A], [_THREE, _EIGHT],
         features=PD_PL,
         expect=[result(local(NODE1), _R0_D1, res(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV3))]),
    Case("partitionable-devices-multiple-devices",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A))], [A], [_THREE, _EIGHT],
         features=PD, expect=[result(local(NODE1), _R0_D1, res(REQ1, DRIVER_A, POOL1, DEV3))]),
    Case("partitionable-devices-multiple-capacity-pools", [_PL_CLAIM], [A], [
        sl(SLICE1, NODE1, POOL1, DRIVER_A, *(
            part(name, {CS1: {"memory": memory}, CS2: {"cpus": cpus}})
            for name, memory, cpus in ((DEV1, "4Gi", "4"), (DEV2, "6Gi", "6"), (DEV3, "4Gi", "4"))),
           count=2),
        counters(SLICE2, NODE1, POOL1, 2, {CS1: {"memory": "18Gi"}, CS2: {"cpus": "8"}})],
         features=PD_PL,
         expect=[result(local(NODE1), _R0_D1, res(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV3))]),
    Case("partitionable-devices-multiple-counters",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A))], [A], [
             sl(SLICE1, NODE1, POOL1, DRIVER_A, *(
                 part(name, {CS1: {"memory": m1, "cpus": c1}, CS2: {"cpus": c2, "memory": m2}},
                      from_counters=False)
                 for name, m1, c1, c2, m2 in ((DEV1, "4Gi", "6", "4", "2Gi"),
                                              (DEV2, "6Gi", "4", "6", "6Gi"),
                                              (DEV3, "4Gi", "4", "4", "4Gi"))), count=2),
             counters(SLICE2, NODE1, POOL1, 2, {CS1: {"cpus": "8", "memory": "18Gi"},
                                                CS2: {"cpus": "12", "memory": "18Gi"}})],
         features=PD, expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV2),
                                     res(REQ1, DRIVER_A, POOL1, DEV3))]),
    Case("partitionable-devices-multiple-pools",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A))], [A], [
             _pool(SLICE1, POOL1, [(DEV1, "6", "4Gi"), (DEV2, "4", "6Gi"), (DEV3, "4", "4Gi")]),
             counters(SLICE2, NODE1, POOL1, 2, {CS1: {"cpus": "8", "memory": "18Gi"}}),
             _pool(SLICE3, POOL2, [(DEV1, "6", "4Gi"), (DEV2, "1", "7Gi"), (DEV3, "1", "7Gi")]),
             counters(SLICE4, NODE1, POOL2, 2, {CS1: {"cpus": "8", "memory": "18Gi"}})],
         features=PD, allocated=[in_use(DRIVER_A, POOL1, DEV2), in_use(DRIVER_A, POOL1, DEV3),
                                 in_use(DRIVER_A, POOL2, DEV1)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL2, DEV2),
                        res(REQ1, DRIVER_A, POOL2, DEV3))]),
    Case("partitionable-devices-unused-counters-in-counter-set",
         [claim(CLAIM0, req(REQ0, CLASS_A, 2))], [A], [
             sl(SLICE1, NODE1, POOL1, DRIVER_A, *(
                 part(name, {CS1: {"memory": m}}, from_counters=False)
                 for name, m in ((DEV1, "5Gi"), (DEV2, "4Gi"), (DEV3, "4Gi"))), count=2),
             counters(SLICE2, NODE1, POOL1, 2, {CS1: {"memory": "8Gi", "unused": "1Gi"}})],
         features=PD, expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV2),
                                     res(REQ0, DRIVER_A, POOL1, DEV3))]),
    Case("partitionable-devices-no-capacity-available", [claim(CLAIM0, req(REQ0, CLASS_A))], [A], [
        sl(SLICE1, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "4Gi"}}),
           part(DEV2, {CS1: {"memory": "16Gi"}})),
        counters(SLICE2, NODE1, POOL1, 1, {CS1: {"memory": "18Gi"}})],
         features=PD, allocated=[in_use(DRIVER_A, POOL1, DEV2)]),
    Case("partitionable-devices-overallocated-capacity-pool", [claim(CLAIM0, req(REQ0, CLASS_A))],
         [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "4Gi"}}),
                  part(DEV2, {CS1: {"memory": "20Gi"}})),
               counters(SLICE2, NODE1, POOL1, 1, {CS1: {"memory": "18Gi"}})],
         features=PD, allocated=[in_use(DRIVER_A, POOL1, DEV2)]),
    Case("partitionable-devices-disabled-device-consumes-counters",
         [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "4Gi"}},
                                                   from_counters=False)),
          counters(SLICE2, NODE1, POOL1, 1, {CS1: {"memory": "18Gi"}})]),
    Case("partitionable-devices-disabled-other-device-do-not-consume-counters",
         [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "4Gi"}},
                                                   from_counters=False), dev(DEV2), count=2),
          counters(SLICE2, NODE1, POOL1, 2, {CS1: {"memory": "18Gi"}})],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV2))]),
    Case("partitionable-devices-disabled-per-device-node-selection",
         [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         [sl(SLICE1, PER_DEVICE, POOL1, DRIVER_A, dev(DEV2, nodeName=NODE1))]),
    Case("partitionable-devices-per-device-node-selection-nodename",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, 1, _mem("6Gi")),
                              sub(SUB1, CLASS_A, 1, _mem("4Gi"))))], [A],
         [sl(SLICE1, PER_DEVICE, POOL1, DRIVER_A,
             part(DEV1, {CS1: {"memory": "4Gi"}}, nodeName=NODE1),
             part(DEV2, {CS1: {"memory": "6Gi"}}, nodeName=NODE2), count=2),
          counters(SLICE2, PER_DEVICE, POOL1, 2, {CS1: {"memory": "18Gi"}})],
         features=PD_PL,
         expect=[result(local(NODE1), res(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV1))]),
    Case("partitionable-devices-per-device-node-selection-node-selector",
         [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         [sl(SLICE1, PER_DEVICE, POOL1, DRIVER_A, part(
             DEV1, {CS1: {"memory": "4Gi"}}, nodeSelector=label_selector("region", REGION1)),
             count=2),
          counters(SLICE2, PER_DEVICE, POOL1, 2, {CS1: {"memory": "18Gi"}})],
         features=PD_PL, expect=[result(label_selector("region", REGION1), _R0_D1)]),
]
