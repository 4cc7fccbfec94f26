"""Consumable capacity (DRAConsumableCapacity) and claim constraints, as kube-scheduler has them.

``consumed_capacity`` turns a request's ``capacity.requests`` into what it consumes of each of
a device's capacities (the request policy's default for one not asked, rounded up to the valid
range step or the next valid value); ``fits`` checks that against the policy and what is
already consumed. The constraints are ``matchAttribute`` (all devices share a value; with
list-type attributes, a common value) and ``distinctAttribute`` (pairwise different values).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal

from scheduler.devices.dra.model import (
    CapacityRequestPolicy,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceConstraint,
)

__all__ = ["Constraint", "consumed_capacity", "fits", "lookup_attribute"]


def _round_up(requested: Decimal, cap: DeviceCapacity) -> Decimal:
    policy = cap.request_policy
    if policy is None:
        return requested
    if policy.has_range and policy.valid_min is not None:
        low = policy.valid_min
        if requested < low:
            return low
        if policy.valid_step is None:
            return requested
        step = Decimal(math.ceil(policy.valid_step))
        base = Decimal(math.ceil(low))
        value = Decimal(math.ceil(requested))
        n = math.ceil((value - base) / step) if step else 0
        return base + step * n
    if policy.valid_values:
        for valid in policy.valid_values:
            if requested <= valid:
                return valid
    return requested


def _consumed(requested: Decimal | None, cap: DeviceCapacity) -> Decimal:
    if requested is None:
        if cap.request_policy is not None and cap.request_policy.default is not None:
            return cap.request_policy.default
        return cap.value
    return _round_up(requested, cap)


def _violates(value: Decimal, policy: CapacityRequestPolicy | None) -> bool:
    if policy is None:
        return False
    if policy.default is not None and value == policy.default:
        return False
    if policy.has_range:
        if policy.valid_max is not None and value > policy.valid_max:
            return True
        if policy.valid_step is not None and policy.valid_min is not None:
            step = math.ceil(policy.valid_step)
            return step != 0 and (math.ceil(value) - math.ceil(policy.valid_min)) % step != 0
        return False
    if policy.valid_values:
        return value not in policy.valid_values
    return False


def consumed_capacity(
    requests: Mapping[str, Decimal] | None, capacity: Mapping[str, DeviceCapacity]
) -> dict[str, Decimal]:
    """What a request consumes of each capacity of a device (``GetConsumedCapacityFromRequest``)."""
    asked = requests or {}
    return {name: _consumed(asked.get(name), cap) for name, cap in capacity.items()}


def fits(
    *,
    requests: Mapping[str, Decimal] | None,
    capacity: Mapping[str, DeviceCapacity],
    allocated: Mapping[str, Decimal] | None,
    allocating: Mapping[str, Decimal] | None,
) -> bool:
    """``CmpRequestOverCapacity``: False when a requested capacity is not published, a consumed
    amount violates the request policy, or the total would exceed the capacity."""
    asked = requests or {}
    if any(name not in capacity for name in asked):
        return False
    for name, cap in capacity.items():
        used = _consumed(asked.get(name), cap)
        if _violates(used, cap.request_policy):
            return False
        total = (
            used
            + (allocated or {}).get(name, Decimal(0))
            + (allocating or {}).get(name, Decimal(0))
        )
        if total > cap.value:
            return False
    return True


def lookup_attribute(device: Device, driver: str, name: str) -> DeviceAttribute | None:
    """A constraint's fully qualified attribute (names were qualified by driver when parsed)."""
    del driver
    return device.attributes.get(name)


def _as_set(attr: DeviceAttribute) -> tuple[str, frozenset[object]]:
    return attr.kind, frozenset(attr.values)


class Constraint:
    """One claim constraint, with add/remove as the search places and takes back devices."""

    __slots__ = ("attribute", "distinct", "list_types", "placed", "requests")

    def __init__(self, spec: DeviceConstraint, *, list_types: bool) -> None:
        self.distinct = bool(spec.distinct_attribute)
        self.attribute = spec.distinct_attribute or spec.match_attribute
        self.requests = frozenset(spec.requests)
        self.list_types = list_types
        self.placed: list[tuple[str, str, frozenset[object]]] = []
        """(request, kind, values) of each device in the set."""

    def applies(self, request: str, sub_request: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (
            bool(sub_request) and f"{request}/{sub_request}" in self.requests
        )

    def add(self, request: str, sub_request: str, device: Device) -> bool:
        if not self.applies(request, sub_request):
            return True
        attr = device.attributes.get(self.attribute)
        if attr is None:
            return False
        if attr.is_list and not self.list_types:
            return False
        kind, values = _as_set(attr)
        if self.distinct:
            for _, other_kind, other in self.placed:
                if other_kind == kind and (values & other):
                    return False
        elif self.placed:
            common = None
            for _, other_kind, other in self.placed:
                if other_kind != kind:
                    return False
                common = other if common is None else common & other
            if not (values & (common or frozenset())):
                return False
        self.placed.append((request, kind, values))
        return True

    def remove(self, request: str, sub_request: str) -> None:
        if not self.applies(request, sub_request):
            return
        for i in range(len(self.placed) - 1, -1, -1):
            if self.placed[i][0] == request:
                del self.placed[i]
                return
