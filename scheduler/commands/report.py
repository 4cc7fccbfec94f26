"""Rendering ``lahar simulate`` results: a human table, or a ``v1`` ``List`` as JSON/YAML.

The List output is a contract: every object after scheduling (Nodes, Pods with ``nodeName``,
annotations, phase and conditions, PodGroups and Queues with status, PriorityClasses) followed
by the Events, in a stable order. It is written item by item, so a cluster of tens of thousands
of pods never exists a second time as one big string; YAML goes through libyaml's emitter when
PyYAML has it.

The table says why each pending pod waits: the scheduler's own message when there is one, else
what keeps the pod out of scheduling altogether (another scheduler's pod, a missing PodGroup or
queue, scheduling gates).
"""

from __future__ import annotations

import io
import json
from collections.abc import Collection, Mapping, Sequence
from typing import IO, Any

import yaml

from scheduler.api.node import node_from_object
from scheduler.api.pod import pod_requests
from scheduler.api.resource import CPU, MEMORY, PODS, Resource, format_quantity
from scheduler.commands.tables import table_lines
from scheduler.devices.usage import vgpu_held

__all__ = ["render_list", "render_table", "write_list"]

_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


def write_list(objects: Sequence[Mapping[str, Any]], out: IO[str], *, output: str) -> None:
    """Write ``objects`` as one ``v1`` ``List`` in JSON or YAML, one item at a time."""
    if output == "json":
        if not objects:
            out.write('{\n  "apiVersion": "v1",\n  "kind": "List",\n  "metadata": {},\n'
                      '  "items": []\n}\n')
            return
        out.write('{\n  "apiVersion": "v1",\n  "kind": "List",\n  "metadata": {},\n  "items": [\n')
        for i, obj in enumerate(objects):
            text = json.dumps(obj, indent=2)
            out.write(("    " if i == 0 else ",\n    ") + text.replace("\n", "\n    "))
        out.write("\n  ]\n}\n")
        return
    if not objects:
        out.write("apiVersion: v1\nitems: []\nkind: List\nmetadata: {}\n")
        return
    out.write("apiVersion: v1\nkind: List\nmetadata: {}\nitems:\n")
    for obj in objects:
        # a one-element list renders exactly as that item of ``items:`` would
        yaml.dump([obj], out, Dumper=_DUMPER, sort_keys=False, default_flow_style=False)


def render_list(objects: Sequence[Mapping[str, Any]], *, output: str) -> str:
    out = io.StringIO()
    write_list(objects, out, output=output)
    return out.getvalue()


def _usage(name: str, used: float, total: float) -> str:
    percent = f" ({used / total:.0%})" if total > 0 else ""
    return f"{format_quantity(name, used)}/{format_quantity(name, total)}{percent}"


def _pending_reason(
    pod: Mapping[str, Any],
    *,
    scheduler_names: Collection[str],
    groups: Mapping[str, Mapping[str, Any]],
    queues: Collection[str],
) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "")
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    scheduler = spec.get("schedulerName") or "default-scheduler"
    if scheduler not in scheduler_names:
        return (f"left to scheduler {scheduler!r} (this run schedules "
                f"{', '.join(repr(n) for n in scheduler_names)}; see --scheduler-name)")
    group = (meta.get("annotations") or {}).get(_GROUP_ANNOTATION)
    namespace = meta.get("namespace", "default")
    if group:
        podgroup = groups.get(f"{namespace}/{group}")
        if podgroup is None:
            return f"its PodGroup {namespace}/{group} does not exist"
        queue = str((podgroup.get("spec") or {}).get("queue") or "default")
        if queue not in queues:
            return f"the queue {queue!r} of PodGroup {namespace}/{group} does not exist"
    if spec.get("schedulingGates"):
        names = ", ".join(str((g or {}).get("name")) for g in spec["schedulingGates"])
        return f"waiting for scheduling gates: {names}"
    return "not scheduled yet"


EVICT_PREFIX = "Pod is evicted, because of "


