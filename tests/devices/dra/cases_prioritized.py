"""Ported table cases, part 3: prioritized lists (firstAvailable)
(TestAllocator in k8s.io/dynamic-resource-allocation
structured/internal/allocatortesting/allocator_testing.go, the cases of the same names)."""

from __future__ import annotations

from typing import Any

from tests.devices.dra.builders import (
    CLAIM0,
    CLASS_A,
    CLASS_B,
    DEV0,
    DEV1,
    DEV2,
    DEV3,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    POOL1,
    POOL2,
    REQ0,
    REQ1,
    SLICE1,
    SLICE2,
    SUB0,
    SUB1,
    Case,
    claim,
    cls,
    dev,
    first,
    gates,
    in_use,
    local,
    many,
    match,
    one_device,
    opaque,
    req,
    res,
    result,
    sl,
    sub,
)

A = cls(CLASS_A, DRIVER_A)
B = cls(CLASS_B, DRIVER_B)
PL = gates(prioritized_list=True)
ONE = one_device(SLICE1, NODE1, POOL1, DRIVER_A)
R0S0, R0S1, R1S1 = f"{REQ0}/{SUB0}", f"{REQ0}/{SUB1}", f"{REQ1}/{SUB1}"
VERSION = f"{DRIVER_A}/driverVersion"


