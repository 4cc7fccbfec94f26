"""One node's DRA pool as ResourceSlice objects (``resource.k8s.io/v1``), built without I/O.

The pool is named after the node and holds every device :mod:`.devices` lists. As the API
requires, shared counters (the MIG cards' counter sets, at most 8 per slice) live in slices of
their own, apart from the devices; devices go at most 128 to a slice, 64 when any of them has
taints or consumes counters. Every slice carries the pool's ``generation`` and
``resourceSliceCount``, ``nodeName`` and the driver; names are deterministic
(``<node>-<driver>-<n>``) so a restarted agent finds and replaces its own slices, and each is
owned by the Node (when its UID is known) so deleting the Node deletes them.

An unhealthy device is published with a ``NoSchedule`` taint ``<driver>/unhealthy`` when
``device_taints`` is on (the DRADeviceTaints gate: the scheduler then skips it unless a claim
tolerates the taint), and left out of the pool otherwise, as kubelet plugins do without the
gate.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from scheduler.devices.node.dra.devices import (
    MigLayout,
    counter_sets,
    device_wire,
    dra_devices,
)
from scheduler.devices.node.inventory import Inventory

__all__ = [
    "API_VERSION",
    "DEFAULT_DRIVER",
    "MAX_COUNTER_SETS",
    "MAX_DEVICES",
    "MAX_DEVICES_TAINTED",
    "PoolSpec",
    "build_slices",
    "slice_name",
    "unhealthy_taint",
]

API_VERSION = "resource.k8s.io/v1"
DEFAULT_DRIVER = "gpu.lahar.dev"
MAX_DEVICES = 128
"""resourceapi.ResourceSliceMaxDevices."""
MAX_DEVICES_TAINTED = 64
"""ResourceSliceMaxDevicesWithTaintsOrConsumesCounters."""
MAX_COUNTER_SETS = 8
"""ResourceSliceMaxCounterSets."""
_NAME_MAX = 253


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """What is the same for every slice of the node's pool."""

    node_name: str
    driver: str = DEFAULT_DRIVER
    mode: str = "exclusive"
    device_taints: bool = False
    node_uid: str = ""


def slice_name(node_name: str, driver: str, index: int) -> str:
    suffix = f"-{driver}-{index}"
    return f"{node_name[:_NAME_MAX - len(suffix)]}{suffix}"


def unhealthy_taint(driver: str) -> dict[str, str]:
    return {"key": f"{driver}/unhealthy", "value": "true", "effect": "NoSchedule"}


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def build_slices(spec: PoolSpec, inventory: Inventory, *, generation: int,
                 mig: MigLayout | None = None,
                 unhealthy: Collection[str] = ()) -> list[dict[str, Any]]:
    """The pool's slices at ``generation``. ``unhealthy`` names devices to treat as
    unhealthy on top of the inventory's health (a card's MIG instances follow the card)."""
    devices = []
    for device in dra_devices(inventory, mig):
        parent = f"gpu-{device.gpu.minor}" if device.gpu is not None else ""
        sick = not device.healthy or device.name in unhealthy or parent in unhealthy
        if sick and not spec.device_taints:
            continue
        wire = device_wire(device, mode=spec.mode, driver_version=inventory.driver, mig=mig)
        if sick:
            wire["taints"] = [unhealthy_taint(spec.driver)]
        devices.append(wire)
    heavy = any("taints" in d or "consumesCounters" in d for d in devices)
    device_chunks = _chunks(devices, MAX_DEVICES_TAINTED if heavy else MAX_DEVICES)
    counter_chunks = _chunks(counter_sets(inventory, mig), MAX_COUNTER_SETS)
    bodies: list[dict[str, Any]] = [{"sharedCounters": c} for c in counter_chunks]
    bodies += [{"devices": c} for c in device_chunks] or [{"devices": []}]
    owner = ([{"apiVersion": "v1", "kind": "Node", "name": spec.node_name,
               "uid": spec.node_uid, "controller": True}] if spec.node_uid else [])
    out = []
    for index, body in enumerate(bodies):
        meta: dict[str, Any] = {"name": slice_name(spec.node_name, spec.driver, index)}
        if owner:
            meta["ownerReferences"] = owner
        out.append({"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": meta,
                    "spec": {"driver": spec.driver, "nodeName": spec.node_name,
                             "pool": {"name": spec.node_name, "generation": generation,
                                      "resourceSliceCount": len(bodies)},
                             **body}})
    return out
