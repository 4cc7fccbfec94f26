"""allocate: gang placement of pending tasks, queue by queue, job by job.

Queues are served round-robin in queue order (re-evaluated after every job turn, since shares
move as tasks are placed) and an overused queue is dropped for the rest of the action. A job's
tasks are placed in task order inside one Statement: onto nodes whose current idle holds them
(allocate), else onto nodes whose future idle will (pipeline). A task that fits no node ends
the job's turn unless the tasks left can still make the gang (``need_continue_allocating``);
siblings of a role that already failed are skipped without filtering nodes again. The
statement is committed only when the gang is ready, and the job goes back to its queue while
it has tasks left; a job that is merely pipelined keeps its reservations for the rest of the
cycle; anything else is discarded. A ready job yields after each further task so other jobs
get their turn.

A job with a network-topology constraint (when a plugin gives HyperNode gradients) takes its
turn through :func:`~scheduler.framework.hypernodes.place_in_hypernodes`: the gang is tried
inside each candidate HyperNode, lowest tier first, and kept in the best one that holds it
(Volcano's ``allocateForJob``); while the HyperNode tree is not ready such a job waits.

A job whose PodGroup has ``spec.subGroupPolicy`` takes its turn through
:func:`~scheduler.framework.subjobs.place_partitions`: each partition is a gang of its own,
placed under its own constraint inside the HyperNode chosen for the job.
"""

from __future__ import annotations

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PHASE_INQUEUE
from scheduler.api.queue import QueueInfo
from scheduler.api.status import FitErrors
from scheduler.api.subjob import SubJob
from scheduler.api.task import TaskInfo
from scheduler.api.types import QueueID, TaskStatus
from scheduler.framework import hooks as h
from scheduler.framework.heap import PriorityQueue
from scheduler.framework.hypernodes import Attempt, has_network_topology, place_in_hypernodes
from scheduler.framework.nominated import nominated_node
from scheduler.framework.select import best_node, feasible_nodes
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.framework.subjobs import (
    Worksheet,
    default_sub_job_candidates,
    place_partitions,
    sub_job_pipelined,
    sub_job_ready,
    worksheet_of,
)

__all__ = ["Allocate"]

_LIMIT = {
    "proportion": " within its deserved share",
    "capacity": " within its capability",
}
"""What the plugin refusing Allocatable holds a queue to, for the task's reason."""


def _refusal(session: Session, queue: QueueInfo, task: TaskInfo) -> str:
    reason = session.allocatable_reason(queue, task)
    if reason:
        return f": {reason}"
    return _LIMIT.get(session.allocatable_refused_by(queue, task) or "", "")


