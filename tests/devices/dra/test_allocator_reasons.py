"""The Unschedulable reasons: they name the claim, the request and why (kube-scheduler's
allocator returns no result without a reason; its dynamicresources plugin names the claim)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.devices.dra.allocator import AllocatedState, Features, Unschedulable, allocate
from scheduler.devices.dra.parse import (
    device_class_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from tests.devices.dra.builders import claim, cls, dev, match, req, sl

DRIVER = "gpu.example.com"


def _reason(claims: list[dict[str, Any]], devices: list[dict[str, Any]], *,
            allocated: AllocatedState | None = None, count: int = 1) -> str:
    with pytest.raises(Unschedulable) as info:
        allocate(node_name="n1", node_labels={},
                 claims=[resource_claim_from_dict(c) for c in claims],
                 classes={"gpu": device_class_from_dict(cls("gpu", DRIVER))},
                 slices=[resource_slice_from_dict(sl("s", "n1", "n1", DRIVER, *devices,
                                                     count=count))],
                 allocated=allocated or AllocatedState(), features=Features())
    return info.value.reason


def test_no_class() -> None:
    assert _reason([claim("c", req("r", "tpu"))], [dev("g0")]) == \
        "claim default/c, request r: device class tpu does not exist"


def test_selector_matched_nothing() -> None:
    selector = f'device.attributes["{DRIVER}"].model == "h100"'
    reason = _reason([claim("c", req("r", "gpu", 1, selector))],
                     [dev("g0", attributes={"model": {"string": "a100"}})])
    assert reason == "claim default/c, request r: no device of class gpu matches the selectors"


def test_not_enough_capacity() -> None:
    reason = _reason([claim("c", req("r", "gpu", 3))], [dev("g0"), dev("g1")])
    assert reason == ("claim default/c, request r: not enough capacity: 3 device(s) needed, "
                      "2 match, 2 free")


def test_devices_in_use() -> None:
    from scheduler.devices.dra.state import DeviceID
    state = AllocatedState()
    state.devices[DeviceID(DRIVER, "n1", "g0")] += 1
    reason = _reason([claim("c", req("r", "gpu"))], [dev("g0")], allocated=state)
    assert reason == ("claim default/c, request r: not enough capacity: 1 device(s) needed, "
                      "1 match, 0 free")


def test_constraint_unsatisfiable() -> None:
    reason = _reason([claim("c", req("r", "gpu", 2), constraints=[match(f"{DRIVER}/numa")])],
                     [dev("g0", attributes={"numa": {"int": 0}}),
                      dev("g1", attributes={"numa": {"int": 1}})])
    assert reason == "claim default/c: constraint unsatisfiable on the free devices"


def test_second_claim_named() -> None:
    reason = _reason([claim("a", req("r", "gpu")), claim("b", req("s", "gpu"))], [dev("g0")])
    assert reason.startswith("claim default/b, request s: not enough capacity")


def test_incomplete_pool_named() -> None:
    reason = _reason([claim("c", req("r", "gpu"))], [dev("g0")], count=2)
    assert reason.endswith("(resource pool gpu.example.com/n1 is being updated)")
