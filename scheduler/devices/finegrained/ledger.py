"""One node's fine-grained device ledger: what each device offers, what pods hold, and why.

The ledger is derived, never stored: totals come from the node's Device object, usage from
the ``scheduling.koordinator.sh/device-allocated`` annotation of every pod bound to the node
(and of pods this session placed, through their pending Binding), plus the GPUs kubelet handed
out on its own (the Device object's ``node.koordinator.sh/gpu-checkpoints``). A restart or a
new snapshot therefore sees exactly what the node side was told. Usage of a minor the Device
object no longer lists stays charged, so a device that comes back is not handed out twice.
A pod's annotation is read part by part (:func:`read_allocation`): a broken part never frees
what the readable parts hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.devices.finegrained.model import (
    DeviceInfo,
    NodeDeviceSpec,
    format_resource,
    to_int,
)
from scheduler.devices.finegrained.names import (
    DEPRECATED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    TYPE_GPU,
    TYPES,
)

__all__ = ["Allocation", "Ledger", "Pick", "ReadAllocation", "charge_whole", "decode_allocation",
           "encode_allocation", "read_allocation"]


@dataclass(frozen=True, slots=True)
class Pick:
    """One device given to a pod: its minor, what it is charged, and the VFs it holds."""

    minor: int
    resources: Mapping[str, int]
    vfs: tuple[tuple[int, str], ...] = ()
    """``(minor, busID)`` of each virtual function taken on this device."""


Allocation = dict[str, tuple[Pick, ...]]
"""Device type → the devices a pod holds of that type."""


class AllocationError(ValueError):
    """An unreadable ``device-allocated`` annotation."""


def encode_allocation(allocation: Allocation, devices: Mapping[tuple[str, int], DeviceInfo]
                      ) -> str:
    """Koordinator's JSON shape: type → [{minor, resources, id, extension{vfs}}]."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in sorted(allocation):
        entries = []
        for pick in allocation[kind]:
            entry: dict[str, Any] = {
                "minor": pick.minor,
                "resources": {name: format_resource(name, value)
                              for name, value in sorted(pick.resources.items())},
            }
            device = devices.get((kind, pick.minor))
            if device is not None and device.uuid:
                entry["id"] = device.uuid
            if pick.vfs:
                entry["extension"] = {"vfs": [{"minor": minor, "busID": bus}
                                              for minor, bus in pick.vfs]}
            entries.append(entry)
        out[kind] = entries
    return json.dumps(out, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ReadAllocation:
    """A ``device-allocated`` annotation read part by part (:func:`read_allocation`)."""

    allocation: Allocation
    skipped: tuple[str, ...] = ()
    """One message per part left out or counted whole, naming it."""
    whole: tuple[tuple[str, int, str | None], ...] = ()
    """``(type, position in allocation[type], resource)`` whose quantity is unreadable: to be
    charged at the device's total in that resource (``None``: in every resource)."""


def _vfs(raw: object, where: str, skipped: list[str]) -> tuple[tuple[int, str], ...]:
    if raw is None:
        return ()
    vfs = raw.get("vfs") if isinstance(raw, Mapping) else raw
    if vfs is None:
        return ()
    if not isinstance(vfs, list):
        skipped.append(f"{where}: field extension.vfs must be a list; no VF of it is counted")
        return ()
    out = []
    for j, vf in enumerate(vfs):
        bus = vf.get("busID") if isinstance(vf, Mapping) else None
        if not isinstance(bus, str) or not bus:
            skipped.append(f"{where}: extension.vfs[{j}] has no busID; that VF is not counted")
            continue
        minor = vf.get("minor", -1)
        out.append((minor if isinstance(minor, int) and not isinstance(minor, bool) else -1,
                    bus))
    return tuple(out)


def _resources(raw: object, where: str, at: tuple[str, int], skipped: list[str],
               whole: list[tuple[str, int, str | None]]) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        skipped.append(f"{where}: field resources must be a map; the whole device is counted")
        whole.append((*at, None))
        return {}
    resources: dict[str, int] = {}
    legacy: dict[str, int] = {}
    for key, quantity in raw.items():
        name = str(key)
        canonical = DEPRECATED.get(name, name)
        try:
            value = to_int(quantity)
            if value < 0:
                raise ValueError(f"{quantity!r} is negative")
        except (ValueError, TypeError) as exc:
            skipped.append(f"{where}: resources[{name}]: {exc}; the device's whole "
                           f"{canonical} is counted")
            whole.append((*at, canonical))
            continue
        target = legacy if name in DEPRECATED else resources
        target[canonical] = value
    for name, value in legacy.items():
        resources.setdefault(name, value)
    return resources


def read_allocation(text: str) -> ReadAllocation:
    """The annotation as picks, every readable part of it.

    Koordinator's ``GetDeviceAllocations`` unmarshals the whole value and its pod handler
    (``nodeDeviceCache.updatePod``) ignores the pod on any error, freeing every device the pod
    holds. Here only a value that is not a JSON map raises :class:`AllocationError`; a device
    type that is not a list or an entry without an integer minor is left out, a resource whose
    quantity cannot be read (or is negative) is marked to be charged at the device's total, and
    each of these is named in ``skipped``.
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AllocationError(f"not JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise AllocationError("must be a map of device type to allocations")
    out: Allocation = {}
    skipped: list[str] = []
    whole: list[tuple[str, int, str | None]] = []
    for kind, entries in raw.items():
        kind = str(kind)
        if not isinstance(entries, list):
            skipped.append(f"{kind}: must be a list; no {kind} device of it is counted")
            continue
        picks: list[Pick] = []
        for i, entry in enumerate(entries):
            minor = entry.get("minor") if isinstance(entry, Mapping) else None
            if not isinstance(minor, int) or isinstance(minor, bool):
                skipped.append(f"{kind}[{i}]: field minor must be an integer; that entry is not "
                               f"counted")
                continue
            where = f"{kind}[{i}] (minor {minor})"
            resources = _resources(entry.get("resources"), where, (kind, len(picks)), skipped,
                                   whole)
            vfs = _vfs(entry.get("extension"), where, skipped)
            picks.append(Pick(minor, resources, vfs))
        out[kind] = tuple(picks)
    return ReadAllocation(out, tuple(skipped), tuple(whole))


def decode_allocation(text: str) -> Allocation:
    """The annotation back as picks; raises :class:`AllocationError` naming the first problem
    (the node side and ``lahar inspect devices`` take nothing from a broken annotation)."""
    read = read_allocation(text)
    if read.skipped:
        raise AllocationError(read.skipped[0])
    return read.allocation


def charge_whole(allocation: Allocation, whole: tuple[tuple[str, int, str | None], ...],
                 devices: Mapping[tuple[str, int], DeviceInfo]) -> Allocation:
    """``allocation`` with each unreadable quantity replaced by the device's total in it."""
    out = dict(allocation)
    for kind, at, name in whole:
        picks = list(out[kind])
        pick = picks[at]
        device = devices.get((kind, pick.minor))
        total = device.total if device is not None else {}
        resources = dict(pick.resources)
        for resource, value in total.items() if name is None else ((name, total.get(name)),):
            if value:
                resources[resource] = max(resources.get(resource, 0), value)
        picks[at] = Pick(pick.minor, resources, pick.vfs)
        out[kind] = tuple(picks)
    return out


@dataclass(slots=True)
class Ledger:
    """Totals per device, usage per device, and each holder's allocation."""

    spec: NodeDeviceSpec
    used: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    vfs_used: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    holders: dict[str, Allocation] = field(default_factory=dict)
    """Holder key (pod UID, or ``checkpoint/<uid>``) → what it holds."""
    exclusive: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    """Holder → the ``(device type, PCIe root)`` pairs it holds exclusively (PCIeLevel)."""
    devices: dict[tuple[str, int], DeviceInfo] = field(default_factory=dict)
    by_type: dict[str, tuple[DeviceInfo, ...]] = field(default_factory=dict)
    _state: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if not self.devices:
            self.devices = {(d.type, d.minor): d for d in self.spec.devices}
            self.by_type = {kind: tuple(d for d in self.spec.devices if d.type == kind)
                            for kind in TYPES}

    # -- queries --------------------------------------------------------------------------
    def free(self, kind: str, minor: int) -> dict[str, int]:
        device = self.devices.get((kind, minor))
        if device is None:
            return {}
        used = self.used.get((kind, minor), {})
        return {name: max(total - used.get(name, 0), 0) for name, total in device.total.items()}

    def state_key(self) -> tuple[Any, ...]:
        """Everything about usage that a device choice depends on, hashable and free of
        node-specific names (VFs by position, PCIe roots by their devices' minors), so nodes
        of the same shape in the same state share a key."""
        if self._state is None and not self.used and not self.vfs_used and not self.exclusive:
            self._state = ()  # untouched: the most common state by far
        if self._state is None:
            vfs = []
            for (kind, minor), held in sorted(self.vfs_used.items()):
                device = self.devices.get((kind, minor))
                positions = tuple(i for i, vf in enumerate(device.vfs) if vf.bus_id in held) \
                    if device is not None else tuple(sorted(held))
                vfs.append((kind, minor, positions))
            exclusive = sorted({(kind, minor) for pairs in self.exclusive.values()
                                for kind, root in pairs for minor in
                                (d.minor for d in self.by_type.get(kind, ()) if d.pcie == root)})
            self._state = (tuple(sorted((key, tuple(sorted(used.items())))
                                        for key, used in self.used.items())),
                           tuple(vfs), tuple(exclusive))
        return self._state

    def exclusive_roots(self, kind: str) -> set[str]:
        return {root for pairs in self.exclusive.values() for k, root in pairs if k == kind}

    def is_untouched(self, kind: str, minor: int) -> bool:
        used = self.used.get((kind, minor))
        return not used or not any(used.values())

    # The inner dicts and sets are never changed in place (a change replaces them), so a
    # clone shares them with its original: snapshots copy only the outer maps.
    def charge(self, holder: str, allocation: Allocation,
               exclusive: frozenset[tuple[str, str]] = frozenset()) -> None:
        if holder in self.holders:  # idempotent, as Koordinator's allocate set
            return
        self._state = None
        if exclusive:
            self.exclusive[holder] = exclusive
        for kind, picks in allocation.items():
            for pick in picks:
                key = (kind, pick.minor)
                used = dict(self.used.get(key, ()))
                for name, value in pick.resources.items():
                    if value:
                        used[name] = used.get(name, 0) + value
                if used:
                    self.used[key] = used
                if pick.vfs:
                    self.vfs_used[key] = self.vfs_used.get(key, set()) | {
                        bus for _, bus in pick.vfs}
        self.holders[holder] = allocation

    def discharge(self, holder: str) -> Allocation | None:
        allocation = self.holders.pop(holder, None)
        self.exclusive.pop(holder, None)
        if allocation is None:
            return None
        self._state = None
        for kind, picks in allocation.items():
            for pick in picks:
                key = (kind, pick.minor)
                used = dict(self.used.get(key, ()))
                for name, value in pick.resources.items():
                    if value:
                        used[name] = used.get(name, 0) - value
                        if used[name] == 0:
                            del used[name]
                if used:
                    self.used[key] = used
                else:
                    self.used.pop(key, None)
                held = self.vfs_used.get(key)
                if held is not None and pick.vfs:
                    left = held - {bus for _, bus in pick.vfs}
                    if left:
                        self.vfs_used[key] = left
                    else:
                        del self.vfs_used[key]
        return allocation

    def clone(self) -> Ledger:
        return Ledger(spec=self.spec, used=dict(self.used), vfs_used=dict(self.vfs_used),
                      holders=dict(self.holders), exclusive=dict(self.exclusive),
                      devices=self.devices, by_type=self.by_type, _state=self._state)


def whole_gpu_charge(device: DeviceInfo) -> dict[str, int]:
    """What a whole GPU handed out by kubelet (a checkpoint) is charged."""
    total = device.total
    return {GPU_CORE: total.get(GPU_CORE, 100), GPU_MEMORY_RATIO: total.get(GPU_MEMORY_RATIO, 100),
            GPU_MEMORY: total.get(GPU_MEMORY, 0)} if total else {GPU_CORE: 100,
                                                                 GPU_MEMORY_RATIO: 100}


def checkpoint_allocation(ledger: Ledger, minors: Iterable[int]) -> Allocation:
    picks = []
    for minor in minors:
        device = ledger.devices.get((TYPE_GPU, minor))
        if device is not None:
            picks.append(Pick(minor, whole_gpu_charge(device)))
    return {TYPE_GPU: tuple(picks)}
