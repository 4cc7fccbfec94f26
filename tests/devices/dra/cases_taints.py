"""Ported table cases, part 5: device taints, "All" subrequests, result limits and binding
conditions (TestAllocator in k8s.io/dynamic-resource-allocation
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
    NODE2,
    POOL1,
    POOL2,
    REQ0,
    REQ1,
    SLICE1,
    SLICE2,
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
    many,
    req,
    res,
    result,
    sl,
    sub,
)

A = cls(CLASS_A, DRIVER_A)
B = cls(CLASS_B, DRIVER_B)
MAX = 32
TAINTS = gates(device_taints=True)
NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
NONE = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TOL_NO_SCHEDULE = {"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}
TOL_NO_EXECUTE = {"operator": "Equal", "key": "taint-key", "value": "taint-value-2",
                  "effect": "NoExecute"}
R0S1 = f"{REQ0}/{SUB1}"
BINDING = gates(device_binding_conditions=True, resource_claim_device_status=True)


def _tainted(*per_device: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [sl(SLICE1, NODE1, POOL1, DRIVER_A, *(
        dev(f"device-{i + 1}", taints=t) for i, t in enumerate(per_device)))]


def _gen(expression_value: str) -> str:
    return f'device.attributes["{DRIVER_A}"].generation == "{expression_value}"'


def _v(generation: str, **more: Any) -> dict[str, Any]:
    return {"generation": {"string": generation}, **{k: {"bool": v} for k, v in more.items()}}


_ALL_GENERATIONS = claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, 0, _gen("v6"), allocationMode="All"),
                                       sub(SUB1, CLASS_A, 0, _gen("v5"), allocationMode="All")))


def _bound(name: str, suffix: str = "") -> dict[str, Any]:
    return dev(name, bindingConditions=[f"IsPrepare{suffix}"],
               bindingFailureConditions=[f"BindingFailed{suffix}"])


def _bound_res(request: str, device: str, suffix: str = "") -> dict[str, Any]:
    return res(request, DRIVER_A, POOL1, device, bindingConditions=[f"IsPrepare{suffix}"],
               bindingFailureConditions=[f"BindingFailed{suffix}"])


CASES = [
    Case("tainted-two-devices", [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         _tainted([NO_SCHEDULE], [NO_EXECUTE]), features=TAINTS),
    Case("tainted-one-device-two-taints", [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         _tainted([NO_SCHEDULE, NO_EXECUTE]), features=TAINTS),
    Case("tainted-two-devices-tolerated",
         [claim(CLAIM0, req(REQ0, CLASS_A, tolerations=[TOL_NO_EXECUTE]))], [A],
         _tainted([NO_SCHEDULE], [NO_EXECUTE]), features=TAINTS,
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV2,
                                          tolerations=[TOL_NO_EXECUTE]))]),
    Case("tainted-two-devices-prioritized-list-tolerated",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A), sub(SUB1, CLASS_A,
                                                             tolerations=[TOL_NO_EXECUTE])))],
         [A], _tainted([NO_SCHEDULE], [NO_EXECUTE]),
         features=gates(device_taints=True, prioritized_list=True),
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV2,
                                          tolerations=[TOL_NO_EXECUTE]))]),
    Case("tainted-no-effect", [claim(CLAIM0, req(REQ0, CLASS_A))], [A], _tainted([NONE]),
         features=TAINTS, expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1))]),
    Case("tainted-one-device-two-taints-both-tolerated",
         [claim(CLAIM0, req(REQ0, CLASS_A, tolerations=[TOL_NO_SCHEDULE, TOL_NO_EXECUTE]))], [A],
         _tainted([NO_SCHEDULE, NO_EXECUTE]), features=TAINTS,
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1,
                                          tolerations=[TOL_NO_SCHEDULE, TOL_NO_EXECUTE]))]),
    Case("tainted-disabled", [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         _tainted([NO_SCHEDULE, NO_EXECUTE]),
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1))]),
    Case("tainted-prioritized-list",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_B), sub(SUB1, CLASS_A)))], [A, B],
         _tainted([NO_SCHEDULE]), features=gates(device_taints=True, prioritized_list=True)),
    Case("tainted-prioritized-list-disabled",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_B), sub(SUB1, CLASS_A)))], [A, B],
         _tainted([NO_SCHEDULE]), features=gates(prioritized_list=True),
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV1))]),
    Case("tainted-admin-access", [claim(CLAIM0, req(REQ0, CLASS_A, adminAccess=True))], [A],
         _tainted([NO_SCHEDULE]), features=gates(device_taints=True, admin_access=True),
         allocated=[in_use(DRIVER_A, POOL1, DEV1), in_use(DRIVER_A, POOL1, DEV2)]),
    Case("tainted-admin-access-disabled", [claim(CLAIM0, req(REQ0, CLASS_A, adminAccess=True))],
         [A], _tainted([NO_SCHEDULE]), features=gates(admin_access=True),
         allocated=[in_use(DRIVER_A, POOL1, DEV1), in_use(DRIVER_A, POOL1, DEV2)],
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1, admin=True))]),
    Case("tainted-all-devices-single", [claim(CLAIM0, all_req(REQ0, CLASS_A))], [A],
         _tainted([NO_SCHEDULE]), features=TAINTS),
    Case("tainted-all-devices-single-disabled", [claim(CLAIM0, all_req(REQ0, CLASS_A))], [A],
         _tainted([NO_SCHEDULE]), expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1))]),
    Case("prioritized-list-allocation-mode-all",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, 0, allocationMode="All"), sub(SUB1, CLASS_A)))],
         [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), dev(DEV2))],
         features=gates(prioritized_list=True), allocated=[in_use(DRIVER_A, POOL1, DEV2)],
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV1))]),
    Case("prioritized-list-allocation-mode-all-with-selectors", [_ALL_GENERATIONS], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, attributes=_v("v5")))],
         features=gates(prioritized_list=True),
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV1))]),
    Case("prioritized-list-allocation-mode-all-with-selectors-multiple-pools", [_ALL_GENERATIONS],
         [A], [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, attributes=_v("v5"))),
               sl(SLICE2, NODE1, POOL2, DRIVER_A, dev(DEV1, attributes=_v("v5")))],
         features=gates(prioritized_list=True),
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV1),
                        res(R0S1, DRIVER_A, POOL2, DEV1))]),
    Case("prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
         [_ALL_GENERATIONS], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, attributes=_v("v5"))),
          sl(SLICE2, NODE2, POOL2, DRIVER_A, dev(DEV1, attributes=_v("v5")),
             dev(DEV2, attributes=_v("v6")))],
         features=gates(prioritized_list=True),
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV1))]),
    Case("prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
         [_ALL_GENERATIONS], [cls(CLASS_A, DRIVER_A, extra=f'device.attributes["{DRIVER_A}"].selected')],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1, attributes=_v("v6", selected=False)),
             dev(DEV2, attributes=_v("v5", selected=False)),
             dev(DEV3, attributes=_v("v5", selected=True)))],
         features=gates(prioritized_list=True),
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, DEV3))]),
    Case("max-number-devices", [claim(CLAIM0, req(REQ0, CLASS_A, MAX))], [A],
         [many(SLICE1, NODE1, POOL1, DRIVER_A, MAX)],
         expect=[result(local(NODE1), *(res(REQ0, DRIVER_A, POOL1, f"device-{i}")
                                        for i in range(MAX)))]),
    Case("partitionable-devices-with-attribute-selector",
         [claim(CLAIM0, req(REQ0, CLASS_A, 2),
                req(REQ1, CLASS_A, 1, f'device.attributes["{DRIVER_A}"].special'))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, *(
             dev(name, attributes={"special": {"bool": special}}, consumesCounters=[
                 {"counterSet": "counter-set-1", "counters": {cpu: {"value": "1"}}},
                 {"counterSet": "counter-set-2", "counters": {"mem": {"value": "10Gi"}}}])
             for name, special, cpu in ((DEV1, True, "cpu1"), (DEV2, False, "cpu2"),
                                        (DEV3, False, "cpu3"))), count=2),
          sl(SLICE2, NODE1, POOL1, DRIVER_A, count=2, counters=[
              {"name": "counter-set-1", "counters": {c: {"value": "1"} for c in ("cpu1", "cpu2", "cpu3")}},
              {"name": "counter-set-2", "counters": {"mem": {"value": "30Gi"}}}])],
         features=gates(partitionable_devices=True),
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV2),
                        res(REQ0, DRIVER_A, POOL1, DEV3), res(REQ1, DRIVER_A, POOL1, DEV1))]),
    Case("prioritized-list-max-allocation-limit-request",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, MAX), sub(SUB1, CLASS_A, MAX // 2)),
                first(REQ1, sub(SUB0, CLASS_A, MAX), sub(SUB1, CLASS_A, MAX // 2)))], [A],
         [many(SLICE1, NODE1, POOL1, DRIVER_A, MAX * 2)], features=gates(prioritized_list=True),
         expect=[result(local(NODE1), *(res(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, f"device-{i}")
                                        for i in range(MAX // 2)),
                        *(res(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, f"device-{i}")
                          for i in range(MAX // 2, MAX)))]),
    Case("prioritized-list-max-allocation-allocation-mode-all",
         [claim(CLAIM0, first(REQ0, sub(SUB0, CLASS_A, 0, allocationMode="All"),
                              sub(SUB1, CLASS_A, 2)), req(REQ1, CLASS_B, 2))], [A, B],
         [many(SLICE1, NODE1, POOL1, DRIVER_A, MAX - 1), many(SLICE2, NODE1, POOL2, DRIVER_B, 2)],
         features=gates(prioritized_list=True),
         expect=[result(local(NODE1), res(R0S1, DRIVER_A, POOL1, "device-0"),
                        res(R0S1, DRIVER_A, POOL1, "device-1"), res(REQ1, DRIVER_B, POOL2, "device-0"),
                        res(REQ1, DRIVER_B, POOL2, "device-1"))]),
    Case("device-binding-conditions", [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1))], features=BINDING,
         expect=[result(local(NODE1), _bound_res(REQ0, DEV1))]),
    Case("binding-conditions-multiple-devices",
         [claim(CLAIM0, req(REQ0, CLASS_A, 2), req(REQ1, CLASS_A))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1), _bound(DEV2, "2"), _bound(DEV3, "3"))],
         features=BINDING, expect=[result(local(NODE1), _bound_res(REQ0, DEV1),
                                          _bound_res(REQ0, DEV2, "2"), _bound_res(REQ1, DEV3, "3"))]),
    Case("binding-conditions-with-and-without",
         [claim(CLAIM0, req(REQ0, CLASS_A), req(REQ1, CLASS_A))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, dev(DEV1), _bound(DEV2))], features=BINDING,
         expect=[result(local(NODE1), res(REQ0, DRIVER_A, POOL1, DEV1), _bound_res(REQ1, DEV2))]),
    Case("binding-conditions-without-feature-gate", [claim(CLAIM0, req(REQ0, CLASS_A))], [A],
         [sl(SLICE1, NODE1, POOL1, DRIVER_A, _bound(DEV1))]),
]
