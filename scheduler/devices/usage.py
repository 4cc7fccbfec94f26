"""What a placed vGPU pod holds, in resource terms, read from its device annotation.

A vGPU pod's requests do not say what it holds: a percentage request or no memory request at
all (the whole card) becomes MiB only when cards are chosen, and the chosen MiB and cores are
what the node side enforces. The durable device annotation (``vgpu-ids-new`` /
``hami.io/vgpu-devices-allocated``, else ``devices-to-allocate``) is therefore the record of
use, as in HAMi and Volcano (``AddQueueResource`` decodes it for queue ``status.allocated``;
the scheduler's ledger is rebuilt from it). ``lahar simulate``'s node table reads it through
here and ``lahar inspect gpushare`` reads it per card, so the two agree with each other and
with what the scheduler charged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.devices.codec import CodecError, decode_pod_devices
from scheduler.devices.names import PROFILES, VGpuNames

__all__ = ["VGpuHeld", "vgpu_held"]


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
    annotation is present); None when none is recorded or it cannot be read (the ledger and
    ``lahar inspect`` report the unreadable annotation by name)."""
    for profile in (names,) if names is not None else tuple(PROFILES.values()):
        text = annotations.get(profile.allocated) or annotations.get(profile.to_allocate)
        if not text:
            continue
        try:
            containers = decode_pod_devices(str(text), terminated=profile.profile == "hami")
        except CodecError:
            return None
        devices = [device for container in containers for device in container]
        return VGpuHeld(names=profile, devices=len(devices),
                        memory=sum(d.memory for d in devices), cores=sum(d.cores for d in devices))
    return None
