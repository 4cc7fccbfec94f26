"""Ported table cases, part 7: shared devices with constraints, distinct constraints and
list-type attributes (TestAllocator in k8s.io/dynamic-resource-allocation
structured/internal/allocatortesting/allocator_testing.go, the cases of the same names)."""

from __future__ import annotations

from typing import Any

from tests.devices.dra.builders import (
    CLAIM0,
    CLASS_A,
    DEV1,
    DEV2,
    DRIVER_A,
    NODE1,
    POOL1,
    REQ0,
    REQ1,
    REQ2,
    REQ3,
    SLICE1,
    SUB0,
    SUB1,
    Case,
    claim,
    cls,
    dev,
    distinct,
    first,
    gates,
    in_use,
    local,
    match,
    req,
    res,
    result,
    sl,
    sub,
)
from tests.devices.dra.cases_capacity import MULTI, ask, one, share, shared

A = cls(CLASS_A, DRIVER_A)
CC = gates(consumable_capacity=True)
LISTS = gates(list_type_attributes=True)
LISTS_CC = gates(list_type_attributes=True, consumable_capacity=True)
STRING = f"{DRIVER_A}/stringAttribute"
KINDS = {"stringAttribute": ("string", STRING), "numa": ("int", f"{DRIVER_A}/numa"),
         "boolAttribute": ("bool", f"{DRIVER_A}/boolAttribute"),
         "driverVersion": ("version", f"{DRIVER_A}/driverVersion")}


def _devices(name: str, *values: Any) -> list[dict[str, Any]]:
    """One device per value of attribute ``name``: a list is a list-type attribute."""
    kind = KINDS[name][0]
    return [sl(SLICE1, NODE1, POOL1, DRIVER_A, *(
        dev(f"device-{i + 1}", attributes={name: {f"{kind}s": v} if isinstance(v, list)
                                           else {kind: v}})
        for i, v in enumerate(values)))]


def _case(case_name: str, name: str, values: list[Any], count: int, picked: list[int] | None, *,
          distinct_values: bool = False, features: Any = LISTS) -> Case:
    constraint = (distinct if distinct_values else match)(KINDS[name][1])
    expect = [] if picked is None else [result(local(NODE1), *(
        res(REQ0, DRIVER_A, POOL1, f"device-{i}") for i in picked))]
    return Case(case_name, [claim(CLAIM0, req(REQ0, CLASS_A, count), constraints=[constraint])],
                [A], _devices(name, *values), features=features, expect=expect)


_M = "list-attributes-match-constaint-"
_D = "list-attributes-distinct-constraint-"

