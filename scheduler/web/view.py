"""The view the web pages read: one immutable, JSON-ready picture of a closed session.

:func:`build_view` turns a session that has just closed into plain data (dicts, lists,
strings, numbers): the overview counts, the queues with what the queue plugin computed for them
(deserved, guarantee, share), every job with its phase, gang counts, position in its queue's
order and the ``PodScheduled`` reason its pending pods got, every node with its usage and
cards, and the HyperNode tree. It reads only what the session already holds and copies what it
keeps, so a request thread never touches an object the loop may change; nothing is computed
again that the cycle computed (the pending reason is :func:`task_reason`, the very function
close uses to write the condition).

The result is wrapped in a frozen :class:`View`; its ``data`` is never mutated after it is
built, so it is handed to any number of readers without a lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cmp_to_key
from typing import Any

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.resource import CPU, MEMORY, PODS, Resource
from scheduler.api.types import TaskStatus
from scheduler.framework.close import task_reason
from scheduler.framework.session import Session

__all__ = ["Memo", "View", "build_view", "resource_dict"]

_ALLOCATED = TaskStatus.ALLOCATED | TaskStatus.BINDING | TaskStatus.BOUND | TaskStatus.RUNNING
_PENDING = TaskStatus.PENDING | TaskStatus.PIPELINED
_GPU_WORDS = ("gpu", "vgpu", "mlu", "npu", "fpga", "rdma")


@dataclass(frozen=True, slots=True)
class View:
    """One published picture of the cluster; ``data`` is JSON-ready and never changed."""

    cycle: int
    built_at: float
    build_seconds: float
    data: Mapping[str, Any]


def resource_dict(resource: Resource | None) -> dict[str, float]:
    """``{"cpu": milli-cores, "memory": bytes, <scalar>: quantity}``, zero scalars left out."""
    if resource is None:
        return {}
    values = {CPU: float(resource.milli_cpu), MEMORY: float(resource.memory)}
    values.update({k: float(v) for k, v in resource.scalars.items() if v and k != PODS})
    return values


@dataclass(slots=True)
class Memo:
    """The previous build's entries of settled jobs and of nodes, by what they were built
    from: an entry whose fingerprint has not moved is taken again instead of rebuilt, so a
    steady cluster costs a pass of cheap comparisons (see ``hack/bench_web_view.py``)."""

    jobs: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = field(default_factory=dict)
    nodes: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = field(default_factory=dict)
    device_names: dict[str, bool] = field(default_factory=dict)


def _job_print(job: JobInfo) -> tuple[Any, ...]:
    return (job.podgroup.phase, job.podgroup.min_member, job.priority, str(job.queue),
            len(job.tasks), len(job.podgroup.conditions),
            tuple(sorted((s.value, len(t)) for s, t in job.task_status_index.items())))


def _node_print(node: NodeInfo) -> tuple[Any, ...]:
    used = node.used
    return (node.ready, node.unschedulable, used.milli_cpu, used.memory,
            tuple(used.scalars.items()), tuple(node.tasks), node.allocatable.milli_cpu)


def build_view(session: Session, *, now: float, memo: Memo | None = None) -> dict[str, Any]:
    """The picture of ``session`` after close (see the module docstring); ``memo`` carries
    settled entries from one build to the next."""
    memo = memo if memo is not None else Memo()
    queue_attrs = _queue_attrs(session)
    order = _queue_positions(session)
    jobs = []
    kept_jobs: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    for job in sorted(session.jobs.values(), key=lambda j: (j.namespace, j.name)):
        uid = str(job.uid)
        if job.task_status_index.get(TaskStatus.PENDING) or \
                job.task_status_index.get(TaskStatus.PIPELINED):
            jobs.append(_job(session, job, now=now, position=order.get(job.uid)))
            continue
        mark = _job_print(job)
        old = memo.jobs.get(uid)
        if old is not None and old[0] == mark:
            created = job.podgroup.creation
            entry = dict(old[1], age_seconds=max(now - created, 0.0) if created else 0.0)
        else:
            entry = _job(session, job, now=now, position=None)
        kept_jobs[uid] = (mark, entry)
        jobs.append(entry)
    memo.jobs = kept_jobs
    nodes = []
    kept_nodes: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    for node in sorted(session.nodes.values(), key=lambda n: n.name):
        mark = _node_print(node)
        old = memo.nodes.get(node.name)
        entry = old[1] if old is not None and old[0] == mark else _node(node)
        kept_nodes[node.name] = (mark, entry)
        nodes.append(entry)
    memo.nodes = kept_nodes
    queues = _queues(session, jobs, queue_attrs)
    return {
        "overview": _overview(jobs, nodes, memo.device_names),
        "queues": queues,
        "jobs": jobs,
        "nodes": nodes,
        "topology": _topology(session, jobs),
    }


def _queue_attrs(session: Session) -> dict[str, Any]:
    """The queue plugin's per-queue figures (proportion's or capacity's ``attrs``)."""
    for entry in session.plugin_entries():
        attrs = getattr(entry.plugin, "attrs", None)
        if isinstance(attrs, dict) and attrs and all(hasattr(a, "deserved")
                                                     for a in attrs.values()):
            return dict(attrs)
    return {}