def _evicted(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The "Evicted" section: each pod the scheduler evicted, why, and for which pod.

    Read from the pods' ``Warning Evict`` events (the pods themselves are gone); the
    preemptor is the event's ``related`` object, absent when several pods shared the room.
    """
    rows = [["EVICTED POD", "REASON", "FOR"]]
    for event in events:
        involved = event.get("involvedObject") or {}
        if event.get("reason") != "Evict" or involved.get("kind") != "Pod":
            continue
        message = str(event.get("message") or "")
        reason = message.removeprefix(EVICT_PREFIX) if message.startswith(EVICT_PREFIX) else message
        related = event.get("related") or {}
        preemptor = (f"{related.get('namespace') or 'default'}/{related.get('name')}"
                     if related.get("name") else "-")
        if related.get("name") and related.get("kind") not in (None, "Pod"):
            preemptor = f"{related['kind']} {preemptor}"  # a gang: gangpreempt, gangreclaim
        rows.append([f"{involved.get('namespace') or 'default'}/{involved.get('name')}",
                     reason or "-", preemptor])
    if len(rows) == 1:
        return []
    return ["", *table_lines(rows)]


def _owner(group: Mapping[str, Any]) -> str:
    for ref in (group.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("kind") and ref.get("name"):
            return f"{ref['kind']}/{ref['name']}"
    return "-"


class _Requests:
    """:func:`pod_requests` of each distinct set of containers seen (a job's pods share one):
    keyed by the ``repr`` of the fields it reads, which tells ``1`` from ``"1"``. The answers
    are shared: read them, never change them."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, Resource] = {}

    def of(self, pod: Mapping[str, Any]) -> Resource:
        spec = pod.get("spec") or {}
        key = repr((spec.get("containers"), spec.get("initContainers"), spec.get("overhead")))
        request = self._seen.get(key)
        if request is None:
            request = pod_requests(pod)[0]
            if " object at 0x" not in key:  # an address may be reused by another object
                self._seen[key] = request
        return request


def render_table(
    objects: Sequence[Mapping[str, Any]], *, scheduler_names: Collection[str] = ("volcano",)
) -> str:
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(str(obj.get("kind")), []).append(obj)
    groups_by_key = {
        f"{(g.get('metadata') or {}).get('namespace', 'default')}/"
        f"{(g.get('metadata') or {}).get('name')}": g
        for g in by_kind.get("PodGroup", [])
    }
    queues = {str((q.get("metadata") or {}).get("name")) for q in by_kind.get("Queue", [])}
    pods = by_kind.get("Pod", [])
    placed: dict[str, list[str]] = {}
    used: dict[str, Resource] = {}
    pending: list[Mapping[str, Any]] = []
    requests = _Requests()
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
        request = requests.of(pod)
        held = vgpu_held(meta.get("annotations") or {})
        if held is not None:  # what the chosen cards hold, as lahar inspect gpushare shows it
            request = request.clone()
            for name, value in held.quantities().items():
                request.set(name, value)
        used.setdefault(node, Resource()).add(request)
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
    lines += table_lines(rows)
    lines.append("")
    if by_kind.get("Device"):  # fine-grained devices: per device and minor
        from scheduler.commands.inspect_devices import inspect_devices, render_devices_table

        lines.append(render_devices_table(inspect_devices(objects)))
    if by_kind.get("ResourceClaim"):  # Dynamic Resource Allocation: each bound pod's devices
        from scheduler.commands.inspect_dra import pod_device_rows

        claimed = pod_device_rows(objects)
        if claimed:
            lines += table_lines([["POD", "CLAIM", "DEVICES"], *claimed])
            lines.append("")
    if pending:
        rows = [["PENDING POD", "PODGROUP", "REASON"]]
        for pod in pending:
            meta = pod.get("metadata") or {}
            group = (meta.get("annotations") or {}).get("scheduling.k8s.io/group-name", "-")
            rows.append(
                [
                    f"{meta.get('namespace', 'default')}/{meta.get('name')}",
                    group,
                    _pending_reason(
                        pod, scheduler_names=scheduler_names, groups=groups_by_key, queues=queues
                    ),
                ]
            )
        lines += table_lines(rows)
    else:
        lines.append("No pending pods.")
    lines += _evicted(by_kind.get("Event", []))
    groups = by_kind.get("PodGroup", [])
    if groups:
        lines.append("")
        rows = [["PODGROUP", "QUEUE", "PHASE", "RUNNING", "MIN", "OWNER"]]
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
                    _owner(group),
                ]
            )
        lines += table_lines(rows)
    return "\n".join(lines) + "\n"