CASES = [
    Case("allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
         [claim(CLAIM0, ask(REQ0, "1"))],
         [cls(CLASS_A, DRIVER_A, extra="device.allowMultipleAllocations == false")],
         one(shared(DEV1, "1")), features=CC),
    Case("allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
         [claim(CLAIM0, ask(REQ0, "1"))], [MULTI], one(shared(DEV1, ranged="2")), features=CC,
         allocated=[in_use(DRIVER_A, POOL1, DEV1)]),
    Case("allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
         [claim(CLAIM0, ask(REQ0, "1"))], [MULTI], one(shared(DEV1, ranged="2", multi=False)),
         features=CC, allocated_capacity={in_use(DRIVER_A, POOL1, DEV1): {"capacity-0": "1"}}),
    Case("with-distinct-constraints-attribute-not-set",
         [claim(CLAIM0, req(REQ0, CLASS_A), constraints=[distinct(f"{DRIVER_A}/boolAttribute", REQ0)])],
         [A], one(shared(DEV1)), features=CC),
    Case("distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",
         [claim(CLAIM0, ask(REQ0, "1"), ask(REQ1, "1"), constraints=[distinct(STRING)])], [MULTI],
         one(shared(DEV1, ranged="2",
                    attributes={"stringAttribute": {"string": "stringAttributeValue"}})),
         features=CC),
    Case("distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
         [claim(CLAIM0, ask(REQ0, "2"), ask(REQ1, "2"), constraints=[distinct(STRING)])], [MULTI],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, shared(
             DEV1, ranged="4", attributes={"stringAttribute": {"string": "stringAttributeValue1"}}),
             count=2),
          sl(SLICE1, NODE1, POOL1, DRIVER_A, shared(
              DEV2, ranged="4", attributes={"stringAttribute": {"string": "stringAttributeValue2"}}),
             count=2)], features=CC,
         expect=[result(local(NODE1), share(REQ0, DEV1, "2"), share(REQ1, DEV2, "2"))]),
    _case(_M + "scalar-string-values", "stringAttribute", ["value1", "value1"], 2, [1, 2]),
    _case(_M + "list-of-string-values-with-common-elements", "stringAttribute",
          [["value1", "value2", "value3"], ["value2", "value3", "value4"]], 2, [1, 2]),
    _case(_M + "list-of-string-values-with-partially-common-elements", "stringAttribute",
          [["value1", "value2"], ["value2", "value3"], ["value3", "value1"]], 3, None),
    _case(_M + "mixed-scalar-and-list-of-string-values-with-common-elements", "stringAttribute",
          ["value1", ["value1", "value2"]], 2, [1, 2]),
    _case(_M + "mixed-scalar-and-list-of-string-values-with-partially-common-elements",
          "stringAttribute", ["value1", ["value1", "value2"], ["value2", "value3"]], 3, None),
    _case(_M + "mixed-scalar-and-list-of-string-values-without-common-elements", "stringAttribute",
          ["value1", ["value2", "value3"]], 2, None),
    _case(_M + "list-of-int-values-with-common-elements", "numa", [[0, 1, 2], [1, 2, 3]], 2, [1, 2]),
    _case(_M + "list-of-bool-values-with-common-elements", "boolAttribute", [[True, False], [True]],
          2, [1, 2]),
    _case(_M + "list-of-version-values-with-common-elements", "driverVersion",
          [["1.0.0", "1.1.0", "2.0.0"], ["1.1.0", "2.0.0", "2.1.0"]], 2, [1, 2]),
    _case("list-attributes-disabled-match-constraint-with-lists", "stringAttribute",
          [["value1", "value2", "value3"], ["value2", "value3", "value4"]], 2, None, features=gates()),
    _case(_D + "scalar-string-values-all-distinct", "stringAttribute", ["value1", "value2"], 2,
          [1, 2], distinct_values=True, features=LISTS_CC),
    _case(_D + "scalar-string-values-not-distinct", "stringAttribute", ["value1", "value1"], 2,
          None, distinct_values=True, features=LISTS_CC),
    _case(_D + "list-of-string-values-all-distinct", "stringAttribute",
          [["value1", "value2"], ["value2", "value3"], ["value3", "value4"]], 2, [1, 3],
          distinct_values=True, features=LISTS_CC),
    _case(_D + "list-of-string-values-with-common-elements", "stringAttribute",
          [["value1", "value2", "value3"], ["value2", "value4", "value5"]], 2, None,
          distinct_values=True, features=LISTS_CC),
    _case(_D + "mixed-scalar-and-list-all-distinct", "stringAttribute",
          ["value1", ["value1", "value2"], ["value2", "value3"]], 2, [1, 3],
          distinct_values=True, features=LISTS_CC),
    _case(_D + "mixed-scalar-and-list-with-common-elements", "stringAttribute",
          ["value1", ["value1", "value2"]], 2, None, distinct_values=True, features=LISTS_CC),
    _case(_D + "list-of-int-values-all-distinct", "numa", [[0, 1], [1, 2], [2, 3]], 2, [1, 3],
          distinct_values=True, features=LISTS_CC),
    _case(_D + "list-of-bool-values-all-distinct", "boolAttribute", [[True], [True, False], [False]],
          2, [1, 3], distinct_values=True, features=LISTS_CC),
    _case(_D + "list-of-version-values-all-distinct", "driverVersion",
          [["1.0.0", "1.1.0"], ["1.1.0", "2.0.0"], ["2.0.0", "2.1.0"]], 2, [1, 3],
          distinct_values=True, features=LISTS_CC),
    _case("list-attributes-disabled-distinct-constraint-with-lists", "stringAttribute",
          [["value1", "value2", "value3"], ["value2", "value3", "value4"]], 2, None,
          distinct_values=True, features=CC),
    Case("with-distinct-constraints",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A), req(REQ2, CLASS_A), req(REQ3, CLASS_A),
                constraints=[distinct(f"{DRIVER_A}/boolAttribute", REQ0, REQ1),
                             distinct(f"{DRIVER_A}/driverVersion", REQ0, REQ1, REQ2),
                             distinct(f"{DRIVER_A}/numa", REQ0, REQ1, REQ2, REQ3)])], [A],
         one(*(shared(f"device-{i + 1}", attributes={
             "driverVersion": {"version": version}, "numa": {"int": i},
             "boolAttribute": {"bool": flag}})
             for i, (version, flag) in enumerate((("1.0.0", True), ("1.0.1", False),
                                                  ("1.0.2", True), ("1.0.0", True))))),
         features=CC, expect=[result(local(NODE1), share(REQ0, DEV1, None), share(REQ1, DEV2, None),
                                     share(REQ2, "device-3", None), share(REQ3, "device-4", None))]),
    Case("with-distinct-constraints-with-subrequests",
         [claim(CLAIM0, *(first(r, sub(SUB0, CLASS_A, 1, f'device.attributes["{DRIVER_A}"].boolAttribute'),
                                sub(SUB1, CLASS_A)) for r in (REQ0, REQ1, REQ2)),
                constraints=[distinct(f"{DRIVER_A}/boolAttribute", REQ0, REQ1)])], [A],
         one(shared(DEV1, attributes={"boolAttribute": {"bool": True}}),
             shared(DEV2, attributes={"boolAttribute": {"bool": False}})),
         features=gates(consumable_capacity=True, prioritized_list=True),
         expect=[result(local(NODE1), share(f"{REQ0}/{SUB0}", DEV1, None),
                        share(f"{REQ1}/{SUB1}", DEV2, None), share(f"{REQ2}/{SUB0}", DEV1, None))]),
    Case(_M + "list-of-string-values-without-common-elements",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ0, CLASS_A), constraints=[match(STRING)])], [A],
         _devices("stringAttribute", ["value1", "value2"], ["value3", "value4"]), features=LISTS),
]