class Allocate:
    NAME = "allocate"

    def __init__(self) -> None:
        self._within: str = ""
        """The HyperNode the job's turn under way is confined to (``""``: anywhere)."""
        self._placed = 0
        self._sheets: dict[str, Worksheet] = {}
        """Per job with partitions, what it has left to place (Volcano's worksheet)."""

    def execute(self, session: Session) -> None:
        self._within = ""
        self._sheets = {}
        topology = any(session.hooks(h.HyperNodeGradient))
        enqueue_on = "enqueue" in session.enabled_actions
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order)
        jobs_by_queue: dict[QueueID, PriorityQueue[JobInfo]] = {}
        pending_tasks: dict[str, PriorityQueue[TaskInfo]] = {}
        # A job's turn changes only its own tasks, and it is out of its queue meanwhile.
        order_key = session.job_order_key()
        for job in session.active_jobs.values():  # a settled job has no pending task
            if job.is_pending():
                if enqueue_on:
                    continue
                job.podgroup.phase = PHASE_INQUEUE
            queue = session.queues.get(job.queue)
            if queue is None or not session.is_valid(job):
                continue
            candidates = [
                t
                for t in job.task_status_index.get(TaskStatus.PENDING, {}).values()
                if not t.best_effort and not t.sched_gated
            ]
            if not candidates:
                continue
            if has_network_topology(job) and not _topology_ready(session, job, candidates):
                continue
            pending_tasks[job.uid] = PriorityQueue(session.task_order, candidates)
            if job.podgroup.sub_groups:
                self._sheets[job.uid] = worksheet_of(session, job, candidates)
            if job.queue not in jobs_by_queue:
                jobs_by_queue[job.queue] = PriorityQueue(session.job_order, key=order_key)
                queues.push(queue)
            jobs_by_queue[job.queue].push(job)

        while queues:
            queue = queues.pop()
            jobs = jobs_by_queue[queue.uid]
            if session.overused(queue):
                self._explain_overused(session, queue, jobs, pending_tasks)
                continue
            if not jobs:
                continue
            job = jobs.pop()
            tasks = pending_tasks[job.uid]
            if job.podgroup.sub_groups:
                statement, more = self._allocate_partitions(session, queue, job)
            elif topology and session.hypernodes.limit(job) is not None:
                statement, tasks = self._allocate_in_hypernodes(session, queue, job, tasks)
                pending_tasks[job.uid] = tasks
                more = bool(tasks)
            else:
                statement = self._allocate_tasks(session, queue, job, tasks)
                more = bool(tasks)
            if statement is not None and session.job_ready(job):
                statement.commit()
                if more:
                    jobs.push(job)
            queues.push(queue)

    @staticmethod
    def _explain_overused(
        session: Session,
        queue: QueueInfo,
        jobs: PriorityQueue[JobInfo],
        pending_tasks: dict[str, PriorityQueue[TaskInfo]],
    ) -> None:
        """Give each job left in an overused queue a reason on its next task."""
        while jobs:
            job = jobs.pop()
            tasks = pending_tasks[job.uid]
            task = next(
                (
                    t
                    for t in (tasks.pop() for _ in range(len(tasks)))
                    if t.status is TaskStatus.PENDING
                ),
                None,
            )
            if task is None or task.uid in job.nodes_fit_errors:
                continue
            _, errors = feasible_nodes(session, task)
            job.nodes_fit_errors[task.uid] = errors or FitErrors(
                nodes=len(session.table),
                error=f"queue {queue.name} is overused: "
                "its allocation has reached its deserved share",
            )

    def _allocate_tasks(
        self,
        session: Session,
        queue: QueueInfo,
        job: JobInfo,
        tasks: PriorityQueue[TaskInfo],
        sub: SubJob | None = None,
    ) -> Statement | None:
        """One turn of ``job`` (or of its partition ``sub``): place tasks until it is ready
        or it cannot continue.

        Returns the statement when the job (partition) is ready or pipelined (Volcano's
        ``allocateResourcesForTasks``), after discarding it otherwise.
        """
        if sub is None:
            ready = session.job_ready
            pipelined = session.job_pipelined
        else:
            def ready(job: JobInfo) -> bool:
                return sub_job_ready(session, sub)

            def pipelined(job: JobInfo) -> bool:
                return sub_job_pipelined(session, sub)

        statement = Statement(session)
        while tasks:
            task = tasks.pop()
            if task.status is not TaskStatus.PENDING:
                continue
            if not session.allocatable(queue, task):
                # Say why in the most useful terms: no node at all, else the queue's share.
                _, errors = feasible_nodes(session, task)
                job.nodes_fit_errors[task.uid] = errors or FitErrors(
                    nodes=len(session.table),
                    error=f"queue {queue.name} has no room for task {task.name}"
                    + _refusal(session, queue, task),
                )
                continue
            if job.role_already_failed(task) if sub is None else _role_failed_in(job, sub, task):
                job.nodes_fit_errors[task.uid] = FitErrors(
                    nodes=len(session.table),
                    error=f"Task {task.name} with role spec {task.role} has already "
                    "predicated failed, skip",
                )
                job.unfit_tasks.add(task.uid)
                continue
            if not self._place(session, statement, job, task):
                if (
                    job.need_continue_allocating()
                    if sub is None
                    else _sub_continues(job, sub)
                ):
                    continue
                break
            if ready(job):
                break
        if ready(job) or pipelined(job):
            return statement
        self._placed = len(statement)
        statement.discard()
        return None

    def _allocate_in_hypernodes(
        self,
        session: Session,
        queue: QueueInfo,
        job: JobInfo,
        tasks: PriorityQueue[TaskInfo],
    ) -> tuple[Statement | None, PriorityQueue[TaskInfo]]:
        """One turn of a job with a network-topology constraint; returns the statement (as
        :meth:`_allocate_tasks` does) and the tasks left for its next turn."""
        view = session.hypernodes
        pending = [
            t for t in (tasks.pop() for _ in range(len(tasks))) if t.status is TaskStatus.PENDING
        ]
        left: dict[str, PriorityQueue[TaskInfo]] = {}

        def attempt(name: str) -> Attempt:
            # Inside the job's candidate, its default sub-job goes to a HyperNode that holds
            # every pending task (Volcano's allocateForSubJob with GetMinResources).
            targets = default_sub_job_candidates(session, job, name)
            if not targets:
                job.nodes_fit_errors.clear()
                job.unfit_tasks.clear()
                return Attempt(None, 0, f"its {len(pending)} pending task(s) together do not fit "
                               "the idle resources of any HyperNode there")
            closest = Attempt(None, -1)
            for target in targets:
                job.nodes_fit_errors.clear()  # each HyperNode is judged afresh (ResetFitErr)
                job.unfit_tasks.clear()
                view.trying[job.uid] = view.allocated(job)
                left[name] = PriorityQueue(session.task_order, pending)
                self._within, self._placed = target, 0
                statement = self._allocate_tasks(session, queue, job, left[name])
                if statement is not None and not len(statement):
                    statement = None  # Volcano records no solution without an operation
                error = next((str(e) for e in job.nodes_fit_errors.values()), "")
                if statement is not None:
                    return Attempt(statement, self._placed, error)
                if self._placed > closest.placed:
                    closest = Attempt(None, self._placed, error)
            return closest

        try:
            name, result, why = place_in_hypernodes(
                session, job, pending=pending, needed=_needed(session, job), attempt=attempt
            )
        finally:
            self._within = ""
            view.trying.pop(job.uid, None)
        if result is not None:
            view.set_allocated(job, view.lca(view.allocated(job), name))
            return result.statement, left[name]
        job.nodes_fit_errors.clear()
        job.unfit_tasks.clear()
        errors = FitErrors(nodes=len(session.table), error=why)
        for task in pending:
            job.nodes_fit_errors[task.uid] = errors
        return None, PriorityQueue(session.task_order)

    def _allocate_partitions(
        self, session: Session, queue: QueueInfo, job: JobInfo
    ) -> tuple[Statement | None, bool]:
        """One turn of a job with partitions; returns the statement (as
        :meth:`_allocate_tasks` does) and whether partitions are left for its next turn."""
        view = session.hypernodes

        def attempt(
            sub: SubJob, tasks: list[TaskInfo], name: str
        ) -> tuple[Statement | None, list[TaskInfo]]:
            view.trying[job.uid] = view.sub_allocated(sub.uid, list(sub.tasks.values()))
            queued = PriorityQueue(session.task_order, tasks)
            self._within, self._placed = name, 0
            statement = self._allocate_tasks(session, queue, job, queued, sub)
            return statement, [queued.pop() for _ in range(len(queued))]

        try:
            statement, sheet = place_partitions(
                session, job, sheet=self._sheets[job.uid], attempt=attempt
            )
        finally:
            self._within = ""
            view.trying.pop(job.uid, None)
        self._sheets[job.uid] = sheet
        return statement, bool(sheet.queue)

    def _place(self, session: Session, statement: Statement, job: JobInfo, task: TaskInfo) -> bool:
        """Put ``task`` on the best feasible node; False when it fits no node."""
        within = session.hypernodes.mask(self._within) if self._within else None
        # A node a preemption nominated for this pod is tried before the general search.
        nominated = nominated_node(session, task)
        if nominated is not None and within is not None and not within[nominated[0].index]:
            nominated = None
        if nominated is not None:
            node, fits_idle = nominated
        else:
            rows, errors = feasible_nodes(session, task, within=within)
            if errors is not None:
                job.nodes_fit_errors[task.uid] = errors
                job.unfit_tasks.add(task.uid)
                return False
            node, fits_idle = best_node(session, task, rows)
        status = statement.allocate(task, node) if fits_idle else statement.pipeline(task, node)
        if status is None:
            job.nodes_fit_errors.pop(task.uid, None)
            if self._within:
                view = session.hypernodes
                leaf = view.leaf_of(node.name)
                if leaf:
                    view.trying[job.uid] = view.lca(view.trying.get(job.uid, ""), leaf)
        # A vetoed placement is not a predicate failure: the job carries on with its next task.
        return True