def _queue_positions(session: Session) -> dict[str, int]:
    """Each pending job's place (1 = next) among its queue's pending jobs, in the session's
    job order."""
    key = session.job_order_key()
    by_queue: dict[str, list[JobInfo]] = {}
    for job in session.jobs.values():
        if job.task_status_index.get(TaskStatus.PENDING):
            by_queue.setdefault(str(job.queue), []).append(job)
    positions: dict[str, int] = {}
    for members in by_queue.values():
        members.sort(key=key if key is not None else cmp_to_key(session.job_order))
        positions.update({str(job.uid): i for i, job in enumerate(members, 1)})
    return positions


def _count(job: JobInfo, status: TaskStatus) -> int:
    return sum(len(tasks) for s, tasks in job.task_status_index.items() if s & status)


def _job(session: Session, job: JobInfo, *, now: float, position: int | None) -> dict[str, Any]:
    pending = [t for s, tasks in job.task_status_index.items() if s & _PENDING
               for t in tasks.values()]
    base = job.fit_error() if pending else ""
    pods = []
    reason = ""
    for task in sorted(job.tasks.values(), key=lambda t: t.name):
        entry: dict[str, Any] = {
            "name": task.name, "status": task.status.name or str(task.status),
            "node": task.node_name, "request": resource_dict(task.resreq),
            "devices": {k: v for k, v in task.bind_annotations.items()},
        }
        if task.status & _PENDING:
            entry["reason"], entry["message"] = task_reason(job, task, base)
            reason = reason or entry["message"]
        pods.append(entry)
    created = job.podgroup.creation
    running = _count(job, TaskStatus.RUNNING)
    return {
        "uid": str(job.uid), "name": job.name, "namespace": job.namespace,
        "queue": str(job.queue), "phase": job.podgroup.phase,
        "min_member": job.podgroup.min_member, "priority": job.priority,
        "ready": _count(job, _ALLOCATED), "running": running, "pending": len(pending),
        "age_seconds": max(now - created, 0.0) if created else 0.0,
        "waiting_seconds": (max(now - created, 0.0) if created and pending else 0.0),
        "queue_position": position, "reason": reason,
        "conditions": [dict(c) for c in job.podgroup.conditions],
        "pods": pods,
    }


