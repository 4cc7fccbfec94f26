"""Ported table cases, part 9: search order and combinations (TestAllocator's
``check-combinations-*`` in k8s.io/dynamic-resource-allocation
structured/internal/allocatortesting/allocator_testing.go, results only, and the cases of
lexicographical_testing.go)."""

from __future__ import annotations

from typing import Any

from tests.devices.dra.builders import (
    CLAIM0,
    CLASS_A,
    DEV1,
    DEV2,
    DEV3,
    DEV4,
    DRIVER_A,
    NODE1,
    POOL1,
    POOL2,
    POOL3,
    POOL4,
    REQ0,
    REQ1,
    REQ2,
    SLICE1,
    SLICE2,
    SLICE3,
    SUB0,
    SUB1,
    Case,
    claim,
    cls,
    dev,
    first,
    gates,
    local,
    one_device,
    req,
    res,
    result,
    sl,
    sub,
)

A = cls(CLASS_A, DRIVER_A)
FIVE = [claim(CLAIM0, req(REQ0, CLASS_A, 5))]
BINDING = gates(device_binding_conditions=True, resource_claim_device_status=True)


def _type(value: str) -> str:
    return f'device.attributes["{DRIVER_A}"].type == "{value}"'


def _typed(name: str, value: str, **extra: Any) -> dict[str, Any]:
    return dev(name, attributes={"type": {"string": value}}, **extra)


def _bound(name: str) -> dict[str, Any]:
    return dev(name, bindingConditions=["IsPrepare"], bindingFailureConditions=["BindingFailed"])


_BOUND_RES: dict[str, Any] = {"bindingConditions": ["IsPrepare"], "bindingFailureConditions": ["BindingFailed"]}
_TWO_AND_X = claim(CLAIM0, req(REQ1, CLASS_A, 2), req(REQ2, CLASS_A, 1, _type("X")))

CASES = [
    Case("check-combinations-within-single-request-single-pool-single-slice", FIVE, [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), dev(DEV2), dev(DEV3), dev(DEV4))]),
    Case("check-combinations-within-single-request-single-pool-multiple-slices", FIVE, [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), dev(DEV2), count=2),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, dev(DEV3), dev(DEV4), count=2)]),
    Case("check-combinations-within-single-request-multiple-pools-multiple-slices", FIVE, [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), count=2),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, dev(DEV2), count=2),
          sl(SLICE3, NODE1, POOL2, DRIVER_A, dev(DEV3), dev(DEV4))]),
    Case("check-combinations-within-single-request-many-pools", FIVE, [A],
         [sl(f"slice-{i + 1}", NODE1, pool, DRIVER_A, dev(f"device-{i + 1}"))
          for i, pool in enumerate((POOL1, POOL2, POOL3, POOL4))]),
    Case("check-combinations-with-backtracking", [_TWO_AND_X], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _typed(DEV1, "X"), _typed(DEV2, "Y"),
             _typed(DEV3, "Y"))],
         expect=[result(local(NODE1), res(REQ1, DRIVER_A, POOL1, DEV2),
                        res(REQ1, DRIVER_A, POOL1, DEV3), res(REQ2, DRIVER_A, POOL1, DEV1))]),
    Case("check-combinations-with-backtracking-across-slices-and-pools", [_TWO_AND_X], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _typed(DEV1, "X"), count=2),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, _typed(DEV2, "Y"), count=2),
          sl(SLICE3, NODE1, POOL2, DRIVER_A, _typed(DEV3, "Y", bindingConditions=["IsPrepare"]))],
         features=BINDING,
         expect=[result(local(NODE1), res(REQ1, DRIVER_A, POOL1, DEV2),
                        res(REQ1, DRIVER_A, POOL2, DEV3, bindingConditions=["IsPrepare"]),
                        res(REQ2, DRIVER_A, POOL1, DEV1))]),
    Case("check-combinations-with-prioritized-list",
         [claim(CLAIM0, first(REQ1, sub(SUB0, CLASS_A, 3, _type("Y")), sub(SUB1, CLASS_A, 2)),
                first(REQ2, sub(SUB0, CLASS_A, 2), sub(SUB1, CLASS_A, 1, _type("X"))))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _typed(DEV1, "X"), _typed(DEV2, "Y"),
             _typed(DEV3, "Y"))], features=gates(prioritized_list=True),
         expect=[result(local(NODE1), res(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV2),
                        res(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV3),
                        res(f"{REQ2}/{SUB1}", DRIVER_A, POOL1, DEV1))]),
    Case("lexicographical-sorting-pools", [claim(CLAIM0, req(REQ0, CLASS_A, 2))], [A],
         [one_device(SLICE1, NODE1, POOL3, DRIVER_A), one_device(SLICE2, NODE1, POOL2, DRIVER_A),
          one_device(SLICE3, NODE1, POOL1, DRIVER_A)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1),
                        res(REQ0, DRIVER_A, POOL2, DEV1))]),
    Case("lexicographical-sorting-pools-with-binding-conditions",
         [claim(CLAIM0, req(REQ0, CLASS_A, 2))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1)),
          sl(SLICE3, NODE1, POOL3, DRIVER_A, dev(DEV3)),
          sl(SLICE2, NODE1, POOL2, DRIVER_A, dev(DEV2))], features=BINDING,
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL2, DEV2),
                        res(REQ0, DRIVER_A, POOL3, DEV3))]),
    Case("lexicographical-sorting-slices", [claim(CLAIM0, req(REQ0, CLASS_A, 2))], [A],
         [sl(f"slice-{i}", NODE1, POOL1, DRIVER_A, dev(f"device-{i}"), count=3) for i in (3, 2, 1)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1),
                        res(REQ0, DRIVER_A, POOL1, DEV2))]),
    Case("lexicographical-sorting-slices-with-binding-conditions",
         [claim(CLAIM0, req(REQ0, CLASS_A, 2))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1), count=3),
          sl(SLICE3, NODE1, POOL1, DRIVER_A, dev(DEV3), count=3),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, dev(DEV2), count=3)], features=BINDING,
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1, **_BOUND_RES),
                        res(REQ0, DRIVER_A, POOL1, DEV2))]),
]
