"""What a session writes when it closes (Volcano's job updater and event recorder).

PodGroup phase and counters, PodGroup events, pod ``PodScheduled`` conditions with Volcano's
reasons and message shapes, and each queue's ``status.allocated``. The cache persists only what
changed, so a quiet cycle writes nothing. Settled jobs (:mod:`scheduler.framework.settled`)
are not visited: their close would derive what it derived last time. Close records which jobs
will close the same way next cycle, for the next snapshot to settle them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import (
    PHASE_COMPLETED,
    PHASE_INQUEUE,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_UNKNOWN,
)
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.status import ALL_NODES_UNAVAILABLE
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, COMPLETED_STATUS, JobID, QueueID, TaskStatus
from scheduler.devices.base import queue_device_usage
from scheduler.framework.draquota import queue_status_dra
from scheduler.framework.session import Session

__all__ = [
    "close_session",
    "nominated_node",
    "podgroup_phase",
    "queue_allocations",
    "rfc3339",
    "roll_up",
    "task_reason",
    "unready_tasks",
]

_SCHEDULED = TaskStatus.RUNNING | TaskStatus.BOUND | TaskStatus.FAILED | TaskStatus.SUCCEEDED


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def podgroup_phase(session: Session, job: JobInfo) -> str:
    """Volcano's ``getPodGroupPhase`` for the end of this session."""
    running = job.count(TaskStatus.RUNNING)
    for condition in job.podgroup.conditions:
        if (
            running
            and condition.get("type") == "Unschedulable"
            and condition.get("status") == "True"
            and condition.get("transitionID") == session.uid
        ):
            return PHASE_UNKNOWN
    # Counted from the status index rather than by listing tasks: this runs for every job.
    releasing_on_node = sum(
        1 for t in job.task_status_index.get(TaskStatus.RELEASING, {}).values() if t.node_name)
    scheduled = job.count(_SCHEDULED) + releasing_on_node
    if scheduled and scheduled >= job.podgroup.min_member:
        if not job.count(_SCHEDULED & ~COMPLETED_STATUS) and not releasing_on_node:
            return PHASE_COMPLETED
        return PHASE_RUNNING
    return PHASE_INQUEUE if job.podgroup.phase == PHASE_INQUEUE else PHASE_PENDING


def task_reason(job: JobInfo, task: TaskInfo, base: str = "") -> tuple[str, str]:
    """``(reason, message)`` of a task's PodScheduled=False condition after this cycle;
    ``base`` is the job's ``fit_error()`` (the message of a task with no reason of its own)."""
    where = f"Pod {task.namespace}/{task.name} can possibly be assigned to"
    if task.status is TaskStatus.ALLOCATED:
        return "Schedulable", f"{where} {task.node_name}, once minAvailable is satisfied"
    if task.status is TaskStatus.PIPELINED:
        return (
            "Unschedulable",
            f"{where} {task.node_name}, once resource is released and minAvailable is satisfied",
        )
    errors = job.nodes_fit_errors.get(task.uid)
    if errors is not None:
        return errors.condition_reason, str(errors)
    if task.last_node:
        return "Schedulable", f"{where} {task.last_node}, once minAvailable is satisfied"
    # Volcano's RecordJobStatusEvent: a pending task with no reason of its own gets the job's
    # FitError() (its summary); "all nodes are unavailable" only when that is empty.
    return "Unschedulable", job.job_fit_error or base or ALL_NODES_UNAVAILABLE


def unready_tasks(job: JobInfo) -> int:
    """Tasks the gang still lacks, as Volcano's gang ``OnSessionClose`` counts them for the
    ``unschedule_task_count`` metric: ``minAvailable`` minus ready tasks (best-effort pending
    ones count as ready), 0 for a ready job."""
    if job.is_ready():
        return 0
    return job.min_available - job.ready_task_num() - job.pending_best_effort_num()


def nominated_node(task: TaskInfo) -> str:
    """The node to write as the pod's ``nominatedNodeName`` after this cycle, or ``""``.

    Volcano's ``TaskSchedulingReason``: only a task pipelined onto the node where victims were
    evicted for it, which the preempt and reclaim actions record as ``task.nominated_node``.
    """
    if task.status is TaskStatus.PIPELINED and task.nominated_node == task.node_name:
        return task.nominated_node
    return ""


