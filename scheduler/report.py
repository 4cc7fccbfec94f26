"""Rendering ``lahar simulate`` results: a human table, or a ``v1`` ``List`` as JSON/YAML.

The List output is a contract: every object after scheduling (Nodes, Pods with ``nodeName``,
annotations, phase and conditions, PodGroups and Queues with status, PriorityClasses) followed
by the Events, in a stable order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from scheduler.api.node import node_from_object
from scheduler.api.pod import pod_requests
from scheduler.api.resource import CPU, MEMORY, PODS, Resource, format_quantity

__all__ = ["render_list", "render_table"]


def render_list(objects: Sequence[Mapping[str, Any]], *, output: str) -> str:
    document = {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": list(objects)}
    if output == "json":
        return json.dumps(document, indent=2, sort_keys=False) + "\n"
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def _usage(name: str, used: float, total: float) -> str:
    percent = f" ({used / total:.0%})" if total > 0 else ""
    return f"{format_quantity(name, used)}/{format_quantity(name, total)}{percent}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _pending_reason(pod: Mapping[str, Any]) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "")
    return "not scheduled yet"


def render_table(objects: Sequence[Mapping[str, Any]]) -> str:
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(str(obj.get("kind")), []).append(obj)
    pods = by_kind.get("Pod", [])
    placed: dict[str, list[str]] = {}
    used: dict[str, Resource] = {}
    pending: list[Mapping[str, Any]] = []
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        node = spec.get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node:
            pending.append(pod)
            continue
        if phase in ("Succeeded", "Failed"):
            continue
        placed.setdefault(node, []).append(f"{meta.get('namespace', 'default')}/{meta.get('name')}")
        used.setdefault(node, Resource()).add(pod_requests(pod)[0])
    lines: list[str] = []
    rows = [["NODE", "PODS", "CPU", "MEMORY", "OTHER"]]
    for node_obj in by_kind.get("Node", []):
        node = node_from_object(node_obj)
        usage = used.get(node.name, Resource())
        others = [
            f"{name} {_usage(name, usage.get(name), node.allocatable.get(name))}"
            for name in sorted(node.allocatable.scalars)
            if name != PODS
        ]
        rows.append(
            [
                node.name,
                ", ".join(placed.get(node.name, [])) or "-",
                _usage(CPU, usage.milli_cpu, node.allocatable.milli_cpu),
                _usage(MEMORY, usage.memory, node.allocatable.memory),
                "; ".join(others) or "-",
            ]
        )
    lines += _table(rows)
    lines.append("")
    if by_kind.get("Device"):  # fine-grained devices: per device and minor
        from scheduler.inspect_devices import inspect_devices, render_devices_table

        lines.append(render_devices_table(inspect_devices(objects)))
    if pending:
        rows = [["PENDING POD", "PODGROUP", "REASON"]]
        for pod in pending:
            meta = pod.get("metadata") or {}
            group = (meta.get("annotations") or {}).get("scheduling.k8s.io/group-name", "-")
            rows.append(
                [
                    f"{meta.get('namespace', 'default')}/{meta.get('name')}",
                    group,
                    _pending_reason(pod),
                ]
            )
        lines += _table(rows)
    else:
        lines.append("No pending pods.")
    groups = by_kind.get("PodGroup", [])
    if groups:
        lines.append("")
        rows = [["PODGROUP", "QUEUE", "PHASE", "RUNNING", "MIN"]]
        for group in groups:
            meta, spec, status = (
                group["metadata"],
                group.get("spec") or {},
                group.get("status") or {},
            )
            rows.append(
                [
                    f"{meta.get('namespace', 'default')}/{meta['name']}",
                    str(spec.get("queue", "default")),
                    str(status.get("phase", "Pending")),
                    str(status.get("running", 0)),
                    str(spec.get("minMember", 1)),
                ]
            )
        lines += _table(rows)
    return "\n".join(lines) + "\n"
