"""A node's ``Device`` object (``scheduling.koordinator.sh/v1alpha1``) read into plain values.

The object is the single source of what a node offers: every GPU, RDMA NIC and FPGA with its
minor (the ledger key), UUID or PCI address, health, resources and topology (socket, NUMA
node, PCIe root, bus id), RDMA virtual functions and per-device labels. It is read once per
object version; a malformed entry is reported naming node, device index and field and left
out, so one bad entry never hides the node's other devices; a ``spec.devices`` that is not a
list is reported and the node has no devices. An unhealthy device keeps its
place (pods still holding it stay charged) but offers nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.devices.finegrained.names import (
    CHECKPOINTS,
    DEPRECATED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_PARTITIONS,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    LABEL_PARTITION_POLICY,
    TYPE_GPU,
    TYPES,
    UNIT_OF,
)

__all__ = ["DeviceInfo", "NodeDeviceSpec", "VirtualFunction", "format_resource",
           "invalidated", "parse_device_object", "to_int"]

Warn = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class VirtualFunction:
    minor: int
    bus_id: str
    labels: tuple[tuple[str, str], ...] = ()
    """The labels of the VF group it belongs to (matched by a hint's ``vfSelector``)."""


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One physical device of a node as the Device object describes it."""

    type: str
    minor: int
    uuid: str = ""
    healthy: bool = True
    total: Mapping[str, int] = field(default_factory=dict)
    """Resource name → what the device offers; empty when unhealthy."""
    socket: int = -1
    numa: int = -1
    pcie: str = ""
    bus_id: str = ""
    has_topology: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    vfs: tuple[VirtualFunction, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeDeviceSpec:
    """Everything the scheduler reads from one node's Device object."""

    node: str
    devices: tuple[DeviceInfo, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    partitions_text: str = ""
    checkpoint_minors: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Pod UID → GPU minors kubelet handed out without this scheduler (checkpoints)."""

    @property
    def vendor(self) -> str:
        return self.labels.get(LABEL_GPU_VENDOR, "")

    @property
    def model(self) -> str:
        return self.labels.get(LABEL_GPU_MODEL, "")

    @property
    def partition_policy(self) -> str:
        return self.labels.get(LABEL_PARTITION_POLICY, "")


def invalidated(spec: NodeDeviceSpec) -> NodeDeviceSpec:
    """``spec`` with every device unhealthy (offering nothing), kept for its pods' usage."""
    return replace(spec, devices=tuple(replace(d, healthy=False, total={})
                                       for d in spec.devices), checkpoint_minors={})


def to_int(raw: object) -> int:
    """A quantity as a whole number of base units (fractions are cut, as Go's Value())."""
    if isinstance(raw, str) and raw.isdigit():  # the common case, without Decimal
        return int(raw)
    return int(parse_quantity(raw))  # type: ignore[arg-type]


def format_resource(name: str, value: int) -> str:
    """A value as Go's resource.Quantity prints it: memory in BinarySI, the rest plain."""
    if name == GPU_MEMORY and value:
        for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30),
                               ("Mi", 2**20), ("Ki", 2**10)):
            if value % factor == 0:
                return f"{value // factor}{suffix}"
    return str(value)


def _resources(raw: object, *, kind: str, where: str, warn: Warn) -> dict[str, int]:
    out: dict[str, int] = {}
    legacy: dict[str, int] = {}
    if not isinstance(raw, Mapping):
        return out
    for name, quantity in raw.items():
        try:
            value = to_int(quantity)
        except (QuantityError, TypeError, ValueError):
            warn(f"{where}: field resources[{name}]: {quantity!r} is not a quantity; "
                 f"the device offers none of it")
            continue
        new = DEPRECATED.get(str(name))
        (legacy if new else out)[new or str(name)] = max(value, 0)
    for name, value in legacy.items():
        out.setdefault(name, value)  # the new spelling wins
    if kind == TYPE_GPU and out:
        out.setdefault(GPU_CORE, 100)
        out.setdefault(GPU_MEMORY_RATIO, 100)
        out.setdefault(GPU_MEMORY, 0)
    elif kind in UNIT_OF:
        out = {UNIT_OF[kind]: out.get(UNIT_OF[kind], 100)}
    return out


def _int_field(raw: Mapping[str, Any], key: str, default: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"field {key}: must be an integer, got {value!r}")
    return value


