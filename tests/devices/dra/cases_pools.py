"""Ported table cases, part 8: pools spanning nodes, pool generations and pool validation
(TestAllocator in k8s.io/dynamic-resource-allocation
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
    POOL1,
    POOL2,
    REQ0,
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
    local,
    req,
    res,
    result,
    sl,
    sub,
)
from tests.devices.dra.cases_partitionable import counters, part

A = cls(CLASS_A, DRIVER_A)
C0 = claim(CLAIM0, req(REQ0, CLASS_A))
PD = gates(partitionable_devices=True)
INVALID = "invalid resource pools were encountered"
CS1, CS2 = "counter-set-1", "counter-set-2"


def _gen(name: str, node: str, device: str, generation: int) -> dict[str, Any]:
    return sl(name, node, POOL1, DRIVER_A, dev(device), count=2, generation=generation)


def _mem(size: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{size}")) >= 0'


def _empty_set(name: str, count: int, counter_set: str = CS1) -> dict[str, Any]:
    return sl(name, NODE1, POOL1, DRIVER_A, count=count, counters=[{"name": counter_set}])


CASES = [
    Case("allocation-mode-all-with-multi-host-resource-pool", [claim(CLAIM0, all_req(REQ0, CLASS_A))],
         [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), count=2),
               sl(SLICE2, NODE2, POOL1, DRIVER_A, dev(DEV2), count=2)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1))]),
    Case("multi-host-resource-pool-with-stale-slice-for-current-node", [C0], [A],
         [_gen(SLICE1, NODE1, DEV1, 1), _gen(SLICE2, NODE2, DEV2, 2)]),
    Case("multi-host-resource-pool-complete-update-from-node-1-to-node-2", [C0], [A],
         [_gen(SLICE1, NODE1, DEV1, 1), _gen(SLICE1, NODE1, DEV2, 1),
          _gen(SLICE2, NODE2, DEV1, 2), _gen(SLICE2, NODE2, DEV2, 2)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1))]),
    Case("multi-host-resource-pool-complete-update-from-node-2-to-node-1", [C0], [A],
         [_gen(SLICE1, NODE2, DEV1, 1), _gen(SLICE1, NODE2, DEV2, 1),
          _gen(SLICE2, NODE1, DEV1, 2), _gen(SLICE2, NODE1, DEV2, 2)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1))]),
    Case("multi-host-resource-pool-incomplete-update-from-node-1-to-node-2", [C0], [A],
         [_gen(SLICE1, NODE1, DEV1, 1), _gen(SLICE1, NODE1, DEV2, 1), _gen(SLICE2, NODE2, DEV1, 2)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1))]),
    Case("multi-host-resource-pool-incomplete-update-from-node-2-to-node-1", [C0], [A],
         [_gen(SLICE1, NODE2, DEV1, 1), _gen(SLICE1, NODE2, DEV2, 1), _gen(SLICE2, NODE1, DEV1, 2)]),
    Case("partitionable-devices-same-counter-set-name-in-different-resource-slices", [C0], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), count=4), _empty_set(SLICE2, 4),
          sl(SLICE3, NODE1, POOL1, DRIVER_A, dev(DEV2), count=4), _empty_set(SLICE4, 4)],
         features=PD, error=INVALID),
    Case("partitionable-devices-device-counter-consumption-references-unknown-counter-set", [C0],
         [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, consumesCounters=[{"counterSet": CS2}]),
                  count=2), _empty_set(SLICE2, 2)], features=PD, error=INVALID),
    Case("partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
         [C0], [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "8Gi"}},
                                                             from_counters=False), count=2),
                     counters(SLICE2, NODE1, POOL1, 2, {CS1: {"other-memory": "8Gi"}})],
         features=PD, error=INVALID),
    Case("partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
         [C0], [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "8Gi"}},
                                                             from_counters=False)),
                     counters(SLICE2, NODE1, POOL2, 1, {CS1: {"memory": "8Gi"}})],
         features=PD, error=INVALID),
    Case("partitionable-devices-devices-on-different-nodes-consume-same-counter-set",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, 1, _mem("6Gi")),
                              sub(SUB1, CLASS_A, 1, _mem("2Gi"))))], [A],
         [counters(SLICE1, NODE1, POOL1, 3, {CS1: {"memory": "8Gi"}}),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "6Gi"}}),
             part(DEV2, {CS1: {"memory": "2Gi"}}), count=3),
          sl(SLICE3, NODE2, POOL1, DRIVER_A, part(DEV3, {CS1: {"memory": "6Gi"}},
                                                   from_counters=False), count=3)],
         features=gates(partitionable_devices=True, prioritized_list=True),
         allocated=[in_use(DRIVER_A, POOL1, DEV3)],
         expect=[result(local(NODE1), res(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV2))]),
    Case("partitionable-devices-devices-consume-counter-set-in-different-nodes", [C0], [A],
         [counters(SLICE1, NODE1, POOL1, 3, {CS1: {"memory": "8Gi"}}),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "6Gi"}}), count=3),
          sl(SLICE3, NODE2, POOL1, DRIVER_A, part(DEV2, {CS1: {"memory": "6Gi"}}),
             part(DEV3, {CS1: {"memory": "2Gi"}}), count=3)],
         features=PD, node=NODE2, allocated=[in_use(DRIVER_A, POOL1, DEV1)],
         expect=[result(local(NODE2), res(REQ0, DRIVER_A, POOL1, DEV3))]),
    Case("partitionable-devices-validation-error-on-non-targeting-slice", [C0], [A],
         [counters(SLICE1, NODE1, POOL1, 3, {CS1: {"memory": "8Gi"}}),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, part(DEV1, {CS1: {"memory": "6Gi"}}), count=3),
          sl(SLICE3, NODE2, POOL1, DRIVER_A, part(DEV3, {CS2: {"memory": "6Gi"}},
                                                   from_counters=False), count=3)],
         features=PD, error=INVALID),
    Case("different-resourceslices-in-pool-can-target-different-nodes", [C0], [A],
         [sl(SLICE1, NODE2, POOL1, DRIVER_A, dev(DEV1), count=2),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, dev(DEV2), count=2)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV2))]),
    Case("invalid-pool-is-ok-if-devices-can-be-allocated-from-other", [C0], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), count=2),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, dev(DEV1), count=2),
          sl(SLICE3, NODE1, POOL2, DRIVER_A, dev(DEV2))],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL2, DEV2))]),
    Case("invalid-pool-is-error-if-no-other-device-can-be-allocated", [C0], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), count=2),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, dev(DEV1), count=2),
          sl(SLICE3, NODE1, POOL2, DRIVER_A, dev(DEV2))],
         allocated=[in_use(DRIVER_A, POOL2, DEV2)], error=INVALID),
    Case("no-allocation-from-incomplete-pools", [C0], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), count=2)], reason="being updated"),
]
