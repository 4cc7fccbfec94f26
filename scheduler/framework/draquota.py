"""Queue quota per DeviceClass for DRA claims (Volcano's ``capacity`` plugin DRA quota).

A queue's ``capability``, ``deserved`` and ``guarantee`` may name ``deviceclass/<class>`` (a
number of devices) and ``<dimension>.deviceclass/<class>`` (consumed capacity, e.g.
``memory.deviceclass/gpu.example.com: 40Gi``). A task's DRA request is read from the specs of
its pod's ResourceClaims, per DeviceClass, as Volcano's cache does (``buildTaskDRAInfo``):
``exactly`` requests with ``ExactCount`` count ``count`` devices (1 when unset), and, with the
``DRAConsumableCapacity`` gate, ``count`` times each ``capacity.requests`` dimension;
``firstAvailable`` and ``allocationMode: All`` requests are not counted. A queue counts a claim
once however many of its pods use it (``resourceClaimRefs``). Kept apart from the generic
:class:`~scheduler.api.resource.Resource` so that only the checks Volcano makes on them apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from scheduler.api.errors import ObjectError
from scheduler.api.job import JobInfo
from scheduler.api.podclaims import claim_key, pod_claims, resolve_claim_names
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS

__all__ = [
    "CAPACITY_SEP",
    "COUNT_PREFIX",
    "DraAmount",
    "DraQuotaLedger",
    "QueueDra",
    "TaskDra",
    "job_min_dra",
    "queue_status_dra",
    "quota_of",
    "session_gates",
    "task_dra",
    "to_scalars",
]

COUNT_PREFIX = "deviceclass/"
CAPACITY_SEP = ".deviceclass/"

DraMap = dict[str, "DraAmount"]
"""DeviceClass name → amount."""


@dataclass(slots=True)
class DraAmount:
    """Volcano's ``api.DRAResource``: devices and consumed capacity of one DeviceClass."""

    count: int = 0
    capacity: dict[str, Decimal] = field(default_factory=dict)

    def add(self, other: DraAmount, times: int = 1) -> None:
        self.count += other.count * times
        for dim, value in other.capacity.items():
            self.capacity[dim] = self.capacity.get(dim, Decimal(0)) + value * times

    def sub(self, other: DraAmount) -> None:
        """Floors at zero, as ``DRAResource.Sub``."""
        self.count = max(0, self.count - other.count)
        for dim, value in other.capacity.items():
            if dim in self.capacity:
                self.capacity[dim] = max(Decimal(0), self.capacity[dim] - value)


def _merge(dst: DraMap, src: Mapping[str, DraAmount], times: int = 1) -> None:
    for device_class, amount in src.items():
        dst.setdefault(device_class, DraAmount()).add(amount, times)


@dataclass(slots=True)
class TaskDra:
    """A task's DRA request: per claim (``namespace/name``) and per DeviceClass."""

    per_claim: dict[str, DraMap]

    @property
    def total(self) -> DraMap:
        out: DraMap = {}
        for amounts in self.per_claim.values():
            _merge(out, amounts)
        return out


_known: dict[Any, tuple[Any, Any, bool, tuple[tuple[str, Any], ...], TaskDra | None]] = {}
"""Task → (its pod object, its claim statuses, the gate, the claims read, the request):
session close reads every bound pod's request each cycle; while the pod object and the
parsed claims are the same objects (the cache replaces them when they change) the request is
the same."""
_KNOWN_MAX = 200_000


def task_dra(view: Any, task: TaskInfo, *, consumable: bool) -> TaskDra | None:
    """``task``'s DRA request from its claims' specs in the session's DRA ``view``; None
    without claims, or while a claim is not known (the ``predicates`` plugin keeps such a pod
    pending)."""
    if view is None or not (task.pod.get("spec") or {}).get("resourceClaims"):
        return None
    statuses = (task.pod.get("status") or {}).get("resourceClaimStatuses")
    known = _known.get(task.uid)
    if known is not None and known[0] is task.pod and known[1] is statuses \
            and known[2] == consumable \
            and all(view.claims.get(key) is claim for key, claim in known[3]):
        return known[4]
    read: list[tuple[str, Any]] = []
    out = _task_dra(view, task, consumable=consumable, read=read)
    if len(_known) >= _KNOWN_MAX:
        _known.clear()
    _known[task.uid] = (task.pod, statuses, consumable, tuple(read), out)
    return out


