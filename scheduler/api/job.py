"""JobInfo: a PodGroup and its tasks, with Volcano's gang counters.

``task_status_index`` is kept current on every status change so readiness checks never scan
all tasks; ``allocated`` tracks the sum of requests of tasks in allocated statuses. The
resource views the queue plugins share (elastic part, inqueue reservation, scheduling-gated
part) live here so that proportion and overcommit count them the same way Volcano does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from scheduler.api.podgroup import PHASE_INQUEUE, PHASE_PENDING, PHASE_RUNNING, PodGroup
from scheduler.api.resource import Resource
from scheduler.api.status import FitErrors
from scheduler.api.subjob import SubJobs, partition_tasks
from scheduler.api.task import TaskInfo
from scheduler.api.types import (
    ALLOCATED_STATUS,
    READY_STATUS,
    JobID,
    QueueID,
    TaskID,
    TaskStatus,
)

__all__ = ["QUEUE_ALLOCATION_GATE", "JobInfo", "integral"]

QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
"""Volcano's own scheduling gate, lifted once the queue has room; pods held only by it are
still counted in their job's inqueue reservation."""

_ALLOCATED: int = ALLOCATED_STATUS._value_
"""The allocated statuses' bits: testing an int is cheap, ``Flag.__and__`` builds a member in
Python (and these tests run on every task status change)."""
_VALID_STATUS = TaskStatus.PENDING | TaskStatus.PIPELINED | ALLOCATED_STATUS | TaskStatus.SUCCEEDED


