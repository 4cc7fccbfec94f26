"""The explicit registry of device families and what the cache needs from them.

Which families exist is configuration: :func:`enabled_families` turns a :class:`DeviceConfig`
into family objects, and the helpers below derive the cache's options from them (the builder of
``NodeInfo.others``, the resource names the generic model ignores, the per-node dimensions the
node table keeps). Nothing registers itself at import time, and a family's module is imported
only when the conf switches it on: the fine-grained family alone (numpy columns, placement
policies) is a sixth of the imports ``lahar run`` makes before its first cycle, and a
cluster without devices never needs it. Switching families needs a restart (the cache is built
with them), so importing at build time loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.api.node import NodeInfo
from scheduler.devices.base import DeviceConfig, DeviceFamily, Reporter

__all__ = ["DEVICES", "FamilyEntry", "NodeDevicesBuilder", "enabled_families"]


@dataclass(frozen=True, slots=True)
class FamilyEntry:
    """How to tell from the conf whether a family is on, and how to build it."""

    enabled: Callable[[DeviceConfig], bool]
    build: Callable[[DeviceConfig, Reporter], DeviceFamily]


def _gpushare(config: DeviceConfig, reporter: Reporter) -> DeviceFamily:
    from scheduler.devices.gpushare import GpuShareFamily

    return GpuShareFamily(config, reporter)


def _vgpu(config: DeviceConfig, reporter: Reporter) -> DeviceFamily:
    from scheduler.devices.vgpu_family import VGpuFamily

    return VGpuFamily(config, reporter)


def _finegrained(config: DeviceConfig, reporter: Reporter) -> DeviceFamily:
    from scheduler.devices.finegrained.family import FineGrainedFamily

    return FineGrainedFamily(config, reporter)


DEVICES: dict[str, FamilyEntry] = {
    "GpuShare": FamilyEntry(enabled=lambda config: config.gpu_sharing or config.gpu_number,
                            build=_gpushare),
    "hamivgpu": FamilyEntry(enabled=lambda config: config.vgpu, build=_vgpu),
    "FineGrained": FamilyEntry(enabled=lambda config: config.finegrained, build=_finegrained),
}
"""Device family name (the key in ``NodeInfo.others``) → its registry entry."""


def enabled_families(config: DeviceConfig, reporter: Reporter | None = None) -> list[DeviceFamily]:
    """The families the conf switches on, in registry order."""
    reporter = reporter or Reporter()
    return [entry.build(config, reporter) for entry in DEVICES.values() if entry.enabled(config)]


class NodeDevicesBuilder:
    """``NodeInfo`` → ``{family name: ledger}`` for the families that node offers."""

    def __init__(self, families: Sequence[DeviceFamily]) -> None:
        self.families = list(families)

    def __call__(self, node: NodeInfo, device_object: Mapping[str, Any] | None = None
                 ) -> dict[str, Any]:
        """``device_object`` is the node's Koordinator ``Device`` object, if any."""
        out: dict[str, Any] = {}
        for family in self.families:
            devices: Any
            if family.NAME == "FineGrained":  # the one family fed the Device object
                build: Any = family.build
                devices = build(node, device_object)
            else:
                devices = family.build(node)
            if devices is not None:
                out[family.NAME] = devices
        return out

    @property
    def ignored_resources(self) -> frozenset[str]:
        return frozenset().union(*(f.ignored_resources for f in self.families))

    @property
    def device_dims(self) -> frozenset[str]:
        return frozenset().union(*(f.resource_dims for f in self.families))