def _task_dra(view: Any, task: TaskInfo, *, consumable: bool,
              read: list[tuple[str, Any]]) -> TaskDra | None:
    try:
        entries = pod_claims(task.pod)
    except ObjectError:
        return None
    per_claim: dict[str, DraMap] = {}
    for _, name in resolve_claim_names(task.pod, entries):
        if not name:
            continue
        key = claim_key(task.namespace, name)
        claim = view.claims.get(key)
        read.append((key, claim))
        if claim is None or key in per_claim:
            continue
        amounts: DraMap = {}
        for request in claim.requests:
            sub = request.exactly
            if sub is None or sub.allocation_mode == "All" or not sub.device_class_name:
                continue
            count = sub.count or 1
            capacity = dict(sub.capacity_requests or {}) if consumable else {}
            _merge(amounts, {sub.device_class_name: DraAmount(1, capacity)}, count)
        if amounts:
            per_claim[key] = amounts
    return TaskDra(per_claim) if per_claim else None


def quota_of(resource: Resource | None) -> DraMap | None:
    """Volcano's ``parseDRAResourceList``: the DeviceClass entries of a queue's resource list
    (kept by :class:`Resource` as scalars, in milli units)."""
    if resource is None:
        return None
    out: DraMap = {}
    for name, milli in resource.scalars.items():
        value = Decimal(repr(milli)) / 1000
        index = name.find(CAPACITY_SEP)
        if index > 0:
            device_class = name[index + len(CAPACITY_SEP):]
            if device_class:
                out.setdefault(device_class, DraAmount()).capacity[name[:index]] = value
            continue
        if name.startswith(COUNT_PREFIX) and len(name) > len(COUNT_PREFIX):
            out.setdefault(name[len(COUNT_PREFIX):], DraAmount()).count = int(
                value.to_integral_value(rounding="ROUND_CEILING"))
    return out or None


def to_scalars(allocated: Mapping[str, DraAmount]) -> dict[str, float]:
    """Volcano's ``mergeDRAAllocatedIntoResourceList``: the queue status keys (milli)."""
    out: dict[str, float] = {}
    for device_class, amount in allocated.items():
        if amount.count > 0:
            out[COUNT_PREFIX + device_class] = amount.count * 1000.0
        for dim, value in amount.capacity.items():
            if value:
                out[dim + CAPACITY_SEP + device_class] = float(value * 1000)
    return out


