"""``lahar inspect devices``: fine-grained device usage per node, device and minor.

Reads Koordinator ``Device`` objects and pods' ``scheduling.koordinator.sh/device-allocated``
annotations — the same data that rebuilds the scheduler's ledger after a restart — from
manifest files (``lahar simulate -o yaml`` output, ``kubectl get devices,pods -o yaml``) or
from a live cluster. Per node, device type and minor it shows what the device offers, what is
used and free in every dimension, which pods hold it, the virtual functions in use and the
PCIe root / NUMA node it sits on; unhealthy devices are marked. An object that cannot be read
becomes a warning naming it; it never stops the report.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.commands.inspect import add_cluster_arguments, run_inspect
from scheduler.commands.tables import table_lines
from scheduler.devices.finegrained.ledger import (
    AllocationError,
    Ledger,
    decode_allocation,
)
from scheduler.devices.finegrained.model import format_resource, parse_device_object
from scheduler.devices.finegrained.names import (
    ALLOCATED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
)

__all__ = ["DeviceRow", "DevicesReport", "add_inspect_devices", "inspect_devices",
           "render_devices_table", "report_json"]

Obj = Mapping[str, Any]
DEVICES_PATH = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
_SHORT = {GPU_CORE: "core", GPU_MEMORY: "mem", GPU_MEMORY_RATIO: "ratio"}


@dataclass(slots=True)
class DeviceRow:
    node: str
    type: str
    minor: int
    id: str
    healthy: bool
    numa: int
    pcie: str
    bus_id: str
    total: dict[str, int]
    used: dict[str, int]
    vfs_total: int
    vfs_used: list[str]
    pods: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    present: bool = True
    """False for a minor a pod holds that the Device object no longer lists."""

    @property
    def free(self) -> dict[str, int]:
        return {name: max(total - self.used.get(name, 0), 0)
                for name, total in self.total.items()}


@dataclass(slots=True)
class DevicesReport:
    rows: list[DeviceRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def inspect_devices(objects: Iterable[Obj]) -> DevicesReport:
    report = DevicesReport()
    devices: dict[str, Obj] = {}
    pods_by_node: dict[str, list[Obj]] = {}
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Device":
            devices[str((obj.get("metadata") or {}).get("name", ""))] = obj
        elif kind == "Pod":
            node = (obj.get("spec") or {}).get("nodeName")
            phase = (obj.get("status") or {}).get("phase")
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if node and phase not in ("Succeeded", "Failed") and ALLOCATED in annotations:
                pods_by_node.setdefault(str(node), []).append(obj)
    for node in sorted(devices):
        spec = parse_device_object(devices[node], report.warnings.append)
        ledger = Ledger(spec)
        held: dict[tuple[str, int], list[tuple[str, dict[str, int]]]] = {}
        for pod in pods_by_node.get(node, []):
            text = pod["metadata"]["annotations"][ALLOCATED]
            try:
                allocation = decode_allocation(text)
            except AllocationError as exc:
                report.warnings.append(f"pod {_key(pod)} on node {node}: unreadable {ALLOCATED} "
                                       f"annotation ({exc}); its usage is not counted")
                continue
            ledger.charge(_key(pod), allocation)
            for kind, picks in allocation.items():
                for pick in picks:
                    held.setdefault((kind, pick.minor), []).append((_key(pod),
                                                                    dict(pick.resources)))
        listed = {(d.type, d.minor) for d in spec.devices}
        for device in spec.devices:
            key = (device.type, device.minor)
            report.rows.append(DeviceRow(
                node=node, type=device.type, minor=device.minor, id=device.uuid,
                healthy=device.healthy, numa=device.numa, pcie=device.pcie,
                bus_id=device.bus_id, total=dict(device.total),
                used=dict(ledger.used.get(key, {})), vfs_total=len(device.vfs),
                vfs_used=sorted(ledger.vfs_used.get(key, set())), pods=held.get(key, [])))
        for key in sorted(set(held) - listed):
            report.warnings.append(f"node {node}: pods hold {key[0]} minor {key[1]} that the "
                                   f"Device object does not list; it stays charged")
            report.rows.append(DeviceRow(
                node=node, type=key[0], minor=key[1], id="", healthy=False, numa=-1, pcie="",
                bus_id="", total={}, used=dict(ledger.used.get(key, {})), vfs_total=0,
                vfs_used=sorted(ledger.vfs_used.get(key, set())), pods=held[key],
                present=False))
    return report


def _amounts(row: DeviceRow) -> str:
    names = sorted(set(row.total) | set(row.used))
    return ", ".join(
        f"{_SHORT.get(name, name.split('/')[-1])} {format_resource(name, row.used.get(name, 0))}"
        f"/{format_resource(name, row.total.get(name, 0))}" for name in names) or "-"


def render_devices_table(report: DevicesReport) -> str:
    if not report.rows:
        return "No fine-grained devices found (no Koordinator Device object lists any).\n"
    rows = [["NODE", "DEVICE", "NUMA", "PCIE", "USED/TOTAL", "VFS", "PODS"]]
    for row in report.rows:
        state = "" if row.healthy else (" (gone)" if not row.present else " (unhealthy)")
        rows.append([
            row.node, f"{row.type}{row.minor}{state}", str(row.numa) if row.numa >= 0 else "-",
            row.pcie or "-", _amounts(row),
            f"{len(row.vfs_used)}/{row.vfs_total}" if row.vfs_total or row.vfs_used else "-",
            ", ".join(pod for pod, _ in row.pods) or "-"])
    return "\n".join(table_lines(rows)) + "\n"


def report_json(report: DevicesReport) -> dict[str, Any]:
    nodes: dict[str, list[dict[str, Any]]] = {}
    for row in report.rows:
        nodes.setdefault(row.node, []).append({
            "type": row.type, "minor": row.minor, "id": row.id, "healthy": row.healthy,
            "listed": row.present, "numa": row.numa, "pcie": row.pcie, "busID": row.bus_id,
            "total": row.total, "used": row.used, "free": row.free,
            "vfs": {"total": row.vfs_total, "used": row.vfs_used},
            "pods": [{"pod": pod, "resources": resources} for pod, resources in row.pods]})
    return {"nodes": [{"name": name, "devices": rows} for name, rows in nodes.items()],
            "warnings": list(report.warnings)}


# -- command line --------------------------------------------------------------------------
def add_inspect_devices(sub: Any) -> None:
    """Register ``inspect devices`` beside the other ``lahar inspect`` reports."""
    inspect = sub.choices.get("inspect")
    if inspect is None:
        inspect = sub.add_parser("inspect", help="show cluster state read from annotations")
        inspect.add_subparsers(dest="inspect_command", required=True)
    inspect_sub = next(action for action in inspect._actions
                       if isinstance(action, argparse._SubParsersAction))
    parser = inspect_sub.add_parser(
        "devices", help="fine-grained devices (Koordinator Device objects): used/free per "
                        "device and minor, and the pods holding each")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="YAML/JSON manifests or v1 Lists (e.g. lahar simulate -o yaml)")
    add_cluster_arguments(parser, "Devices and Pods")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="a table per device and minor, or the report as JSON "
                             "(default: table)")
    parser.set_defaults(func=_inspect_devices)


def _inspect_devices(args: argparse.Namespace) -> int:
    return run_inspect(args, collections=((DEVICES_PATH, "Device"), ("/api/v1/pods", "Pod")),
                       build=inspect_devices, to_json=report_json,
                       to_table=render_devices_table)
