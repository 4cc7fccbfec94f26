"""What a placed vGPU pod holds, in resource terms, read from its device annotation.

A vGPU pod's requests do not say what it holds: a percentage request or no memory request at
all (the whole card) becomes MiB only when cards are chosen, and the chosen MiB and cores are
what the node side enforces. The durable device annotation (``vgpu-ids-new`` /
``hami.io/vgpu-devices-allocated``, else ``devices-to-allocate``) is therefore the record of
use, as in HAMi and Volcano (``AddQueueResource`` decodes it for queue ``status.allocated``;
the scheduler's ledger is rebuilt from it). ``lahar simulate``'s node table reads it through
here and ``lahar inspect gpushare`` reads it per card, so the two agree with each other and
with what the scheduler charged.

:func:`vgpu_record` is the one reading rule: entry by entry (a bad entry is left out, the
others count, as Volcano's ``decodeContainerDevices`` does), from the durable annotation, or
from ``devices-to-allocate`` when the durable one is absent or has no readable entry at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.devices.codec import HeldDevices, read_pod_devices
from scheduler.devices.names import PROFILES, VGpuNames

__all__ = ["VGpuHeld", "VGpuRecord", "vgpu_held", "vgpu_record"]


@dataclass(frozen=True, slots=True)
class VGpuRecord:
    """The vGPU annotation a pod's usage is read from, and what reading it found."""

    key: str
    """The annotation counted; "" when none has a readable entry."""
    held: HeldDevices
    unreadable: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Annotations present but without one readable entry: (key, why each entry failed)."""


def vgpu_record(annotations: Mapping[str, str], names: VGpuNames) -> VGpuRecord | None:
    """The devices a pod's annotations record under ``names``; None when it records none."""
    unreadable: list[tuple[str, tuple[str, ...]]] = []
    for key in (names.allocated, names.to_allocate):
        text = annotations.get(key)
        if not text:
            continue
        held = read_pod_devices(str(text), terminated=names.profile == "hami")
        if held.devices or not held.skipped:
            return VGpuRecord(key=key, held=held, unreadable=tuple(unreadable))
        unreadable.append((key, held.skipped))
    if not unreadable:
        return None
    return VGpuRecord(key="", held=HeldDevices((), ()), unreadable=tuple(unreadable))


@dataclass(frozen=True, slots=True)
class VGpuHeld:
    """The vGPUs of one pod under one naming profile: slots, MiB and % cores, summed."""

    names: VGpuNames
    devices: int
    memory: int
    cores: int

    def quantities(self, *, with_count: bool = True) -> dict[str, float]:
        """Scalar values in the resource model's unit (milli), keyed by the profile's names."""
        out = {self.names.memory: self.memory * 1000.0, self.names.cores: self.cores * 1000.0}
        if with_count:
            out[self.names.count] = self.devices * 1000.0
        return out


def vgpu_held(annotations: Mapping[str, str], names: VGpuNames | None = None) -> VGpuHeld | None:
    """The vGPUs a pod's annotations record (under ``names``, else whichever profile's
    annotation is present), read as :func:`vgpu_record` reads it; None when none is recorded
    or nothing of it can be read (the ledger reports the bad entries by name)."""
    for profile in (names,) if names is not None else tuple(PROFILES.values()):
        record = vgpu_record(annotations, profile)
        if record is None:
            continue
        if not record.key:
            return None
        devices = record.held.devices
        return VGpuHeld(names=profile, devices=len(devices),
                        memory=sum(d.memory for d in devices), cores=sum(d.cores for d in devices))
    return None