@dataclass(slots=True)
class QueueDra:
    """Volcano's ``draQuotaAttr`` with the queue's ``resourceClaimRefs``."""

    capability: DraMap
    deserved: DraMap
    guarantee: DraMap
    allocated: DraMap = field(default_factory=dict)
    inqueue: DraMap = field(default_factory=dict)
    refs: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, capability: Resource | None, deserved: Resource | None,
           guarantee: Resource | None) -> QueueDra | None:
        """``newDRAQuotaAttr``: None when no list names a DeviceClass."""
        parsed = [quota_of(r) for r in (capability, deserved, guarantee)]
        if all(p is None for p in parsed):
            return None
        limits, shares, floors = (p or {} for p in parsed)
        return cls(capability=limits, deserved=shares, guarantee=floors)

    def incremental(self, request: TaskDra) -> DraMap:
        """``incrementalTaskDRA``: the claims this queue does not hold yet."""
        out: DraMap = {}
        for key, amounts in request.per_claim.items():
            if self.refs.get(key, 0) <= 0:
                _merge(out, amounts)
        return out

    def add_task(self, request: TaskDra) -> None:
        """``addTaskDRAAllocated``: a claim is counted when its first pod is."""
        for key, amounts in request.per_claim.items():
            if self.refs.get(key, 0) == 0:
                _merge(self.allocated, amounts)
            self.refs[key] = self.refs.get(key, 0) + 1

    def remove_task(self, request: TaskDra) -> None:
        """``removeTaskDRAAllocated``: a claim is uncounted with its last pod."""
        for key, amounts in request.per_claim.items():
            refs = self.refs.get(key, 0)
            if refs <= 1:
                for device_class, amount in amounts.items():
                    held = self.allocated.get(device_class)
                    if held is not None:
                        held.sub(amount)
                self.refs.pop(key, None)
            else:
                self.refs[key] = refs - 1

    def add_inqueue(self, request: Mapping[str, DraAmount]) -> None:
        _merge(self.inqueue, request)

    def exceeded(self, request: Mapping[str, DraAmount], *, consumable: bool,
                 include_inqueue: bool) -> str | None:
        """``checkDRAAllocatable``: the first quota key ``request`` would exceed, else None.
        A DeviceClass without a capability entry is not limited; a capacity dimension the
        capability does not name is exceeded (only with ``consumable``)."""
        for device_class, wanted in request.items():
            limit = self.capability.get(device_class)
            if limit is None:
                continue
            held = self.allocated.get(device_class) or DraAmount()
            queued = (self.inqueue.get(device_class) if include_inqueue else None) \
                or DraAmount()
            if limit.count > 0 and held.count + queued.count + wanted.count > limit.count:
                return COUNT_PREFIX + device_class
            if not consumable:
                continue
            for dim, value in wanted.capacity.items():
                bound = limit.capacity.get(dim)
                used = held.capacity.get(dim, Decimal(0)) + queued.capacity.get(dim, Decimal(0))
                if bound is None or used + value > bound:
                    return dim + CAPACITY_SEP + device_class
        return None


def session_gates(session: Any) -> Any:
    """The DRA feature gates of the conf (the ``predicates`` plugin's, which
    ``--feature-gates`` adds to); None when no plugin carries them."""
    for entry in session.plugin_entries():
        gates = getattr(entry.plugin.args, "dra_features", None)
        if gates is not None:
            return gates
    return None


def queue_status_dra(session: Any) -> dict[str, dict[str, float]]:
    """Volcano's ``updateQueueStatus`` DRA part (``addTaskDRAAllocatedByQueue`` and
    ``mergeDRAAllocatedIntoResourceList``): per queue the devices and capacity its allocated
    tasks' claims hold, a claim once per queue, added along ``spec.parent`` up to ``root``
    when there is a ``root`` queue; as ``status.allocated`` scalars (milli)."""
    view = session.snapshot.dra
    if view is None or view.empty or not view.claims:
        return {}
    gates = session_gates(session)
    consumable = bool(gates is not None and gates.consumable_capacity)
    queues = session.queues
    held: dict[str, QueueDra] = {}
    for job in session.jobs.values():
        for task in job.tasks_in(ALLOCATED_STATUS):
            request = task_dra(view, task, consumable=consumable)
            if request is None:
                continue
            uid, seen = job.queue, set()
            while uid in queues and uid not in seen:
                seen.add(uid)
                held.setdefault(uid, QueueDra({}, {}, {})).add_task(request)
                if "root" not in queues or uid == "root":
                    break
                uid = queues[uid].parent or "root"
    return {uid: to_scalars(quota.allocated) for uid, quota in held.items()}