def _node(node: NodeInfo) -> dict[str, Any]:
    cards: list[dict[str, Any]] = []
    names = {str(uid): f"{t.namespace}/{t.name}" for uid, t in node.tasks.items()}
    for family, ledger in sorted(node.others.items()):
        cards.extend(_cards(family, ledger, names))
    allocatable = resource_dict(node.allocatable)
    allocatable["pods"] = float(node.allocatable.get(PODS))
    used = resource_dict(node.used)
    used["pods"] = float(len(node.tasks))
    return {
        "name": node.name, "ready": node.ready, "unschedulable": node.unschedulable,
        "allocatable": allocatable, "used": used,
        "pods": sorted(t.name for t in node.tasks.values()), "cards": cards,
    }


def _cards(family: str, ledger: Any, names: Mapping[str, str]) -> Iterable[dict[str, Any]]:
    """Per card of one device family: memory and cores held against capacity, and holders."""
    holders: dict[int | str, list[str]] = {}
    pods = getattr(ledger, "pods", {}) or {}
    for uid, charges in (getattr(ledger, "charges", {}) or {}).items():
        for charge in charges:
            holders.setdefault(charge[0], []).append(str(pods.get(uid) or names.get(uid, uid)))
    for card in getattr(ledger, "cards", None) or ():
        info = getattr(card, "info", None)
        if info is not None:  # vGPU (HAMi): registered card + usage
            yield {"family": family, "id": info.uuid, "index": info.index, "type": info.type,
                   "memory_used": card.used_mem, "memory": info.memory,
                   "cores_used": card.used_cores, "cores": info.cores,
                   "shares_used": card.used_num, "shares": info.split,
                   "healthy": info.healthy, "pods": sorted(holders.get(info.uuid, []))}
        elif hasattr(card, "memory") and hasattr(card, "used"):  # GPU share
            yield {"family": family, "id": str(card.index), "index": card.index, "type": "",
                   "memory_used": card.used, "memory": card.memory,
                   "cores_used": None, "cores": None, "shares_used": card.holders,
                   "shares": None, "healthy": card.healthy,
                   "pods": sorted(holders.get(card.index, []))}
    fine = getattr(ledger, "ledger", None)
    if fine is not None and getattr(fine, "devices", None):
        yield from _fine_grained(family, fine, names)
        return
    if not getattr(ledger, "cards", None) and hasattr(ledger, "ledger"):
        return  # a fine-grained node without a Device object has no cards to show
    if not getattr(ledger, "cards", None):
        status = getattr(ledger, "status", None)
        text = status() if callable(status) else ""
        if text:
            yield {"family": family, "id": "", "index": None, "type": "", "status": str(text),
                   "memory_used": None, "memory": None, "cores_used": None, "cores": None,
                   "shares_used": None, "shares": None, "healthy": True, "pods": []}


def _fine_grained(family: str, ledger: Any,
                  names: Mapping[str, str]) -> Iterable[dict[str, Any]]:
    """Koordinator-style devices: each GPU/RDMA/FPGA minor with what its holders took."""
    holders: dict[tuple[str, int], list[str]] = {}
    for pod, allocation in ledger.holders.items():
        for kind, picks in allocation.items():
            for pick in picks:
                holders.setdefault((kind, pick.minor), []).append(names.get(str(pod), str(pod)))
    for (kind, minor), device in sorted(ledger.devices.items()):
        used = ledger.used.get((kind, minor), {})

        def pick(word: str, values: Mapping[str, int]) -> int | None:
            for name, value in values.items():
                if name.endswith(word):
                    return int(value)
            return None

        memory = pick("-memory", device.total)
        yield {"family": family, "id": device.uuid, "index": minor, "type": kind,
               "memory_used": (pick("-memory", used) or 0) // (1024 * 1024) if memory else None,
               "memory": memory // (1024 * 1024) if memory else None,
               "cores_used": pick("-core", used) or 0, "cores": pick("-core", device.total),
               "shares_used": len(holders.get((kind, minor), [])), "shares": None,
               "healthy": device.healthy, "pods": sorted(holders.get((kind, minor), []))}


