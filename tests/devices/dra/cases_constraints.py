"""Ported table cases, part 2: constraints, config, request errors and limits
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
    REQ0,
    REQ1,
    REQ2,
    SLICE1,
    SLICE2,
    Case,
    all_req,
    claim,
    cls,
    dev,
    local,
    many,
    match,
    one_device,
    opaque,
    req,
    res,
    result,
    sl,
)

A = cls(CLASS_A, DRIVER_A)
B = cls(CLASS_B, DRIVER_B)
ONE = one_device(SLICE1, NODE1, POOL1, DRIVER_A)
R0 = res(REQ0, DRIVER_A, POOL1, DEV1)
INT = f"{DRIVER_A}/numa"
VERSION = f"{DRIVER_A}/driverVersion"
STRING = f"{DRIVER_A}/stringAttribute"
BOOL = f"{DRIVER_A}/boolAttribute"
MAX = 32


def _attrs(**values: Any) -> dict[str, Any]:
    return {name: {kind: value} for name, (kind, value) in values.items()}


_FULL = _attrs(driverVersion=("version", "1.0.0"), numa=("int", 1),
               stringAttribute=("string", "stringAttributeValue"), boolAttribute=("bool", True))


def _pair(name: str, kind: str, first: Any, second: Any) -> list[dict[str, Any]]:
    return [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, attributes={name: {kind: first}}),
               dev(DEV2, attributes={name: {kind: second}}))]


def _two_of(attribute: str) -> list[dict[str, Any]]:
    return [claim(CLAIM0, req(REQ0, CLASS_A, 2), constraints=[match(attribute)])]


def _bad_selector(expression: str, **extra: Any) -> dict[str, Any]:
    out = claim(CLAIM0, req(REQ0, CLASS_A, 1, expression))
    out["spec"]["devices"]["requests"][0]["exactly"].update(extra)
    return out


CASES = [
    Case("with-constraint",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A),
                constraints=[match(INT), match(VERSION), match(STRING), match(BOOL)])],
         [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, attributes=_FULL),
                  dev(DEV2, attributes=_FULL))],
         expect=[result(local(NODE1), R0, res(REQ1, DRIVER_A, POOL1, DEV2))]),
    Case("with-constraint-non-existent-attribute",
         [claim(CLAIM0, req(REQ0, CLASS_A), constraints=[match(f"{DRIVER_A}/NonExistentAttribute")])],
         [A], [ONE], reason="constraint"),
    Case("with-constraint-not-matching-int-attribute", _two_of(INT), [A, B],
         _pair("numa", "int", 1, 2)),
    Case("with-constraint-not-matching-int-attribute-all-devices",
         [claim(CLAIM0, all_req(REQ0, CLASS_A), constraints=[match(INT)])], [A, B],
         _pair("numa", "int", 1, 2),
         error="request req-0: cannot add device driver-a/pool-1/device-2 because a claim "
               "constraint would not be satisfied"),
    Case("with-constraint-not-matching-string-attribute", _two_of(STRING), [A, B],
         _pair("stringAttribute", "string", "stringAttributeValue", "stringAttributeValue2")),
    Case("with-constraint-not-matching-bool-attribute", _two_of(BOOL), [A, B],
         _pair("boolAttribute", "bool", True, False)),
    Case("with-constraint-not-matching-version-attribute", _two_of(VERSION), [A, B],
         _pair("driverVersion", "version", "1.0.0", "2.0.0")),
    Case("with-constraint-for-request",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A), constraints=[match(VERSION, REQ0)])],
         [A, B], _pair("driverVersion", "version", "1.0.0", "2.0.0"),
         expect=[result(local(NODE1), R0, res(REQ1, DRIVER_A, POOL1, DEV2))]),
    Case("with-constraint-for-request-retry",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A),
                constraints=[match(VERSION, REQ0), match(STRING)])],
         [A, B], [sl(SLICE1, NODE1, POOL1, DRIVER_A, *(
             dev(name, attributes=_attrs(driverVersion=("version", v), stringAttribute=("string", s)))
             for name, v, s in ((DEV1, "1.0.0", "a"), (DEV2, "2.0.0", "b"), (DEV3, "3.0.0", "b"))))],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV2),
                        res(REQ1, DRIVER_A, POOL1, DEV3))]),
    Case("with-class-device-config", [claim(CLAIM0, req(REQ0, CLASS_A))],
         [cls(CLASS_A, DRIVER_A, config="classAttribute")], [ONE],
         expect=[result(local(NODE1), R0, config=[
             {"source": "FromClass", "opaque": opaque(DRIVER_A, "classAttribute")}])]),
    Case("with-class-device-config-with-multiple-request-and-configs",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A), req(REQ2, CLASS_B))],
         [cls(CLASS_A, DRIVER_A, config="classAttribute-A"),
          cls(CLASS_B, DRIVER_B, config="classAttribute-B")],
         [many(SLICE1, NODE1, POOL1, DRIVER_A, 2), one_device(SLICE2, NODE1, POOL1, DRIVER_B)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV0),
                        res(REQ1, DRIVER_A, POOL1, DEV1), res(REQ2, DRIVER_B, POOL1, DEV1), config=[
             {"source": "FromClass", "requests": [REQ0, REQ1],
              "opaque": opaque(DRIVER_A, "classAttribute-A")},
             {"source": "FromClass", "requests": [REQ2],
              "opaque": opaque(DRIVER_B, "classAttribute-B")}])]),
    Case("with-claim-config-for-two-requests",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A), req(REQ2, CLASS_A), config=[
             {"requests": [REQ0, REQ1], "opaque": opaque(DRIVER_A, "deviceAttribute")}])],
         [A], [many(SLICE1, NODE1, POOL1, DRIVER_A, 3)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV0),
                        res(REQ1, DRIVER_A, POOL1, DEV1), res(REQ2, DRIVER_A, POOL1, DEV2), config=[
             {"source": "FromClaim", "requests": [REQ0, REQ1],
              "opaque": opaque(DRIVER_A, "deviceAttribute")}])]),
    Case("claim-with-device-config",
         [claim(CLAIM0, req(REQ0, CLASS_A), config=[{"opaque": opaque(DRIVER_A, "deviceAttribute")}])],
         [A], [ONE], expect=[result(local(NODE1), R0, config=[
             {"source": "FromClaim", "opaque": opaque(DRIVER_A, "deviceAttribute")}])]),
    Case("invalid-CEL-one-device", [_bad_selector("noSuchVar")], [A], [ONE],
         error="claim default/claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime error"),
    Case("invalid-CEL-one-device-class", [claim(CLAIM0, req(REQ0, CLASS_A))],
         [{"metadata": {"name": CLASS_A}, "spec": {"selectors": [{"cel": {"expression": "noSuchVar"}}]}}],
         [ONE], error="class class-a: selector #0 on device driver-a/pool-1/device-1: CEL runtime error"),
    Case("invalid-CEL-all-devices", [_bad_selector("noSuchVar", allocationMode="All")], [A], [ONE],
         error="CEL runtime error"),
    Case("too-many-devices-single-request", [claim(CLAIM0, req(REQ0, CLASS_A, 500))], [A], [],
         error="exceeds the claim limit"),
    Case("many-devices-okay", [claim(CLAIM0, req(REQ0, CLASS_A, MAX))], [A], []),
    Case("too-many-devices-total", [claim(CLAIM0, req(REQ0, CLASS_A, MAX), req(REQ1, CLASS_A))], [A],
         [many(SLICE1, NODE1, POOL1, DRIVER_A, MAX + 1)], error="exceeds the claim limit"),
    Case("all-devices-invalid-CEL", [claim(CLAIM0, req(REQ0, CLASS_A, 500))], [A], [],
         error="exceeds the claim limit"),
]
