"""The Dynamic Resource Allocation objects (``resource.k8s.io/v1``) the allocator works on.

Raw dicts from the wire are converted once into these slotted, frozen dataclasses; a
malformed object raises :class:`DRAObjectError` naming the object and the field path.
Attribute names are kept fully qualified (``domain/name``): a name without a domain belongs
to the device's driver, as the API defines it, so lookups need no fallback. Capacity names stay
as published, since requests and results name them that way.
Quantities are exact ``Decimal`` base units. Node selectors and opaque configuration stay wire
dicts: the allocator only evaluates or copies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from scheduler.devices.dra.wire import DRAObjectError

__all__ = [
    "ALLOCATION_MODES",
    "AllocatedConfig",
    "AllocationResult",
    "CapacityRequestPolicy",
    "CounterConsumption",
    "CounterSet",
    "DRAObjectError",
    "Device",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceClass",
    "DeviceConfig",
    "DeviceConstraint",
    "DeviceRequest",
    "DeviceRequestResult",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceToleration",
    "ResourceClaim",
    "ResourceSlice",
]

ALLOCATION_MODES = ("ExactCount", "All")


@dataclass(frozen=True, slots=True)
class DeviceAttribute:
    """One attribute value: ``kind`` is int, bool, string or version; ``values`` holds one
    value, or several for a list-type attribute (``is_list``, DRAListTypeAttributes)."""

    kind: str
    values: tuple[Any, ...]
    is_list: bool = False

    @property
    def value(self) -> Any:
        return self.values[0] if self.values else None


@dataclass(frozen=True, slots=True)
class CapacityRequestPolicy:
    """``capacity.requestPolicy``: what a request may consume of a shared device."""

    default: Decimal | None = None
    valid_values: tuple[Decimal, ...] = ()
    valid_min: Decimal | None = None
    valid_max: Decimal | None = None
    valid_step: Decimal | None = None
    has_range: bool = False


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    value: Decimal
    request_policy: CapacityRequestPolicy | None = None


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operator": self.operator}
        if self.key:
            out["key"] = self.key
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Decimal]


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, Decimal]


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    attributes: Mapping[str, DeviceAttribute] = field(default_factory=dict)
    """Fully qualified name -> value."""
    capacity: Mapping[str, DeviceCapacity] = field(default_factory=dict)
    """Name as published (qualified or not, as requests name it) -> capacity."""
    allow_multiple_allocations: bool = False
    consumes_counters: tuple[CounterConsumption, ...] = ()
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    node_name: str = ""
    node_selector: Mapping[str, Any] | None = None
    all_nodes: bool = False


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    pool_generation: int
    resource_slice_count: int
    node_name: str = ""
    node_selector: Mapping[str, Any] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """A class's or claim's ``config`` entry; ``opaque`` is the wire ``opaque`` dict."""

    requests: tuple[str, ...] = ()
    opaque: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    """CEL expressions."""
    config: tuple[DeviceConfig, ...] = ()
    extended_resource_name: str = ""


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """One ``exactly`` request or one ``firstAvailable`` entry."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity_requests: Mapping[str, Decimal] | None = None
    """``capacity.requests``: fully qualified name -> amount; None when absent."""


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: DeviceSubRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class DeviceRequestResult:
    """One entry of ``status.allocation.devices.results``."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str | None = None
    consumed_capacity: Mapping[str, Decimal] | None = None


@dataclass(frozen=True, slots=True)
class AllocatedConfig:
    """One entry of ``status.allocation.devices.config``."""

    source: str
    requests: tuple[str, ...]
    opaque: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class AllocationResult:
    results: tuple[DeviceRequestResult, ...] = ()
    config: tuple[AllocatedConfig, ...] = ()
    node_selector: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceConfig, ...] = ()
    allocation: AllocationResult | None = None
    reserved_for: tuple[Mapping[str, Any], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