def _role_failed_in(job: JobInfo, sub: SubJob, task: TaskInfo) -> bool:
    """Volcano's ``TaskHasFitErrors`` for a partition: a sibling of the same role in the
    same partition fitted no node."""
    return bool(task.role) and any(
        uid in sub.tasks and job.tasks[uid].role == task.role for uid in job.unfit_tasks
    )


def _sub_continues(job: JobInfo, sub: SubJob) -> bool:
    """Volcano's ``NeedContinueAllocating`` for a job with partitions: go on after a task
    that fits nowhere unless the job or the partition needs every one of its tasks."""
    return job.min_available != len(job.tasks) and sub.min_available < len(sub.tasks)


def _topology_ready(session: Session, job: JobInfo, candidates: list[TaskInfo]) -> bool:
    """Volcano skips a job with a network-topology constraint while the HyperNode tree is not
    ready; here the job's pending tasks are told why."""
    view = session.hypernodes
    if view.ready:
        return True
    problems = "; ".join(view.tree.warnings) or "the HyperNode tree could not be built"
    errors = FitErrors(
        nodes=len(session.table),
        error=f"HyperNodes are not ready for scheduling: {problems}",
    )
    for task in candidates:
        job.nodes_fit_errors[task.uid] = errors
    return False


def _needed(session: Session, job: JobInfo) -> int:
    """How many more tasks a try must place before the job can be ready or pipelined: a
    HyperNode whose nodes cannot hold that many is not worth a try. Gang's counts decide when
    gang votes on pipelining in the first tier that votes (else 1: any placement may do)."""
    voters = [tier for tier in session.hooks(h.JobPipelined) if tier]
    if not voters or not any(getattr(p, "NAME", "") == "gang" for p in voters[0]):
        return 1
    placed = job.ready_task_num() + job.waiting_task_num() + job.pending_best_effort_num()
    return max(1, job.min_available - placed)