def job_min_dra(job: JobInfo, requests: Mapping[Any, TaskDra | None]) -> DraMap | None:
    """Volcano's ``JobInfo.GetMinDRAResources``: with per-role minimums, each role's first
    task's request times its minimum; otherwise the first ``minAvailable`` tasks with claims
    (by namespace, name, uid) once each."""
    minimums = job.min_task_member
    out: DraMap = {}
    if not minimums:
        if job.min_available <= 0:
            return None
        tasks = sorted((t for t in job.tasks.values() if requests.get(t.uid) is not None),
                       key=lambda t: (t.namespace, t.name, str(t.uid)))
        for task in tasks[:job.min_available]:
            request = requests[task.uid]
            assert request is not None
            _merge(out, request.total)
        return out or None
    seen: set[str] = set()
    for task in job.tasks.values():
        request = requests.get(task.uid)
        number = minimums.get(task.role, 0)
        if request is None or number <= 0 or task.role in seen:
            continue
        seen.add(task.role)
        _merge(out, request.total, number)
    return out or None


class DraQuotaLedger:
    """One session's DeviceClass quotas of the queues a plugin keeps figures for: the
    checks and the in-session moves, each over a queue and its ``chain`` (its ancestors)."""

    def __init__(self, session: Any, queues: Iterable[Any], *,
                 consumable: bool | None) -> None:
        self.view = session.snapshot.dra  # not the session: no cycle through the plugin
        self.quotas: dict[Any, QueueDra] = {}
        self.requests: dict[Any, TaskDra | None] = {}
        self.refusals: dict[Any, str] = {}
        """Task → the quota key its last refusal exceeded."""
        view = self.view
        gates = session_gates(session)
        self.gate_consumable = bool(gates is not None and gates.consumable_capacity)
        self.consumable = self.gate_consumable if consumable is None else consumable
        if view is None or view.empty:
            return
        for queue in queues:
            quota = QueueDra.of(queue.capability, queue.deserved, queue.guarantee)
            if quota is not None:
                self.quotas[queue.uid] = quota

    def __bool__(self) -> bool:
        return bool(self.quotas)

    def request(self, task: TaskInfo) -> TaskDra | None:
        if task.uid not in self.requests:
            self.requests[task.uid] = task_dra(self.view, task,
                                               consumable=self.gate_consumable)
        return self.requests[task.uid]

    def move(self, chain: Iterable[Any], task: TaskInfo, sign: int) -> None:
        """``addTaskDRAAllocated`` (``sign`` > 0) / ``removeTaskDRAAllocated`` on each queue."""
        if not self.quotas:
            return
        request = self.request(task)
        if request is None:
            return
        for uid in chain:
            quota = self.quotas.get(uid)
            if quota is not None:
                (quota.add_task if sign > 0 else quota.remove_task)(request)

    def exceeded(self, uid: Any, task: TaskInfo) -> str | None:
        """``queueAllocatableWithReserved``'s DRA part for one queue; the refusal is kept."""
        quota = self.quotas.get(uid)
        request = None if quota is None else self.request(task)
        if quota is None or request is None:
            return None
        key = quota.exceeded(quota.incremental(request), consumable=self.consumable,
                             include_inqueue=False)
        if key is not None:
            self.refusals[task.uid] = key
        return key

    def reason(self, queue: Any, task: TaskInfo) -> str | None:
        key = self.refusals.get(task.uid)
        if key is None:
            return None
        return f"Queue <{queue.name}> DRA resource insufficient for candidate <{task.name}>: " \
               f"{key} would exceed the queue's capability"

    def job_minimum(self, job: JobInfo, chain: Iterable[Any]) -> DraMap | None:
        if not any(uid in self.quotas for uid in chain):
            return None
        return job_min_dra(job, {task.uid: self.request(task) for task in job.tasks.values()})

    def enqueue_exceeded(self, uid: Any, minimum: DraMap) -> bool:
        quota = self.quotas.get(uid)
        return quota is not None and quota.exceeded(
            minimum, consumable=self.consumable, include_inqueue=True) is not None

    def enqueued(self, chain: Iterable[Any], minimum: DraMap) -> None:
        for uid in chain:
            quota = self.quotas.get(uid)
            if quota is not None:
                quota.add_inqueue(minimum)