def _mem(size: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{size}")) >= 0'


def _dev(name: str, memory: str, version: str = "") -> dict[str, Any]:
    attributes = {"driverVersion": {"version": version}} if version else None
    return dev(name, {"memory": memory}, attributes)


_EIGHT_FOUR = [sl(SLICE1, NODE1, POOL1, DRIVER_A, _dev(DEV1, "8Gi")),
               sl(SLICE2, NODE1, POOL2, DRIVER_A, _dev(DEV2, "4Gi"))]
_SUB_CONSTRAINT_SLICES = [sl(SLICE1, NODE1, POOL1, DRIVER_A, _dev(DEV1, "8Gi", "1.0.0"))]


def _constrained(*requests: str) -> dict[str, Any]:
    return claim(CLAIM0, req(REQ0, CLASS_A, 1, _mem("8Gi")),
                 first(REQ1, sub(SUB0, CLASS_A, 1, _mem("2Gi")), sub(SUB1, CLASS_A, 1, _mem("1Gi"))),
                 constraints=[match(VERSION, *requests)])


CASES = [
    Case("prioritized-list-first-unavailable",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_B), sub(SUB1, CLASS_A)))], [A, B], [ONE],
         features=PL, expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV1))]),
    Case("prioritized-list-non-available",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_B, 2), sub(SUB1, CLASS_A, 2)))], [A, B],
         [ONE, one_device(SLICE2, NODE1, POOL2, DRIVER_B)], features=PL),
    Case("prioritized-list-device-config",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A), sub(SUB1, CLASS_B, 2)), config=[
             {"requests": [R0S0], "opaque": opaque(DRIVER_A, "foo")},
             {"requests": [R0S1], "opaque": opaque(DRIVER_B, "bar")}])],
         [A, B], [sl(SLICE1, NODE1, POOL1, DRIVER_B, dev(DEV1), dev(DEV2))], features=PL,
         expect=[result(local(NODE1), res(R0S1, DRIVER_B, POOL1, DEV1),
                        res(R0S1, DRIVER_B, POOL1, DEV2),
                        config=[{"source": "FromClaim", "opaque": opaque(DRIVER_B, "bar")}])]),
    Case("prioritized-list-class-config",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, 2), sub(SUB1, CLASS_B, 2)))],
         [cls(CLASS_A, DRIVER_A, config="foo"), cls(CLASS_B, DRIVER_B, config="bar")],
         [sl(SLICE1, NODE1, POOL1, DRIVER_B, dev(DEV1), dev(DEV2)),
          sl(SLICE2, NODE1, POOL2, DRIVER_A, dev(DEV3))], features=PL,
         expect=[result(local(NODE1), res(R0S1, DRIVER_B, POOL1, DEV1),
                        res(R0S1, DRIVER_B, POOL1, DEV2),
                        config=[{"source": "FromClass", "opaque": opaque(DRIVER_B, "bar")}])]),
    Case("claim-config-scoped-to-subrequests-of-one-request",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A), sub(SUB1, CLASS_B)), req(REQ1, CLASS_A),
                config=[{"requests": [R0S0, R0S1], "opaque": opaque(DRIVER_A, "scoped")}])],
         [A, B], [many(SLICE1, NODE1, POOL1, DRIVER_A, 2)], features=PL,
         expect=[result(local(NODE1), res(R0S0, DRIVER_A, POOL1, DEV0),
                        res(REQ1, DRIVER_A, POOL1, DEV1),
                        config=[{"source": "FromClaim", "requests": [R0S0, R0S1],
                                 "opaque": opaque(DRIVER_A, "scoped")}])]),
    Case("claim-config-covering-all-requests-is-cleared",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A), sub(SUB1, CLASS_B)), req(REQ1, CLASS_A),
                config=[{"requests": [R0S0, REQ1], "opaque": opaque(DRIVER_A, "all")}])],
         [A, B], [many(SLICE1, NODE1, POOL1, DRIVER_A, 2)], features=PL,
         expect=[result(local(NODE1), res(R0S0, DRIVER_A, POOL1, DEV0),
                        res(REQ1, DRIVER_A, POOL1, DEV1),
                        config=[{"source": "FromClaim", "opaque": opaque(DRIVER_A, "all")}])]),
    Case("prioritized-list-subrequests-with-expressions",
         [claim(CLAIM0, req(REQ0, CLASS_A, 1, _mem("1Gi")),
                first(REQ1, sub(SUB0, CLASS_A, 1, _mem("4Gi")), sub(SUB1, CLASS_A, 2, _mem("2Gi"))))],
         [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, _dev(DEV1, "2Gi"), _dev(DEV2, "2Gi"),
                  _dev(DEV3, "1Gi"))], features=PL,
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV3),
                        res(R1S1, DRIVER_A, POOL1, DEV1), res(R1S1, DRIVER_A, POOL1, DEV2))]),
    Case("prioritized-list-subrequests-with-constraints-ref-parent-request",
         [_constrained(REQ0, REQ1)], [A],
         [*_SUB_CONSTRAINT_SLICES, sl(SLICE2, NODE1, POOL2, DRIVER_A, _dev(DEV2, "2Gi", "2.0.0"),
                                      _dev(DEV3, "1Gi", "1.0.0"))], features=PL,
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1),
                        res(R1S1, DRIVER_A, POOL2, DEV3))]),
    Case("prioritized-list-subrequests-with-constraints-ref-sub-request",
         [_constrained(REQ0, f"{REQ1}/{SUB0}")], [A],
         [*_SUB_CONSTRAINT_SLICES, sl(SLICE2, NODE1, POOL2, DRIVER_A, _dev(DEV2, "2Gi", "2.0.0"))],
         features=PL, expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1),
                                     res(R1S1, DRIVER_A, POOL2, DEV2))]),
    Case("prioritized-list-subrequests-with-allocation-mode-all",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, allocationMode="All", count=0),
                              sub(SUB1, CLASS_A)))],
         [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), dev(DEV2))], features=PL,
         allocated=[in_use(DRIVER_A, POOL1, DEV1)],
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV2))]),
    Case("prioritized-list-allocation-mode-all-multiple-requests",
         [claim(CLAIM0, req(REQ0, CLASS_A),
                first(REQ1, sub(SUB0, CLASS_A, allocationMode="All", count=0), sub(SUB1, CLASS_A)))],
         [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), dev(DEV2))], features=PL,
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1),
                        res(R1S1, DRIVER_A, POOL1, DEV2))]),
    Case("prioritized-list-disabled", [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A)))], [A], [ONE],
         error="request req-0: has subrequests, but the DRAPrioritizedList feature is disabled"),
    Case("prioritized-list-multi-request",
         [claim(CLAIM0, req(REQ1, CLASS_A, 1, _mem("8Gi")),
                first(REQ0, sub(SUB0, CLASS_A, 1, _mem("8Gi")), sub(SUB1, CLASS_A, 1, _mem("4Gi"))))],
         [A], _EIGHT_FOUR, features=PL,
         expect=[result(local(NODE1), res(REQ1, DRIVER_A, POOL1, DEV1),
                        res(R0S1, DRIVER_A, POOL2, DEV2))]),
    Case("prioritized-list-with-backtracking",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, 1, _mem("8Gi")),
                              sub(SUB1, CLASS_A, 1, _mem("4Gi"))),
                req(REQ1, CLASS_A, 1, _mem("8Gi")))],
         [A], _EIGHT_FOUR, features=PL,
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL2, DEV2),
                        res(REQ1, DRIVER_A, POOL1, DEV1))]),
    Case("prioritized-list-too-many-in-first-subrequest",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_B, 500), sub(SUB1, CLASS_A)))], [A, B], [ONE],
         features=PL, expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV1))]),
]