def _queues(session: Session, jobs: list[dict[str, Any]],
            attrs: Mapping[Any, Any]) -> list[dict[str, Any]]:
    counts: dict[str, dict[str, int]] = {}
    for job in jobs:
        phase = job["phase"].lower()
        bucket = counts.setdefault(job["queue"], {"inqueue": 0, "pending": 0, "running": 0})
        if phase in bucket:
            bucket[phase] += 1
    allocated: dict[str, Resource] = {}
    for info in session.jobs.values():
        allocated.setdefault(str(info.queue), Resource()).add(info.allocated)
    out = []
    for queue in sorted(session.queues.values(), key=lambda q: q.name):
        attr = attrs.get(queue.uid)
        alloc = attr.allocated if attr is not None else allocated.get(queue.name, Resource())
        out.append({
            "name": queue.name, "parent": queue.parent or ("" if queue.name == "root"
                                                             else "root"),
            "state": queue.state, "weight": queue.weight, "priority": queue.priority,
            "allocated": resource_dict(alloc),
            "deserved": resource_dict(attr.deserved if attr is not None else queue.deserved),
            "capability": resource_dict(queue.capability),
            "guarantee": resource_dict(queue.guarantee),
            "share": float(getattr(attr, "share", 0.0) or 0.0),
            "overused": bool(session.overused(queue)),
            "jobs": counts.get(queue.name, {"inqueue": 0, "pending": 0, "running": 0}),
        })
    names = {q["name"] for q in out}
    for q in out:  # a parent absent from the cluster (root when not declared) hangs at the top
        if q["parent"] not in names:
            q["parent"] = ""
    return out


def _overview(jobs: list[dict[str, Any]], nodes: list[dict[str, Any]],
              device_names: dict[str, bool]) -> dict[str, Any]:
    bound = sum(job["ready"] for job in jobs)
    pending = sum(job["pending"] for job in jobs)
    cards = [c for n in nodes for c in n["cards"] if c.get("memory")]
    gpu_total = sum(c["memory"] for c in cards)
    gpu_used = sum(c["memory_used"] for c in cards)
    devices: dict[str, tuple[float, float]] = {}
    for node in nodes:
        for name, value in node["allocatable"].items():
            device = device_names.get(name)
            if device is None:
                device = device_names[name] = any(w in name.lower() for w in _GPU_WORDS)
            if device:
                total, used = devices.get(name, (0.0, 0.0))
                devices[name] = (total + value, used + node["used"].get(name, 0.0))
    return {
        "nodes": len(nodes), "nodes_ready": sum(1 for n in nodes if n["ready"]),
        "jobs": len(jobs), "pods_bound": bound, "pods_pending": pending,
        "gpu_cards": len(cards), "gpu_cards_in_use": sum(1 for c in cards if c["memory_used"]),
        "gpu_memory": gpu_total, "gpu_memory_used": gpu_used,
        "device_resources": {k: {"allocatable": v[0], "used": v[1]}
                             for k, v in sorted(devices.items())},
    }


def _topology(session: Session, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tree = session.snapshot.hypernodes
    if not tree:
        return []
    nodes = session.nodes
    node_jobs: dict[str, set[str]] = {}
    for job in jobs:
        for pod in job["pods"]:
            if pod["node"]:
                node_jobs.setdefault(pod["node"], set()).add(f"{job['namespace']}/{job['name']}")
    out = []
    for name in sorted(tree.info, key=lambda n: (-tree.info[n].tier, n)):
        info = tree.info[name]
        used, allocatable = Resource(), Resource()
        held: set[str] = set()
        for member in info.nodes:
            node = nodes.get(member)
            if node is not None:
                used.add(node.used)
                allocatable.add(node.allocatable)
            held |= node_jobs.get(member, set())
        out.append({"name": name, "tier": info.tier, "tier_name": info.tier_name,
                    "parent": info.parent, "children": sorted(info.children),
                    "nodes": sorted(info.nodes), "used": resource_dict(used),
                    "allocatable": resource_dict(allocatable), "jobs": sorted(held)})
    return out
