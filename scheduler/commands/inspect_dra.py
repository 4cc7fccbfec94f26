"""``lahar inspect dra``: Dynamic Resource Allocation devices per node, and who holds them.

Reads ResourceSlices and ResourceClaims (``resource.k8s.io/v1``) from manifest files
(``lahar simulate -o yaml`` output, ``kubectl get resourceslices,resourceclaims -o yaml``) or
from a live cluster. Per node and device: the driver and pool, the device's capacity, the
claims allocated it (with the pods each claim is reserved for) and, for a device shared by
several claims (``allowMultipleAllocations``), the capacity those claims consume. Devices of
slices that serve several nodes are listed under ``(network)``. ``lahar simulate``'s table
shows the per-pod part (:func:`pod_device_rows`). An object that cannot be read becomes a
warning naming it; it never stops the report.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from scheduler.api.resource import parse_quantity
from scheduler.commands.inspect import add_cluster_arguments, run_inspect
from scheduler.commands.tables import table_lines

__all__ = ["DraDevice", "DraReport", "add_inspect_dra", "inspect_dra", "pod_device_rows",
           "render_dra_table", "report_json"]

Obj = Mapping[str, Any]
_DRA = "/apis/resource.k8s.io/v1"
NETWORK = "(network)"


@dataclass(slots=True)
class DraDevice:
    node: str
    driver: str
    pool: str
    name: str
    capacity: dict[str, Decimal]
    shared: bool
    holders: list[tuple[str, str, dict[str, Decimal]]] = field(default_factory=list)
    """(claim, pods it is reserved for, capacity it consumes) per claim allocated here."""

    def consumed(self) -> dict[str, Decimal]:
        total: dict[str, Decimal] = {}
        for _, _, used in self.holders:
            for name, value in used.items():
                total[name] = total.get(name, Decimal(0)) + value
        return total


@dataclass(slots=True)
class DraReport:
    devices: list[DraDevice] = field(default_factory=list)
    unknown: list[tuple[str, str]] = field(default_factory=list)
    """(claim, ``driver/pool/device``) of allocations naming no published device."""
    warnings: list[str] = field(default_factory=list)


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _quantity(value: Any) -> Decimal:
    if isinstance(value, Mapping):
        value = value.get("value")
    return parse_quantity(str(value))


def _slice_devices(obj: Obj, report: DraReport) -> list[DraDevice]:
    spec = obj.get("spec") or {}
    node = str(spec.get("nodeName") or NETWORK)
    driver = str(spec.get("driver") or "")
    pool = str((spec.get("pool") or {}).get("name") or "")
    out: list[DraDevice] = []
    for device in spec.get("devices") or []:
        try:
            capacity = {str(k): _quantity(v) for k, v in (device.get("capacity") or {}).items()}
        except (ValueError, ArithmeticError, AttributeError) as exc:
            report.warnings.append(f"ResourceSlice {_meta(obj).get('name')}: device "
                                   f"{device.get('name')!r}: unreadable capacity ({exc})")
            capacity = {}
        out.append(DraDevice(node=node, driver=driver, pool=pool, name=str(device.get("name")),
                             capacity=capacity,
                             shared=bool(device.get("allowMultipleAllocations"))))
    return out


def _claim_key(obj: Obj) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def claim_results(obj: Obj) -> list[Obj]:
    """The allocation results of a claim (empty while it is not allocated)."""
    allocation = (obj.get("status") or {}).get("allocation") or {}
    return [r for r in (allocation.get("devices") or {}).get("results") or []
            if isinstance(r, Mapping)]


def _reserved(obj: Obj) -> str:
    names = [str(r.get("name")) for r in (obj.get("status") or {}).get("reservedFor") or []
             if isinstance(r, Mapping)]
    return ", ".join(names) or "-"


def inspect_dra(objects: Iterable[Obj]) -> DraReport:
    report = DraReport()
    objects = list(objects)
    by_id: dict[tuple[str, str, str], DraDevice] = {}
    for obj in objects:
        if obj.get("kind") == "ResourceSlice":
            for device in _slice_devices(obj, report):
                report.devices.append(device)
                by_id[(device.driver, device.pool, device.name)] = device
    for obj in objects:
        if obj.get("kind") != "ResourceClaim":
            continue
        for result in claim_results(obj):
            ident = (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            try:
                used = {str(k): _quantity(v)
                        for k, v in (result.get("consumedCapacity") or {}).items()}
            except (ValueError, ArithmeticError) as exc:
                report.warnings.append(f"ResourceClaim {_claim_key(obj)}: unreadable "
                                       f"consumedCapacity ({exc})")
                used = {}
            held = by_id.get(ident)
            if held is None:
                report.unknown.append((_claim_key(obj), "/".join(ident)))
                continue
            held.holders.append((_claim_key(obj), _reserved(obj), used))
    report.devices.sort(key=lambda d: (d.node == NETWORK, d.node, d.driver, d.pool, d.name))
    return report


_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity_text(value: Decimal) -> str:
    """``40Gi`` for a whole number of binary units, else the plain number."""
    for suffix, unit in _BINARY:
        if value >= unit and value % unit == 0:
            return f"{int(value // unit)}{suffix}"
    return f"{value.normalize():f}"


def _amounts(values: Mapping[str, Decimal]) -> str:
    return ", ".join(f"{name} {quantity_text(value)}" for name, value in sorted(values.items()))


def render_dra_table(report: DraReport) -> str:
    rows = [["NODE", "DEVICE", "CAPACITY", "CONSUMED", "CLAIMS (RESERVED FOR)"]]
    for device in report.devices:
        if device.shared:
            consumed = device.consumed()
            used = ", ".join(f"{name} {quantity_text(consumed.get(name, Decimal(0)))}/"
                             f"{quantity_text(total)}"
                             for name, total in sorted(device.capacity.items())) or "-"
        else:
            used = "all" if device.holders else "-"
        holders = "; ".join(f"{claim} ({pods})" for claim, pods, _ in device.holders) or "-"
        rows.append([device.node, f"{device.driver}/{device.pool}/{device.name}"
                     + (" (shared)" if device.shared else ""),
                     _amounts(device.capacity) or "-", used, holders])
    lines = table_lines(rows) if report.devices else ["No DRA devices."]
    for claim, ident in report.unknown:
        lines.append(f"claim {claim} holds {ident}, which no ResourceSlice publishes")
    return "\n".join(lines) + "\n"


def report_json(report: DraReport) -> dict[str, Any]:
    return {
        "devices": [{
            "node": d.node, "driver": d.driver, "pool": d.pool, "device": d.name,
            "shared": d.shared,
            "capacity": {k: str(v.normalize()) for k, v in d.capacity.items()},
            "consumed": {k: str(v.normalize()) for k, v in d.consumed().items()},
            "claims": [{"claim": c, "reservedFor": p,
                        "consumed": {k: str(v.normalize()) for k, v in u.items()}}
                       for c, p, u in d.holders],
        } for d in report.devices],
        "unknown": [{"claim": c, "device": i} for c, i in report.unknown],
        "warnings": list(report.warnings),
    }


def _text(value: Any) -> str:
    try:
        return quantity_text(_quantity(value))
    except (ValueError, ArithmeticError):
        return str(value)


def pod_device_rows(objects: Iterable[Obj]) -> list[list[str]]:
    """``[pod, claim, devices]`` rows of the bound pods that hold claims (simulate's table)."""
    objects = list(objects)
    claims = {_claim_key(o): o for o in objects if o.get("kind") == "ResourceClaim"}
    rows: list[list[str]] = []
    for pod in objects:
        if pod.get("kind") != "Pod" or not (pod.get("spec") or {}).get("nodeName"):
            continue
        meta = _meta(pod)
        namespace = str(meta.get("namespace") or "default")
        generated = {str(s.get("name")): str(s.get("resourceClaimName") or "")
                     for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
                     if isinstance(s, Mapping)}
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            if not isinstance(entry, Mapping):
                continue
            source = entry["source"] if isinstance(entry.get("source"), Mapping) else entry
            name = str(source.get("resourceClaimName") or generated.get(str(entry.get("name")))
                       or "")
            claim = claims.get(f"{namespace}/{name}")
            devices = []
            for result in claim_results(claim) if claim is not None else []:
                used = result.get("consumedCapacity") or {}
                text = f"{result.get('pool')}/{result.get('device')}"
                if used:
                    text += " (" + ", ".join(f"{k} {_text(v)}" for k, v in sorted(used.items())) \
                        + ")"
                devices.append(text)
            rows.append([f"{namespace}/{meta.get('name')}", name or "-",
                         ", ".join(devices) or "not allocated"])
    return rows


def add_inspect_dra(sub: Any) -> None:
    """Register ``inspect dra`` beside the other ``lahar inspect`` reports."""
    inspect = sub.choices.get("inspect")
    if inspect is None:
        inspect = sub.add_parser("inspect", help="show cluster state read from annotations")
        inspect.add_subparsers(dest="inspect_command", required=True)
    inspect_sub = next(action for action in inspect._actions
                       if isinstance(action, argparse._SubParsersAction))
    parser = inspect_sub.add_parser(
        "dra", help="Dynamic Resource Allocation: per node the ResourceSlices' devices, the "
                    "claims holding each and the capacity shared devices give out")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="YAML/JSON manifests or v1 Lists (e.g. lahar simulate -o yaml)")
    add_cluster_arguments(parser, "ResourceSlices and ResourceClaims")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="a table per device, or the report as JSON (default: table)")
    parser.set_defaults(func=_inspect_dra)


def _inspect_dra(args: argparse.Namespace) -> int:
    return run_inspect(args, collections=((f"{_DRA}/resourceslices", "ResourceSlice"),
                                          (f"{_DRA}/resourceclaims", "ResourceClaim")),
                       build=inspect_dra, to_json=report_json, to_table=render_dra_table)