def close_session(session: Session) -> None:
    for entry in session.plugin_entries():
        started = time.perf_counter()
        entry.plugin.on_session_close(session)
        session.time_plugin(entry, "OnSessionClose", time.perf_counter() - started)
    now = rfc3339(session.clock())
    closing = session.closing_jobs()
    steady: set[JobID] = set()
    for job in closing:
        if _close_job(session, job, now):
            steady.add(job.uid)
    session.snapshot.closed_jobs = [job.uid for job in closing]
    session.snapshot.steady_closed = steady
    allocated = roll_up(session.queues, queue_allocations(session))
    for uid, scalars in queue_status_dra(session).items():
        if uid in allocated:  # devices of DRA claims, per DeviceClass
            allocated[uid].scalars.update(scalars)
    for uid, queue in session.queues.items():
        session.sink.update_queue_allocated(queue, allocated[uid])


def queue_allocations(session: Session) -> dict[str, Resource]:
    """Each queue's ``status.allocated``: the requests of its jobs' allocated tasks, plus the
    per-card device usage of tasks on nodes with devices.

    Without device nodes a job's running total stands for its tasks, so the cost is per job
    rather than per task; a queue with a job whose total is not exact (``allocated_exact``)
    is summed task by task, in the order a full computation adds them. With device nodes
    every job is summed task by task, settled jobs' sums kept from earlier cycles.
    """
    allocated: dict[str, Resource] = {uid: Resource() for uid in session.queues}
    if session.has_device_nodes():
        kept, jobs = session.settled_totals(
            "close.allocated-devices", lambda job: (_held(session, job, Resource()),), width=1)
        _add_kept(allocated, kept)
        for job in jobs:
            total = allocated.get(job.queue)
            if total is not None:
                _held(session, job, total)
        return allocated
    by_task: set[str] = set()
    kept, jobs = session.settled_totals("close.allocated", _exact_allocated, width=1)
    _add_kept(allocated, kept)
    for job in jobs:
        total = allocated.get(job.queue)
        if total is None or job.queue in by_task:
            continue
        if job.allocated_exact():
            total.add(job.allocated)
        else:
            by_task.add(job.queue)
    for uid in by_task:
        allocated[uid] = Resource()
    if by_task:
        for job in session.jobs.values():
            if job.queue in by_task:
                _held(session, job, allocated[job.queue])
    return allocated


_ROOT = QueueID("root")


def roll_up(queues: Mapping[QueueID, QueueInfo],
            allocated: dict[str, Resource]) -> dict[str, Resource]:
    """With a ``root`` queue, each queue's own allocation is added to every ancestor along
    ``spec.parent`` (``root`` when unset), as Volcano's ``updateQueueStatus`` adds each task
    (``framework/session.go:502-535``) — a job of ``root`` itself counts there twice, as
    there. A parent that does not exist or a cycle ends the walk (Volcano would fail)."""
    if _ROOT not in queues:
        return allocated
    out = {uid: total.clone() for uid, total in allocated.items()}
    for uid, own in allocated.items():
        queue = queues.get(QueueID(uid))
        if queue is None:
            continue
        seen = {uid}
        while True:
            parent = QueueID(queue.parent or _ROOT)
            if parent not in out:
                break
            out[parent].add(own)
            if parent == _ROOT or parent in seen:
                break
            seen.add(parent)
            queue = queues[parent]
    return out


def _add_kept(allocated: dict[str, Resource], kept: dict[QueueID, list[Resource]]) -> None:
    for uid, sums in kept.items():
        total = allocated.get(uid)
        if total is not None:
            total.add(sums[0])


def _held(session: Session, job: JobInfo, total: Resource) -> Resource:
    """Add to ``total`` what ``job``'s allocated tasks hold, task by task; return it."""
    for task in job.tasks_in(ALLOCATED_STATUS):
        total.add(task.resreq)
        node = session.nodes.get(task.node_name)
        if node is not None and node.others:
            # vGPU memory and cores are held per card, not requested; Volcano adds them
            total.add(queue_device_usage(node, task))
    return total


def _exact_allocated(job: JobInfo) -> tuple[Resource] | None:
    return (job.allocated,) if job.allocated_exact() else None