@dataclass(slots=True)
class JobInfo:
    uid: JobID
    name: str
    namespace: str
    podgroup: PodGroup
    queue: QueueID
    priority: int = 0
    min_available: int = 1
    tasks: dict[TaskID, TaskInfo] = field(default_factory=dict)
    task_status_index: dict[TaskStatus, dict[TaskID, TaskInfo]] = field(default_factory=dict)
    allocated: Resource = field(default_factory=Resource)
    total_request: Resource = field(default_factory=Resource)
    nodes_fit_errors: dict[TaskID, FitErrors] = field(default_factory=dict)
    unfit_tasks: set[TaskID] = field(default_factory=set)
    """Tasks that fit no node this cycle (pre-predicate or predicates); their roles are the
    job's failed roles. Queue-share explanations in ``nodes_fit_errors`` are not counted."""
    job_fit_error: str = ""
    enqueue_message: str = ""
    """Why enqueue turned the job away this cycle (written as a PodGroup event)."""
    preemptable: bool = False
    inexact_requests: int = 0
    """Tasks whose request has a non-integral value (their sums depend on the order)."""
    best_effort_tasks: int = 0
    """Tasks that request nothing, in any status: while there are none, readiness checks
    (several per job comparison in the job-order heap) need not look at pending tasks."""
    gated_tasks: int = 0
    """Tasks held by a scheduling gate, in any status: while there are none, the gated part
    of a reservation is known to be empty without looking at the tasks."""
    partitions: SubJobs | None = None
    """The sub-jobs of ``spec.subGroupPolicy`` once asked for (:meth:`sub_jobs`); dropped
    when a task comes or goes."""
    counted: dict[int, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Status mask → how many tasks have a status in it, as :meth:`count` found it; emptied
    by every change of the task index. The job-order heaps ask each job's readiness dozens
    of times a cycle while its tasks stay put."""
    revision: int = field(default=0, init=False, repr=False, compare=False)
    """Moved by every change of the task index (a task added, removed or moved to another
    status): what was derived from the tasks at one revision holds while it stays."""

    @property
    def creation(self) -> float:
        return self.podgroup.creation

    @property
    def min_task_member(self) -> dict[str, int]:
        return self.podgroup.min_task_member

    # -- task index -----------------------------------------------------------------------
    def sub_jobs(self) -> SubJobs:
        """The job's partitions (Volcano's ``SubJobs``), cut once per PodGroup and task set."""
        parts = self.partitions
        if parts is None or parts.podgroup is not self.podgroup:
            parts = self.partitions = partition_tasks(
                self.uid, self.podgroup, min_available=self.min_available,
                tasks=self.tasks.values())
        return parts

    def _changed(self) -> None:
        if self.counted:
            self.counted.clear()
        self.revision += 1

    def add_task(self, task: TaskInfo) -> None:
        self.partitions = None
        if self.counted:  # _changed, inline: a snapshot adds every task of the cluster
            self.counted.clear()
        self.revision += 1
        self.tasks[task.uid] = task
        self.task_status_index.setdefault(task.status, {})[task.uid] = task
        self.total_request.add(task.resreq)
        if task.status._value_ & _ALLOCATED:
            self.allocated.add(task.resreq)
        if not integral(task.resreq):
            self.inexact_requests += 1
        if task.best_effort:
            self.best_effort_tasks += 1
        if task.sched_gated:
            self.gated_tasks += 1

    def delete_task(self, task: TaskInfo) -> None:
        existing = self.tasks.pop(task.uid, None)
        if existing is None:
            return
        self.partitions = None
        self._changed()
        self.task_status_index.get(existing.status, {}).pop(existing.uid, None)
        self.total_request.sub(existing.resreq)
        if existing.status._value_ & _ALLOCATED:
            self.allocated.sub(existing.resreq)
        if not integral(existing.resreq):
            self.inexact_requests -= 1
            if not self.inexact_requests:
                self._resum()
        if existing.best_effort:
            self.best_effort_tasks -= 1
        if existing.sched_gated:
            self.gated_tasks -= 1

    def _resum(self) -> None:
        """Sum the running totals afresh once the last non-integral request has left: its
        float additions and subtractions can leave a residue (999.9999… for 1000) that the
        totals would otherwise carry while ``allocated_exact`` vouches for them."""
        self.allocated = Resource()
        self.total_request = Resource()
        for task in self.tasks.values():
            self.total_request.add(task.resreq)
            if task.status._value_ & _ALLOCATED:
                self.allocated.add(task.resreq)

    def update_task_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Move ``task`` (the job's own object) to ``status``, keeping counters in step."""
        old = task.status
        if old is status:
            return
        self._changed()
        self.task_status_index.get(old, {}).pop(task.uid, None)
        was_allocated = bool(old._value_ & _ALLOCATED)
        now_allocated = bool(status._value_ & _ALLOCATED)
        if was_allocated and not now_allocated:
            self.allocated.sub(task.resreq)
        elif now_allocated and not was_allocated:
            self.allocated.add(task.resreq)
        task.status = status
        self.task_status_index.setdefault(status, {})[task.uid] = task

    # Both below compare the flags' integer values: ``Flag.__and__`` builds a new member in
    # Python, and they run for every job several times a cycle.
    def tasks_in(self, status: TaskStatus) -> list[TaskInfo]:
        out: list[TaskInfo] = []
        wanted = status._value_
        for flag, tasks in self.task_status_index.items():
            if flag._value_ & wanted:
                out.extend(tasks.values())
        return out

    def count(self, status: TaskStatus) -> int:
        wanted = status._value_
        counted = self.counted.get(wanted)
        if counted is None:
            counted = 0
            for flag, tasks in self.task_status_index.items():  # a status or two, mostly
                if flag._value_ & wanted:
                    counted += len(tasks)
            self.counted[wanted] = counted
        return counted

    def allocated_exact(self) -> bool:
        """Whether ``allocated`` equals, field for field (scalar names included), adding up
        the requests of the allocated tasks in any order, and so does any sum of requests of
        this job's tasks.

        ``allocated`` is a running total kept in step on every change, so reading it costs
        O(1) per job instead of O(tasks). It may differ from a fresh sum only where a request
        has a non-integral value (float additions in another order may round differently;
        integral ones are exact) or a scalar sits at 0 (a fresh sum names a scalar only while
        a task requests it); callers sum task by task then.
        """
        if self.inexact_requests:
            return False
        return all(self.allocated.scalars.values())

    def inqueue_demand(self, *, deduct_allocated_inqueue: bool = True) -> Resource | None:
        """What an admitted job still holds in reserve for its queue, or None.

        An ``Inqueue`` job reserves its ``minResources`` less what is already allocated (the
        tasks are counted in the queue's allocation from the moment they are allocated, while
        the PodGroup stays Inqueue until they run); overcommit reserves the whole
        ``minResources`` instead (``deduct_allocated_inqueue=False``). A ``Running`` job
        whose gang is placed reserves the part not yet allocated. The resources of pods held
        by a scheduling gate are never reserved.
        """
        minimum = self.podgroup.min_resources
        if minimum is None:
            return None
        if self.podgroup.phase == PHASE_INQUEUE:
            if deduct_allocated_inqueue:
                return self.deduct_sched_gated(minimum.exceeded_part(self.allocated))
            return self.deduct_sched_gated(minimum.clone())
        if (self.podgroup.phase == PHASE_RUNNING
                and self.count(ALLOCATED_STATUS) >= self.podgroup.min_member):
            return self.deduct_sched_gated(minimum.exceeded_part(self.allocated))
        return None

    def enqueue_reservation(self) -> Resource:
        """What admitting this job adds to its queue's inqueue budget: ``minResources`` less
        the pods held by a scheduling gate (empty when the job sets no ``minResources``)."""
        minimum = self.podgroup.min_resources
        return Resource() if minimum is None else self.deduct_sched_gated(minimum.clone())

    def elastic_resources(self) -> Resource:
        """The allocation beyond ``minResources``; all of it when the job sets none
        (Volcano's ``GetElasticResources``)."""
        return self.allocated.exceeded_part(self.podgroup.min_resources or Resource())

    def sched_gated_resources(self) -> Resource:
        """Requests of pods held by a scheduling gate other than Volcano's own."""
        total = Resource()
        for task in self.tasks.values():
            if task.sched_gated and not _only_queue_allocation_gate(task):
                total.add(task.resreq)
        return total

    def deduct_sched_gated(self, resources: Resource) -> Resource:
        """``resources`` less the gated pods' requests, floored at 0, on the dimensions
        ``resources`` names (Volcano's ``DeductSchGatedResources``)."""
        if not self.gated_tasks:
            return resources
        gated = self.sched_gated_resources()
        if gated.is_empty():
            return resources
        out = resources.clone()
        out.milli_cpu = max(out.milli_cpu - gated.milli_cpu, 0.0)
        out.memory = max(out.memory - gated.memory, 0.0)
        for name, value in resources.scalars.items():
            if name in gated.scalars:
                out.scalars[name] = max(value - gated.scalars[name], 0.0)
        return out

    # -- gang counters --------------------------------------------------------------------
    def ready_task_num(self) -> int:
        return self.count(READY_STATUS)

    def waiting_task_num(self) -> int:
        return self.count(TaskStatus.PIPELINED)

    def valid_task_num(self) -> int:
        return self.count(_VALID_STATUS)

    def pending_best_effort_num(self) -> int:
        if not self.best_effort_tasks:
            return 0
        return sum(
            1 for t in self.task_status_index.get(TaskStatus.PENDING, {}).values() if t.best_effort
        )

    def is_ready(self) -> bool:
        ready = self.count(READY_STATUS)
        if self.best_effort_tasks:
            ready += self.pending_best_effort_num()
        return ready >= self.min_available

    def is_pipelined(self) -> bool:
        return (
            self.waiting_task_num() + self.ready_task_num() + self.pending_best_effort_num()
            >= self.min_available
        )

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def is_pending(self) -> bool:
        return self.podgroup.phase in (PHASE_PENDING, "")

    def role_counts(self, status: TaskStatus) -> Counter[str]:
        counts: Counter[str] = Counter()
        for task in self.tasks_in(status):
            counts[task.role] += 1
        return counts

    # -- allocation continuation ----------------------------------------------------------
    def fit_failed_roles(self) -> set[str]:
        return {self.tasks[tid].role for tid in self.unfit_tasks if tid in self.tasks}

    def role_already_failed(self, task: TaskInfo) -> bool:
        """A sibling of ``task`` with the same role fitted no node this cycle, so ``task``
        will not either (only for tasks that name a role)."""
        return bool(task.role) and task.role in self.fit_failed_roles()

    def need_continue_allocating(self) -> bool:
        """After a task fitted no node: can the tasks left still make the gang?

        Volcano's ``JobInfo.NeedContinueAllocating``: never when every task is needed
        (``minMember`` = #tasks); when the per-role minimums add up to more than
        ``minMember``, only if the ready tasks plus the pending ones of roles that have not
        failed reach ``minMember``; otherwise only if every failed role that has a
        ``minTaskMember`` already holds that many tasks.
        """
        if self.min_available == len(self.tasks):
            return False
        failed = self.fit_failed_roles()
        minimums = self.min_task_member
        if self.min_available < sum(minimums.values()):
            left = sum(
                1
                for task in self.task_status_index.get(TaskStatus.PENDING, {}).values()
                if task.role not in failed
            )
            return self.ready_task_num() + left >= self.min_available
        occupied = self.role_counts(READY_STATUS)
        for task in self.task_status_index.get(TaskStatus.PENDING, {}).values():
            if task.init_resreq.is_empty():
                occupied[task.role] += 1
        return all(occupied[role] >= minimums.get(role, 0) for role in failed)

    # -- messages -------------------------------------------------------------------------
    def fit_error(self) -> str:
        """Volcano's job-level summary, e.g.
        ``pod group is not ready, 2 Pending, 3 minAvailable; Pending: 2 Unschedulable``."""
        by_status: Counter[str] = Counter()
        for status, tasks in self.task_status_index.items():
            if tasks:
                by_status[str(status)] += len(tasks)
        head = "pod group is ready" if self.is_ready() else "pod group is not ready"
        parts = [f"{count} {status}" for status, count in by_status.items()]
        parts.append(f"{self.min_available} minAvailable")
        # Go's sort.Strings over the whole "<count> <status>" texts, minAvailable among them
        message = f"{head}, {', '.join(sorted(parts))}"
        pending = self.task_status_index.get(TaskStatus.PENDING, {})
        reasons: Counter[str] = Counter()
        for task in pending.values():
            reasons[
                "Schedulable"
                if task.uid not in self.nodes_fit_errors and task.last_node
                else "Unschedulable"
            ] += 1
        if reasons:
            message += "; Pending: " + ", ".join(sorted(f"{n} {r}" for r, n in reasons.items()))
        origin = next(((tid, fe) for tid, fe in self.nodes_fit_errors.items()), None)
        if origin is not None:
            origin_task = self.tasks.get(origin[0])
            if origin_task is not None:
                message += f". Origin reason is {origin_task.name}: {origin[1]}"
        return message

    def clone(self) -> JobInfo:
        copy = JobInfo(
            uid=self.uid,
            name=self.name,
            namespace=self.namespace,
            podgroup=self.podgroup.clone(),
            queue=self.queue,
            priority=self.priority,
            min_available=self.min_available,
            preemptable=self.preemptable,
        )
        for task in self.tasks.values():
            copy.add_task(task.clone())
        return copy


def integral(resources: Resource) -> bool:
    """Whether every value of ``resources`` is integral (as Kubernetes quantities in milli-CPU
    and bytes are), so that sums of such values do not depend on the order."""
    if not (float(resources.milli_cpu).is_integer() and float(resources.memory).is_integer()):
        return False
    return all(float(value).is_integer() for value in resources.scalars.values())


def _only_queue_allocation_gate(task: TaskInfo) -> bool:
    gates = (task.pod.get("spec") or {}).get("schedulingGates") or []
    return len(gates) == 1 and (gates[0] or {}).get("name") == QUEUE_ALLOCATION_GATE