def _vfs(raw: object, where: str, warn: Warn) -> tuple[VirtualFunction, ...]:
    out: list[VirtualFunction] = []
    for g, group in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(group, Mapping):
            continue
        labels = tuple(sorted((str(k), str(v)) for k, v in (group.get("labels") or {}).items()))
        for v, vf in enumerate(group.get("vfs") or []):
            if not isinstance(vf, Mapping) or not isinstance(vf.get("busID"), str):
                warn(f"{where}: field vfGroups[{g}].vfs[{v}].busID: a VF needs a bus id")
                continue
            minor = vf.get("minor", -1)
            out.append(VirtualFunction(minor if isinstance(minor, int) else -1,
                                       vf["busID"], labels))
    return tuple(out)


def _device(raw: object, where: str, warn: Warn) -> DeviceInfo | None:
    if not isinstance(raw, Mapping):
        warn(f"{where}: must be a map")
        return None
    kind = raw.get("type")
    if kind not in TYPES:
        warn(f"{where}: field type: {kind!r} is not one of {', '.join(TYPES)}; skipped")
        return None
    minor = raw.get("minor")
    if isinstance(minor, bool) or not isinstance(minor, int):
        warn(f"{where}: field minor: a {kind} device needs an integer minor, got {minor!r}; "
             f"skipped")
        return None
    healthy = raw.get("health") is True
    total = _resources(raw.get("resources"), kind=str(kind), where=where, warn=warn)
    topology = raw.get("topology")
    socket, numa, pcie, bus, has_topology = -1, -1, "", "", False
    if isinstance(topology, Mapping):
        try:
            socket = _int_field(topology, "socketID", -1)
            numa = _int_field(topology, "nodeID", -1)
        except ValueError as exc:
            warn(f"{where}: topology {exc}; the device is treated as having no topology")
        else:
            pcie = str(topology.get("pcieID") or "")
            bus = str(topology.get("busID") or "")
            has_topology = bool(pcie)
    raw_labels = raw.get("labels")
    labels: Mapping[str, Any] = raw_labels if isinstance(raw_labels, Mapping) else {}
    return DeviceInfo(
        type=str(kind), minor=minor, uuid=str(raw.get("id") or ""), healthy=healthy,
        total=total if healthy else {}, socket=socket, numa=numa, pcie=pcie, bus_id=bus,
        has_topology=has_topology, labels={str(k): str(v) for k, v in labels.items()},
        vfs=_vfs(raw.get("vfGroups"), where, warn))


def _checkpoints(text: str, devices: tuple[DeviceInfo, ...], node: str,
                 warn: Warn) -> dict[str, tuple[int, ...]]:
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        warn(f"Device {node}: annotation {CHECKPOINTS} is not JSON ({exc}); ignored")
        return {}
    by_uuid = {d.uuid: d.minor for d in devices if d.type == TYPE_GPU and d.uuid}
    out: dict[str, list[int]] = {}
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, Mapping):
            continue
        for device_id in entry.get("deviceIDs") or []:
            minor = by_uuid.get(str(device_id))
            if minor is None:
                warn(f"Device {node}: annotation {CHECKPOINTS}[{i}] names GPU {device_id} "
                     f"that the node does not report; ignored")
                continue
            out.setdefault(str(entry.get("podUID", "")), []).append(minor)
    return {uid: tuple(sorted(set(minors))) for uid, minors in out.items()}


def parse_device_object(obj: Mapping[str, Any], warn: Warn) -> NodeDeviceSpec:
    """The Device object as values; problems go to ``warn`` and the bad part is left out."""
    meta = obj.get("metadata") or {}
    node = str(meta.get("name") or "")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        warn(f"Device {node}: field spec: must be a map, got {type(spec).__name__}; "
             "the node is treated as having no devices")
        spec = {}
    raw_devices = spec.get("devices")
    if raw_devices is not None and not isinstance(raw_devices, list):
        warn(f"Device {node}: field spec.devices: must be a list of devices, got "
             f"{type(raw_devices).__name__}; the node is treated as having no devices")
        raw_devices = []
    devices: list[DeviceInfo] = []
    seen: set[tuple[str, int]] = set()
    for i, raw in enumerate(raw_devices or []):
        device = _device(raw, f"Device {node}: spec.devices[{i}]", warn)
        if device is None:
            continue
        if (device.type, device.minor) in seen:
            warn(f"Device {node}: spec.devices[{i}]: field minor: {device.type} minor "
                 f"{device.minor} appears twice; the later entry is skipped")
            continue
        seen.add((device.type, device.minor))
        devices.append(device)
    devices.sort(key=lambda d: (d.type, d.minor))
    annotations: Mapping[str, Any] = meta.get("annotations") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    checkpoints = annotations.get(CHECKPOINTS, "")
    return NodeDeviceSpec(
        node=node, devices=tuple(devices), labels=labels,
        partitions_text=str(annotations.get(GPU_PARTITIONS, "")),
        checkpoint_minors=_checkpoints(checkpoints, tuple(devices), node, warn)
        if checkpoints else {})

