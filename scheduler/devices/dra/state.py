"""The allocator's inputs besides the objects: feature gates and the devices already in use.

``Features`` carries kube-scheduler's DRA feature gates with their 1.34+ defaults and parses
``--feature-gates NAME=true,...`` as kube-scheduler does (other gate names are left to the
caller). ``AllocatedState`` is kube-scheduler's ``AllocatedState``: devices held exclusively by
allocated claims, the shares of devices that allow multiple allocations with their aggregated
consumed capacity. It is built from allocated claims and has ``add``/``remove`` so a session
can roll an allocation back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import TYPE_CHECKING, NamedTuple, TypeVar

if TYPE_CHECKING:  # annotations only: the object model loads with the first DRA object
    from scheduler.devices.dra.model import AllocationResult, ResourceClaim

__all__ = ["GATES", "AllocatedState", "DeviceID", "FeatureGateError", "Features"]

_K = TypeVar("_K")


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


GATES: dict[str, str] = {
    "DRAAdminAccess": "admin_access",
    "DRAPrioritizedList": "prioritized_list",
    "DRAPartitionableDevices": "partitionable_devices",
    "DRAConsumableCapacity": "consumable_capacity",
    "DRADeviceTaints": "device_taints",
    "DRAListTypeAttributes": "list_type_attributes",
    "DRADeviceBindingConditions": "device_binding_conditions",
    "DRAResourceClaimDeviceStatus": "resource_claim_device_status",
}
"""kube-scheduler gate name -> ``Features`` field."""


class FeatureGateError(ValueError):
    """A ``--feature-gates`` value kube-scheduler would reject."""


@dataclass(frozen=True, slots=True)
class Features:
    """kube-scheduler 1.34's defaults: AdminAccess and PrioritizedList beta (on),
    ResourceClaimDeviceStatus beta (on), the rest alpha (off)."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = False
    consumable_capacity: bool = False
    device_taints: bool = False
    list_type_attributes: bool = False
    device_binding_conditions: bool = False
    resource_claim_device_status: bool = True

    @property
    def binding_and_status(self) -> bool:
        """kube-scheduler's DeviceBindingAndStatus: binding conditions need both gates."""
        return self.device_binding_conditions and self.resource_claim_device_status

    @classmethod
    def all_enabled(cls) -> Features:
        return cls(**{f.name: True for f in fields(cls)})

    @classmethod
    def parse(
        cls, text: str, *, base: Features | None = None, ignore_unknown: bool = True
    ) -> Features:
        """``NAME=true,NAME2=false`` as kube-scheduler's ``--feature-gates``: values are Go
        booleans (``strconv.ParseBool``); names that are not DRA gates are skipped unless
        ``ignore_unknown`` is False."""
        values = {f.name: getattr(base or cls(), f.name) for f in fields(cls)}
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            name, sep, raw = item.partition("=")
            name = name.strip()
            if not sep:
                raise FeatureGateError(f"missing bool value for {name}")
            value = _parse_go_bool(raw.strip())
            if value is None:
                raise FeatureGateError(
                    f"invalid value of {name}={raw.strip()}, err: "
                    f'strconv.ParseBool: parsing "{raw.strip()}": invalid syntax'
                )
            attr = GATES.get(name)
            if attr is None:
                if ignore_unknown:
                    continue
                raise FeatureGateError(f"unrecognized feature gate: {name}")
            values[attr] = value
        return cls(**values)

    def to_gates(self) -> dict[str, bool]:
        return {gate: getattr(self, attr) for gate, attr in GATES.items()}


def _parse_go_bool(raw: str) -> bool | None:
    if raw in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if raw in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


@dataclass(slots=True)
class AllocatedState:
    """Devices in use by allocated claims (kube-scheduler's ``AllocatedState``).

    ``devices`` counts exclusive holders per device (a count, so removing one claim of two that
    wrongly hold a device keeps it in use); ``shares`` counts (device, shareID) pairs and
    ``capacity`` sums the consumed capacity per shared device. Results with admin access hold
    nothing, as in kube-scheduler.
    """

    devices: Counter[DeviceID] = field(default_factory=Counter)
    shares: Counter[tuple[DeviceID, str]] = field(default_factory=Counter)
    capacity: dict[DeviceID, dict[str, Decimal]] = field(default_factory=dict)
    shared_devices: Counter[DeviceID] = field(default_factory=Counter)

    @classmethod
    def from_claims(cls, claims: Iterable[ResourceClaim]) -> AllocatedState:
        state = cls()
        for claim in claims:
            if claim.allocation is not None:
                state.add(claim.allocation)
        return state

    def copy(self) -> AllocatedState:
        return AllocatedState(
            Counter(self.devices),
            Counter(self.shares),
            {k: dict(v) for k, v in self.capacity.items()},
            Counter(self.shared_devices),
        )

    def add(self, allocation: AllocationResult) -> None:
        for r in allocation.results:
            if r.admin_access:
                continue
            device = DeviceID(r.driver, r.pool, r.device)
            if r.share_id is None:
                self.devices[device] += 1
                continue
            self.shares[(device, r.share_id)] += 1
            self.shared_devices[device] += 1
            if r.consumed_capacity:
                total = self.capacity.setdefault(device, {})
                for name, amount in r.consumed_capacity.items():
                    total[name] = total.get(name, Decimal(0)) + amount

    def remove(self, allocation: AllocationResult) -> None:
        for r in allocation.results:
            if r.admin_access:
                continue
            device = DeviceID(r.driver, r.pool, r.device)
            if r.share_id is None:
                _decrement(self.devices, device)
                continue
            _decrement(self.shares, (device, r.share_id))
            _decrement(self.shared_devices, device)
            if r.consumed_capacity and device in self.capacity:
                total = self.capacity[device]
                for name, amount in r.consumed_capacity.items():
                    left = total.get(name, Decimal(0)) - amount
                    if left > 0:
                        total[name] = left
                    else:
                        total.pop(name, None)
                if not total or device not in self.shared_devices:
                    del self.capacity[device]

    def in_use(self, device: DeviceID) -> bool:
        """Held exclusively by some allocated claim."""
        return device in self.devices

    def is_allocated(self, device: DeviceID) -> bool:
        """Held in any way (kube-scheduler's ``IsDeviceAllocated``): counts against counters."""
        return device in self.devices or device in self.capacity or device in self.shared_devices

    def is_empty(self) -> bool:
        return not (self.devices or self.shares or self.capacity or self.shared_devices)


def _decrement(counter: Counter[_K], key: _K) -> None:
    if counter[key] <= 1:
        counter.pop(key, None)
    else:
        counter[key] -= 1