def _close_running_job(session: Session, job: JobInfo) -> bool:
    """Close a valid job whose tasks all run, as :func:`_close_job` would, without deriving
    messages; False (nothing done) for any other job.

    Most jobs of a busy cluster are such jobs and stay so cycle after cycle. Every task is
    Running, so none gets a condition; the phase is Running once ``minMember`` tasks run
    (unless gang marked the job Unschedulable in this session: then it is Unknown, which the
    general path derives).
    """
    running = len(job.task_status_index.get(TaskStatus.RUNNING, ()))
    if not running or running != len(job.tasks) or job.uid in session.invalid_jobs:
        return False
    podgroup = job.podgroup
    if running < podgroup.min_member:
        return False
    for condition in podgroup.conditions:
        if condition.get("type") == "Unschedulable":
            return False
    before = session.phase_before(job.uid)
    podgroup.phase = PHASE_RUNNING
    podgroup.running, podgroup.succeeded, podgroup.failed = running, 0, 0
    event = None
    if before is not None and before != PHASE_RUNNING:
        event = ("Normal", "Scheduled", "pod group is ready")
    # unready_tasks: no pending task, so the best-effort pending ones add nothing
    unready = max(job.min_available - running, 0)
    session.sink.update_podgroup(job, event, unready=unready)
    return True


def _close_job(session: Session, job: JobInfo, now: str) -> bool:
    """Derive and hand the sink what ``job`` shows after this cycle; True when the job will
    close the same way next cycle unless something changes it: it is valid, scheduled
    (Running or Completed, or Inqueue with binds in flight), no task waits for a place (so
    none gets a condition), no ``Unschedulable`` condition, and the cycle wrote nothing onto
    the job. Closed again, it would find the phase it has now (no event) and hand the sink
    the same status."""
    if _close_running_job(session, job):
        # A settled job is handed out without resetting what a cycle writes onto a job.
        return not _written_onto(job)
    invalid = session.invalid_jobs.get(job.uid)
    podgroup = job.podgroup
    before = session.phase_before(job.uid)
    if invalid is not None:
        reason, message = invalid
        session.update_podgroup_condition(
            job, "Unschedulable", reason=reason, message=message, now=now)
        job.job_fit_error = message
        if before is not None:
            # Not admitted: Volcano drops an invalid job from the session before enqueue runs.
            podgroup.phase = before
    podgroup.phase = podgroup_phase(session, job)
    podgroup.running = job.count(TaskStatus.RUNNING)
    podgroup.succeeded = job.count(TaskStatus.SUCCEEDED)
    podgroup.failed = job.count(TaskStatus.FAILED)
    event: tuple[str, str, str] | None = None
    if podgroup.phase in (PHASE_PENDING, PHASE_INQUEUE, PHASE_UNKNOWN):
        pending = len(job.task_status_index.get(TaskStatus.PENDING, {}))
        if job.enqueue_message and podgroup.phase == PHASE_PENDING and invalid is None:
            event = ("Normal", "Unschedulable", job.enqueue_message)
            job.job_fit_error = job.enqueue_message
        elif pending or invalid is not None:
            detail = invalid[1] if invalid is not None else job.fit_error()
            event = (
                "Warning",
                "Unschedulable",
                f"{pending}/{len(job.tasks)} tasks in gang unschedulable: {detail}",
            )
    elif before is not None and before != podgroup.phase:
        event = ("Normal", "Scheduled", "pod group is ready")
    unready = None if invalid is not None else unready_tasks(job)
    base = job.fit_error() if job.task_status_index.get(TaskStatus.PENDING) else ""
    session.sink.update_podgroup(job, event, unready=unready)
    for status in (TaskStatus.ALLOCATED, TaskStatus.PENDING, TaskStatus.PIPELINED):
        for task in list(job.task_status_index.get(status, {}).values()):
            if task.sched_gated:
                continue
            reason, message = task_reason(job, task, base)
            session.sink.update_task_condition(
                task, reason=reason, message=message, nominated_node=nominated_node(task)
            )
    return (invalid is None and _scheduled(job) and not _written_onto(job)
            and not job.count(_WAITING)
            and not any(c.get("type") == "Unschedulable" for c in podgroup.conditions))


def _scheduled(job: JobInfo) -> bool:
    """Running or Completed, or Inqueue with binds in flight: a gang whose tasks were all
    placed stays Inqueue until its binds show in the cluster (Binding is not scheduled yet),
    and until then every close derives the same Inqueue phase, no event and no condition.
    The bind's arrival renews its task, which unsettles the job."""
    phase = job.podgroup.phase
    if phase in (PHASE_RUNNING, PHASE_COMPLETED):
        return True
    return phase == PHASE_INQUEUE and bool(job.count(TaskStatus.BINDING))


_WAITING = TaskStatus.ALLOCATED | TaskStatus.PENDING | TaskStatus.PIPELINED


def _written_onto(job: JobInfo) -> bool:
    """Whether the cycle left fit errors or messages on the job (a new snapshot resets them
    for a job it renews, not for a settled one)."""
    return bool(job.nodes_fit_errors or job.unfit_tasks or job.job_fit_error
                or job.enqueue_message)
