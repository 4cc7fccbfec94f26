"""capacity: queues with an explicit ``spec.deserved``, lending idle capacity and reclaiming it.

The alternative to ``proportion`` (a conf naming both gets a warning): instead of dividing the
cluster by weight, each queue states what it deserves per resource. A queue may allocate up to
its *real capability* — its ``capability``, capped by what the other queues' ``guarantee``
leaves — so it borrows what others leave idle. A queue still within its deserved share on a
resource a waiting task asks for may reclaim (``preemptive``); a running task is a reclaim
victim while its queue is above deserved on a resource that task uses and would stay at or above
its guarantee. A queue without ``deserved`` is best effort: its share is fixed at 1, so it goes
after every queue still below its deserved share and is reclaimed from first.

With ``enableHierarchy`` the queues form a tree through ``spec.parent`` under ``root``
(:mod:`scheduler.framework.queuetree`): children inherit the capability dimensions they leave
unset, a parent's real capability bounds its children's, only leaf queues take jobs, and the
quota checks run on a queue and all its ancestors. ``ancestorReclaimLevel`` (default 0) extends
the reclaim checks to that many levels of ancestors. A queue whose ``spec.parent`` names a
queue that does not exist, the queues of a cycle of parents and the queues below them are left
out: their jobs are invalid (the PodGroup's condition and the pods' name the queue and the
cycle), each such Queue gets one Warning event, and every other queue is scheduled as if they
did not exist. Volcano stops the whole plugin for these instead; Lahar still does for a job in
a queue with children, as Volcano does, logged naming the queue. Volcano's
``plugins/capacity/capacity.go`` is the reference; its queue-admission scheduling gates are not
implemented.

DRA quota (:mod:`scheduler.framework.draquota`): a queue's lists may name
``deviceclass/<class>`` and ``<dimension>.deviceclass/<class>``; a task whose claims would take
its queue (or an ancestor) past such a capability is not allocatable, and a job whose minimum
claims would is not enqueued (``capacity.DynamicResourceAllocationEnable``, default on;
capacity dimensions with ``capacity.DRAConsumableCapacityEnable``, default the
``DRAConsumableCapacity`` gate, as in Volcano).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.resource_dims import (
    exceeded_on_request,
    intersects,
    over_on_declared,
    within_on_some,
)
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, QueueID, Vote
from scheduler.framework import hooks
from scheduler.framework.arguments import arg, note, notes_field
from scheduler.framework.draquota import DraQuotaLedger
from scheduler.framework.gangvictims import EvictionContext, EvictionKind
from scheduler.framework.plugin import PluginBase
from scheduler.framework.queuetree import (
    ROOT_QUEUE,
    LeftOutReporter,
    QueueAttr,
    QueueTree,
    QueueTreeError,
    build_flat_attrs,
    build_tree_attrs,
)
from scheduler.framework.session import Session

__all__ = ["Capacity", "CapacityArgs"]

log = structlog.get_logger("lahar.plugins.capacity")


@dataclass(frozen=True, slots=True)
class CapacityArgs:
    ancestor_reclaim_level: int = arg("ancestorReclaimLevel", 0)
    dra: bool = arg("capacity.DynamicResourceAllocationEnable", True)
    """DeviceClass quota (Volcano's default: the ``DynamicResourceAllocation`` gate, on)."""
    dra_consumable: bool | None = arg("capacity.DRAConsumableCapacityEnable", None)
    """Also the capacity dimensions; unset: the ``DRAConsumableCapacity`` gate as the
    ``predicates`` plugin's ``predicate.DRAFeatureGates`` (and ``--feature-gates``) set it."""
    notes: tuple[str, ...] = notes_field()

    def __post_init__(self) -> None:
        # Volcano's parseArguments: a negative level is logged and 0 is used.
        if self.ancestor_reclaim_level < 0:
            note(self, f"argument 'ancestorReclaimLevel' is {self.ancestor_reclaim_level}: it "
                       f"cannot be negative; 0 is used, as in Volcano")
            object.__setattr__(self, "ancestor_reclaim_level", 0)
        if self.dra_consumable is not None and not isinstance(self.dra_consumable, bool):
            note(self, f"argument 'capacity.DRAConsumableCapacityEnable' is "
                       f"{self.dra_consumable!r}: it must be true or false; the "
                       f"DRAConsumableCapacity gate's value is used")
            object.__setattr__(self, "dra_consumable", None)


class Capacity(PluginBase[CapacityArgs]):
    NAME = "capacity"
    Args = CapacityArgs
    FLAGS = ("enableHierarchy",)
    """PluginOption switches read here rather than by the session."""

    # -- session open: the queues' figures ------------------------------------------------
    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        self.attrs: dict[QueueID, QueueAttr] = {}
        self.tree: QueueTree | None = None
        self.left_out: dict[QueueID, str] = {}
        """Queues with no place in the hierarchy → why (their jobs are invalid)."""
        self.ready = True
        self.error = ""
        self.dra = DraQuotaLedger(session, (), consumable=False)
        self.hierarchy = any(entry.plugin is self and bool(entry.flags.get("enableHierarchy"))
                             for entry in session.plugin_entries())
        jobs, total = session.jobs.values(), session.total_resource
        if not self.hierarchy:
            self.attrs = build_flat_attrs(session.queues, jobs, total)
            self._open_dra(session)
            return
        try:
            self.tree, self.attrs = build_tree_attrs(session.queues, jobs, total)
        except QueueTreeError as exc:
            # A job in a queue with children: as Volcano, the plugin stops for the cycle.
            self.error = f"queue hierarchy unusable: {exc}"
            log.error("capacity admits and places nothing this cycle", error=self.error)
            self.ready = False
            return
        self.left_out = self.tree.left_out
        self._report_left_out(session)
        self._open_dra(session)

    # -- DRA quota --------------------------------------------------------------------------
    def _open_dra(self, session: Session) -> None:
        """Each queue's DeviceClass quota, with the claims of its allocated tasks counted
        (Volcano's ``buildQueueAttrs`` → ``newDRAQuotaAttr`` and ``addTaskDRAAllocated``)."""
        queues = [session.queues[uid] for uid in self.attrs if uid in session.queues] \
            if self.args.dra else []
        self.dra = DraQuotaLedger(session, queues, consumable=self.args.dra_consumable)
        if not self.dra:
            return
        for job in session.jobs.values():
            attr = self.attrs.get(job.queue)
            if attr is not None:
                for task in job.tasks_in(ALLOCATED_STATUS):
                    self.dra.move(self._uids(attr), task, +1)

    def _uids(self, attr: QueueAttr) -> list[QueueID]:
        return [a.uid for a in self._chain(attr)]

    def allocatable_reason(self, queue: QueueInfo, task: TaskInfo) -> str | None:
        """Why the last Allocatable refused ``task`` on a DeviceClass quota (Volcano logs
        ``Queue <q> DRA resource insufficient for candidate <t>``)."""
        return self.dra.reason(queue, task) if self.dra else None

    def _report_left_out(self, session: Session) -> None:
        """Once per change, through the sink when it can (the cache remembers what it told);
        otherwise logged every session."""
        problems = {session.queues[uid].name: reason for uid, reason in self.left_out.items()}
        if isinstance(session.sink, LeftOutReporter):
            session.sink.report_left_out("Queue", problems)
        elif problems:
            log.warning("queues left out of the hierarchy", queues=problems)

    # -- helpers ----------------------------------------------------------------------------
    def _chain(self, attr: QueueAttr) -> Iterator[QueueAttr]:
        """The queue, then its ancestors up to ``root``."""
        yield attr
        for uid in reversed(attr.ancestors):
            yield self.attrs[uid]

    def _is_leaf(self, queue: QueueID) -> bool:
        return self.tree is None or self.tree.is_leaf(queue)

    def _ancestor_at(self, attr: QueueAttr, depth: int) -> QueueID | None:
        return attr.ancestors[-depth] if 0 < depth <= len(attr.ancestors) else None

    @staticmethod
    def _compare_share(left: QueueAttr, right: QueueAttr) -> int:
        if left.share == right.share:
            left_has, right_has = not left.deserved.is_empty(), not right.deserved.is_empty()
            return 0 if left_has == right_has else (-1 if left_has else 1)
        return -1 if left.share < right.share else 1

    @staticmethod
    def _common_level(left: QueueAttr, right: QueueAttr) -> int:
        """Index in ``ancestors`` of the deepest ancestor both share."""
        level = 0
        for i, (a, b) in enumerate(zip(left.ancestors, right.ancestors, strict=False)):
            if a != b:
                break
            level = i
        return level

    # -- queue order ------------------------------------------------------------------------
    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        if not self.ready:
            return 0  # Volcano registers no queue order for an unusable hierarchy
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        la, ra = self.attrs.get(left.uid), self.attrs.get(right.uid)
        if la is None or ra is None:
            return 0
        if not self.hierarchy:
            return self._compare_share(la, ra)
        left_leaf, right_leaf = self._is_leaf(la.uid), self._is_leaf(ra.uid)
        if left_leaf != right_leaf:
            return -1 if left_leaf else 1
        if not left_leaf:
            return self._compare_share(la, ra)
        # Two leaves compete through their ancestors just below the deepest common one.
        level = self._common_level(la, ra)
        lp = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la.uid
        rp = ra.ancestors[level + 1] if level + 1 < len(ra.ancestors) else ra.uid
        return self._compare_share(self.attrs[lp], self.attrs[rp])

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo,
                           preemptor_queue: QueueInfo) -> int:
        """With hierarchy: victims from queues closer to the reclaimer's go first."""
        if not self.hierarchy or not self.ready:
            return 0
        la, ra = self.attrs.get(left.uid), self.attrs.get(right.uid)
        pa = self.attrs.get(preemptor_queue.uid)
        if la is None or ra is None or pa is None:
            return 0
        left_level, right_level = self._common_level(la, pa), self._common_level(ra, pa)
        if left_level == right_level:
            return 0
        return -1 if left_level > right_level else 1

    # -- admission and allocation -----------------------------------------------------------
    def job_valid(self, job: JobInfo) -> tuple[str, str] | None:
        """A job of a queue left out of the hierarchy is invalid, with the queue's reason."""
        reason = self.left_out.get(job.queue)
        if reason is None:
            return None
        return "InvalidQueue", f"{reason}; the queue's jobs are left out of scheduling"

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if not queue.is_open or not self.ready or not self._is_leaf(queue.uid) \
                or queue.uid in self.left_out:
            return False
        attr = self.attrs.get(queue.uid)
        if attr is None:
            return True
        self.dra.refusals.pop(task.uid, None)
        for a in self._chain(attr):
            if self.dra and self.dra.exceeded(a.uid, task) is not None:
                return False
            if exceeded_on_request(a.allocated + task.resreq, a.real_capability, task.resreq):
                return False
        return True

    def job_enqueueable(self, job: JobInfo) -> Vote:
        if not self.ready:
            job.enqueue_message = self.error
            return Vote.REJECT
        if not self._is_leaf(job.queue) or job.queue in self.left_out:
            return Vote.REJECT
        queue = self.ssn.queues.get(job.queue)
        attr = self.attrs.get(job.queue)
        if queue is None or attr is None:
            return Vote.REJECT
        if not queue.is_open:
            job.enqueue_message = f"queue {queue.name} is {queue.state}: it admits no new jobs"
            return Vote.REJECT
        minimum = job.podgroup.min_resources
        min_dra = self._job_min_dra(job)
        if minimum is None and min_dra is None:
            return Vote.PERMIT
        for a in self._chain(attr):
            short: list[str] = []
            if minimum is not None:
                needed = minimum.clone().add(a.allocated).add(a.inqueue).sub(a.elastic)
                short = list(exceeded_on_request(needed, a.real_capability, minimum))
            if not short and min_dra is not None and self.dra.enqueue_exceeded(a.uid, min_dra):
                short = ["dra-resource-exceeded"]  # Volcano's jobEnqueueable reason
            if short:
                job.enqueue_message = "queue resource quota insufficient: " + ", ".join(
                    f"insufficient {name}" for name in short)
                return Vote.REJECT
        return Vote.PERMIT

    def _job_min_dra(self, job: JobInfo) -> dict[str, Any] | None:
        attr = self.attrs.get(job.queue)
        return None if attr is None or not self.dra else self.dra.job_minimum(
            job, self._uids(attr))

    def job_enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is None:
            return
        min_dra = self._job_min_dra(job)
        if min_dra is not None:
            self.dra.enqueued(self._uids(attr), min_dra)
        minimum = job.podgroup.min_resources
        if minimum is None:
            return
        reserved = job.deduct_sched_gated(minimum.clone())
        for a in self._chain(attr):
            a.inqueue.add(reserved)

    # -- reclaim ----------------------------------------------------------------------------
    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Whether ``task`` of ``queue`` may reclaim from other queues."""
        if not self.ready or not queue.is_open:
            return False
        attr = self.attrs.get(queue.uid)
        if attr is None:
            return False
        request = task.resreq
        future = attr.allocated + request
        if exceeded_on_request(future, attr.real_capability, request):
            return False
        if within_on_some(future, attr.deserved, request):
            return True
        if not self.hierarchy:
            return False
        for depth in range(1, self.args.ancestor_reclaim_level + 1):
            uid = self._ancestor_at(attr, depth)
            if uid is None or uid == ROOT_QUEUE:
                continue
            ancestor = self.attrs[uid]
            if within_on_some(ancestor.allocated + request, ancestor.deserved, request):
                return True
        return False

    def reclaimable(self, reclaimer: TaskInfo,
                    candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        if not self.ready:
            return [], Vote.REJECT
        reclaimer_job = self.ssn.jobs.get(reclaimer.job)
        reclaimer_attr = self.attrs.get(reclaimer_job.queue) if reclaimer_job else None
        if reclaimer_attr is None:
            return [], Vote.REJECT
        level = self.args.ancestor_reclaim_level if self.hierarchy else 0
        allocations: dict[QueueID, Resource] = {}
        victims: list[TaskInfo] = []
        for victim in self._victim_order(reclaimer, candidates):
            job = self.ssn.jobs.get(victim.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is None or not intersects(victim.resreq, reclaimer.init_resreq,
                                              ignore_pods=True):
                continue
            allocated = allocations.setdefault(attr.uid, attr.allocated.clone())
            if not attr.guarantee.less_equal(allocated - victim.resreq):
                continue  # taking it would push its queue below its guarantee
            if not intersects(victim.resreq, attr.deserved):
                # Nothing of what it uses is deserved by its queue: always a victim, unless both
                # queues sit under a shared ancestor and the reclaimer's queue deserves none of
                # what it asks either (no real contention inside that subtree).
                if level and self._share_ancestor(reclaimer_attr, attr, level) and not intersects(
                        reclaimer.resreq, reclaimer_attr.deserved):
                    continue
            elif not over_on_declared(allocated, attr.deserved, victim.resreq):
                continue
            lowered = self._ancestors_over_deserved(reclaimer_attr, attr, victim, level,
                                                    allocations)
            if lowered is None:
                continue
            for resource in (allocated, *lowered):
                resource.sub(victim.resreq)
            victims.append(victim)
        return victims, Vote.PERMIT

    def unified_evictable(self, context: EvictionContext,
                          candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        """Gang eviction (Volcano's capacity ``UnifiedEvictableFn``): gangpreempt stays inside
        a queue, so every candidate; gangreclaim takes a task only while its queue stays at or
        above its guarantee and holds more than it deserves of what the task uses."""
        if context.kind is EvictionKind.GANG_PREEMPT:
            return list(candidates), Vote.PERMIT
        if not self.ready:
            return [], Vote.REJECT
        allocations: dict[QueueID, Resource] = {}
        victims: list[TaskInfo] = []
        for task in candidates:
            job = self.ssn.jobs.get(task.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is None:
                continue
            allocated = allocations.setdefault(attr.uid, attr.allocated.clone())
            if not attr.guarantee.less_equal(allocated - task.resreq):
                continue  # the queue would drop below its guarantee
            if (not intersects(task.resreq, attr.deserved)
                    or over_on_declared(allocated, attr.deserved, task.resreq)):
                allocated.sub(task.resreq)
                victims.append(task)
        return victims, Vote.PERMIT

    def _ancestors_over_deserved(self, reclaimer: QueueAttr, victim_queue: QueueAttr,
                                 victim: TaskInfo, level: int,
                                 allocations: dict[QueueID, Resource]) -> list[Resource] | None:
        """The victim's ancestors (within ``level``, not shared with the reclaimer) must each be
        over deserved on a resource it uses; their running allocations, else None."""
        lowered: list[Resource] = []
        for depth in range(1, level + 1):
            uid = self._ancestor_at(victim_queue, depth)
            if uid is None or uid == ROOT_QUEUE or uid == self._ancestor_at(reclaimer, depth):
                continue
            ancestor = self.attrs[uid]
            allocated = allocations.setdefault(uid, ancestor.allocated.clone())
            lowered.append(allocated)
            if intersects(victim.resreq, ancestor.deserved) and not over_on_declared(
                    allocated, ancestor.deserved, victim.resreq):
                return None
        return lowered

    def _share_ancestor(self, left: QueueAttr, right: QueueAttr, level: int) -> bool:
        """Whether the two queues have a common non-root ancestor within ``level`` levels."""
        def within(attr: QueueAttr) -> set[QueueID]:
            found = {self._ancestor_at(attr, depth) for depth in range(1, level + 1)}
            return {uid for uid in found if uid is not None and uid != ROOT_QUEUE}
        return bool(within(left) & within(right))

    def _victim_order(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Candidates in Volcano's eviction order: within a job the last task first; across
        queues the queue ``victim_queue_order`` (else the reverse queue order) puts first;
        otherwise the job that would be scheduled last first."""
        ssn = self.ssn
        preemptor = ssn.jobs.get(reclaimer.job)

        job_orders = [p.job_order for tier in ssn.hooks(hooks.JobOrder) for p in tier]

        def job_then_task(lj: JobInfo, rj: JobInfo, left: TaskInfo, right: TaskInfo) -> int:
            # only the plugins' job order, without the creation-time fallback (Volcano's
            # JobOrderCompareFn); ties go to the reverse task order
            by_job = next((c for c in (order(lj, rj) for order in job_orders) if c), 0)
            return -by_job or -ssn.task_order(left, right)

        def compare(left: TaskInfo, right: TaskInfo) -> int:
            if left.job == right.job:
                return -ssn.task_order(left, right)
            lj, rj = ssn.jobs.get(left.job), ssn.jobs.get(right.job)
            if lj is None or rj is None:  # a task whose PodGroup is gone goes first
                return -ssn.task_order(left, right) if lj is rj else (-1 if lj is None else 1)
            lq, rq = ssn.queues.get(lj.queue), ssn.queues.get(rj.queue)
            pq = ssn.queues.get(preemptor.queue) if preemptor is not None else None
            if lj.queue != rj.queue and lq is not None and rq is not None and pq is not None:
                # Volcano's session asks every plugin's victim queue order; capacity is the
                # only Volcano plugin that has one, so asking this plugin's is the same.
                return self.victim_queue_order(lq, rq, pq) or -ssn.queue_order(lq, rq)
            return job_then_task(lj, rj, left, right)

        return sorted(candidates, key=functools.cmp_to_key(compare))

    # -- in-session changes -----------------------------------------------------------------
    def _move(self, task: TaskInfo, sign: int) -> None:
        job = self.ssn.jobs.get(task.job)
        attr = self.attrs.get(job.queue) if job is not None else None
        if attr is None:
            return
        for a in self._chain(attr):
            if sign > 0:
                a.allocated.add(task.resreq)
            else:
                a.allocated.sub(task.resreq)
        self.dra.move(self._uids(attr), task, sign)
        # As in Volcano only the job's own queue re-computes its share here; ancestors keep
        # the share they opened the session with.
        attr.update_share()

    def on_allocate(self, task: TaskInfo) -> None:
        self._move(task, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._move(task, -1)

