"""proportion: weighted max-min fair share of the cluster between queues.

Each queue's ``deserved`` share is computed once per session: the remaining cluster resources
are handed out in proportion to queue weights, each queue capped by its real capability and
its own request and raised to its guarantee, until nothing changes. Queues with a lower share
of their deserved go first; a queue may not allocate beyond its deserved share, and a job is
admitted (enqueued) only while the queue's real capability holds its ``minResources``.

The arithmetic follows Volcano's ``proportion.go`` dimension by dimension, ``pods`` included
(it is part of every request and of the cluster total, so it weighs in shares and overuse):
cpu or memory a capability leaves out is unlimited, the cluster beyond all guarantees and the
remaining share floor at 0, and a queue counts as met when its deserved stops changing.

Ours, off by default (Volcano's proportion has no DRA quota; its ``capacity`` plugin has):
``proportion.DynamicResourceAllocationEnable: true`` applies a queue's ``deviceclass/<class>``
and ``<dimension>.deviceclass/<class>`` capability to its tasks' claims and its jobs' minimum
claims as ``capacity`` does (:mod:`scheduler.framework.draquota`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Default, Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, QueueID, TaskStatus, Vote
from scheduler.framework.arguments import arg
from scheduler.framework.draquota import DraQuotaLedger
from scheduler.framework.plugin import PluginBase
from scheduler.framework.session import Session

__all__ = ["Proportion", "QueueAttr", "compute_deserved"]


@dataclass(slots=True)
class QueueAttr:
    queue: QueueInfo
    weight: int
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)
    deserved: Resource = field(default_factory=Resource)
    real_capability: Resource = field(default_factory=Resource)
    guarantee: Resource = field(default_factory=Resource)
    share: float = 0.0

    def update_share(self) -> None:
        """Largest ``allocated / deserved`` over the dimensions deserved holds."""
        share = 0.0
        for name in self.deserved.resource_names():
            share = max(share, self.allocated.get(name) / self.deserved.get(name))
        self.share = share


_MAX_ROUNDS = 10_000
"""A bound on the water-filling rounds: Volcano stops when nothing remains or nothing moved,
which a NaN (never equal to itself) would never let happen; real inputs settle in a few
rounds per queue."""


def _has_nan(resource: Resource) -> bool:
    return any(math.isnan(value) for value in (
        resource.milli_cpu, resource.memory, *resource.scalars.values()))


def compute_deserved(attrs: list[QueueAttr], total: Resource) -> None:
    """Fill ``deserved`` of every attr (Volcano's iterative weighted water-filling); ends on
    any input."""
    remaining = total.clone()
    met: set[QueueID] = set()
    for _ in range(_MAX_ROUNDS):
        total_weight = sum(a.weight for a in attrs if a.queue.uid not in met)
        if total_weight == 0:
            return
        before = remaining.clone()
        increased, decreased = Resource(), Resource()
        for attr in attrs:
            if attr.queue.uid in met:
                continue
            old = attr.deserved.clone()
            attr.deserved.add(remaining.clone().multi(attr.weight / total_weight))
            attr.deserved.min_dimension(attr.real_capability, Default.INFINITY)
            attr.deserved.min_dimension(attr.request, Default.ZERO)
            attr.deserved.set_max(attr.guarantee)
            attr.update_share()
            # Exact equality, not the tolerance: a queue is met once nothing moves at all.
            if attr.request.less_equal(attr.deserved) or attr.deserved == old:
                met.add(attr.queue.uid)
            increased.add(attr.deserved.exceeded_part(old))
            decreased.add(old.exceeded_part(attr.deserved))
        remaining = remaining.add(decreased).exceeded_part(increased)
        if remaining.is_empty() or remaining == before or _has_nan(remaining):
            return  # the last: a NaN somewhere, which no further round removes


def _add_totals(attr: QueueAttr, job: JobInfo) -> bool:
    """Add ``job``'s allocated and requested resources to ``attr`` from its running total and
    its pending tasks (per job, not per task); only for a job whose total is exact (see
    ``JobInfo.allocated_exact``), where that equals adding every task."""
    attr.allocated.add(job.allocated)
    attr.request.add(job.allocated)
    for task in job.task_status_index.get(TaskStatus.PENDING, {}).values():
        attr.request.add(task.resreq)
    return True


def _job_queue(job: JobInfo) -> QueueID:
    return job.queue


def _settled_part(job: JobInfo) -> tuple[Resource, Resource, Resource] | None:
    """A settled job's (allocated, inqueue, elastic), as the open loop adds them for a job
    with an exact total; None (added by the loop, task by task) otherwise."""
    if not job.allocated_exact():
        return None
    if job.podgroup.min_resources is None:
        return job.allocated, Resource(), job.allocated
    return job.allocated, job.inqueue_demand() or Resource(), job.elastic_resources()


@dataclass(frozen=True, slots=True)
class ProportionArgs:
    dra: bool = arg("proportion.DynamicResourceAllocationEnable", False)
    """Ours: DeviceClass quota from the queues' capability, as the ``capacity`` plugin's."""
    dra_consumable: bool | None = arg("proportion.DRAConsumableCapacityEnable", None)
    """With ``dra``: also the capacity dimensions (unset: the ``DRAConsumableCapacity`` gate)."""


class Proportion(PluginBase[ProportionArgs]):
    NAME = "proportion"
    Args = ProportionArgs

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        self.dra = DraQuotaLedger(session, (), consumable=False)
        total = session.total_resource.clone()
        self.attrs: dict[QueueID, QueueAttr] = {}
        by_task: set[QueueID] = set()
        """Queues whose totals are summed task by task (a job's running total is not exact)."""
        guarantees = Resource()
        for candidate in session.queues.values():
            if candidate.guarantee is not None:
                guarantees.add(candidate.guarantee)
        # Queues in the order their first job comes, as adding job by job would make them.
        for uid in dict.fromkeys(map(_job_queue, session.jobs.values())):
            queue = session.queues.get(uid)
            if queue is not None:
                self.attrs[uid] = QueueAttr(
                    queue=queue,
                    weight=queue.weight,
                    guarantee=queue.guarantee.clone() if queue.guarantee else Resource(),
                    real_capability=queue.real_capability(
                        total=total, total_guarantee=guarantees
                    ),
                )
        kept, jobs = session.settled_totals("proportion", _settled_part, width=3)
        for uid, (allocated, inqueue, elastic) in kept.items():
            attr = self.attrs.get(uid)
            if attr is not None:
                attr.allocated.add(allocated)
                attr.request.add(allocated)  # a settled job has no pending task
                attr.inqueue.add(inqueue)
                attr.elastic.add(elastic)
        for job in jobs:
            attr = self.attrs.get(job.queue)
            if attr is None:
                continue
            exact = job.allocated_exact()
            if attr.queue.uid not in by_task and not (exact and _add_totals(attr, job)):
                by_task.add(attr.queue.uid)
            if exact and job.podgroup.min_resources is None:
                # No reservation, and the elastic part is the whole allocation: an exact total
                # has no negative and no zero value, so its exceeded part over nothing is itself.
                attr.elastic.add(job.allocated)
                continue
            demand = job.inqueue_demand()
            if demand is not None:
                attr.inqueue.add(demand)
            attr.elastic.add(job.elastic_resources())
        if by_task:
            self._sum_by_task(session, by_task)
        compute_deserved(list(self.attrs.values()), total)
        for attr in self.attrs.values():
            attr.update_share()
        if self.args.dra:
            self._open_dra(session)

    def _sum_by_task(self, session: Session, queues: set[QueueID]) -> None:
        """Allocated and requested totals of ``queues`` added up task by task, in job order."""
        for uid in queues:
            self.attrs[uid].allocated = Resource()
            self.attrs[uid].request = Resource()
        for job in session.jobs.values():
            if job.queue not in queues:
                continue
            attr = self.attrs[job.queue]
            for task in job.tasks.values():
                if task.status & ALLOCATED_STATUS:
                    attr.allocated.add(task.resreq)
                    attr.request.add(task.resreq)
                elif task.status is TaskStatus.PENDING:
                    attr.request.add(task.resreq)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        ls = self.attrs[left.uid].share if left.uid in self.attrs else 0.0
        rs = self.attrs[right.uid].share if right.uid in self.attrs else 0.0
        return 0 if ls == rs else (-1 if ls < rs else 1)

    def overused(self, queue: QueueInfo) -> bool:
        attr = self.attrs.get(queue.uid)
        if attr is None:
            return False
        return attr.deserved.less_equal(attr.allocated, Default.ZERO)

    def _open_dra(self, session: Session) -> None:
        queues = [attr.queue for attr in self.attrs.values()]
        consumable = self.args.dra_consumable
        self.dra = DraQuotaLedger(session, queues, consumable=consumable
                                  if isinstance(consumable, bool) else None)
        if self.dra:
            for job in session.jobs.values():
                for task in job.tasks_in(ALLOCATED_STATUS):
                    self.dra.move((job.queue,), task, +1)

    def allocatable_reason(self, queue: QueueInfo, task: TaskInfo) -> str | None:
        return self.dra.reason(queue, task) if self.dra else None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if not queue.is_open:
            return False
        attr = self.attrs.get(queue.uid)
        if attr is None:
            return True
        self.dra.refusals.pop(task.uid, None)
        if self.dra and self.dra.exceeded(queue.uid, task) is not None:
            return False
        future = attr.allocated.clone().add(task.resreq)
        return not future.exceeding_on(attr.deserved, task.resreq)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """A queue may reclaim for ``task`` while the task keeps it within its deserved share
        (Volcano registers its allocatable check as PreemptiveFn)."""
        return self.allocatable(queue, task)

    def reclaimable(
        self, reclaimer: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        """Victims from queues above their deserved share, each counted off as it is chosen."""
        victims: list[TaskInfo] = []
        remaining: dict[QueueID, Resource] = {}
        for task in candidates:
            job = self.ssn.jobs.get(task.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if job is None or attr is None:
                continue
            allocated = remaining.setdefault(job.queue, attr.allocated.clone())
            if not allocated.less_equal(attr.deserved, Default.ZERO):
                allocated.sub(task.resreq)
                victims.append(task)
        return victims, Vote.PERMIT

    def job_enqueueable(self, job: JobInfo) -> Vote:
        queue = self.ssn.queues.get(job.queue)
        if queue is None or not queue.is_open:
            state = "missing" if queue is None else queue.state
            job.enqueue_message = f"queue {job.queue} is {state}: it admits no new jobs"
            return Vote.REJECT
        minimum = job.podgroup.min_resources
        attr = self.attrs.get(job.queue)
        if minimum is None or attr is None:
            return Vote.PERMIT
        needed = minimum.clone().add(attr.allocated).add(attr.inqueue).sub(attr.elastic)
        short = list(needed.exceeding_on(attr.real_capability, minimum))
        min_dra = self.dra.job_minimum(job, (job.queue,)) if self.dra else None
        if not short and min_dra is not None and self.dra.enqueue_exceeded(job.queue, min_dra):
            short = ["dra-resource-exceeded"]
        if not short:
            return Vote.PERMIT
        job.enqueue_message = "queue resource quota insufficient: " + ", ".join(
            f"insufficient {name}" for name in short
        )
        return Vote.REJECT

    def job_enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is not None and job.podgroup.min_resources is not None:
            attr.inqueue.add(job.enqueue_reservation())
            min_dra = self.dra.job_minimum(job, (job.queue,)) if self.dra else None
            if min_dra is not None:
                self.dra.enqueued((job.queue,), min_dra)

    def _move(self, task: TaskInfo, sign: int) -> None:
        job = self.ssn.jobs.get(task.job)
        attr = self.attrs.get(job.queue) if job is not None else None
        if attr is None:
            return
        if sign > 0:
            attr.allocated.add(task.resreq)
        else:
            attr.allocated.sub(task.resreq)
        attr.update_share()
        self.dra.move((attr.queue.uid,), task, sign)

    def on_allocate(self, task: TaskInfo) -> None:
        self._move(task, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._move(task, -1)
