"""What a session writes when it closes (Volcano's job updater and event recorder).

PodGroup phase and counters, PodGroup events, pod ``PodScheduled`` conditions with Volcano's
reasons and message shapes, and each queue's ``status.allocated``. The cache persists only what
changed, so a quiet cycle writes nothing.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from scheduler.api.devices.base import queue_device_usage
from scheduler.api.job import JobInfo
from scheduler.api.podgroup import (
    PHASE_COMPLETED,
    PHASE_INQUEUE,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_UNKNOWN,
)
from scheduler.api.resource import Resource
from scheduler.api.status import ALL_NODES_UNAVAILABLE
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, COMPLETED_STATUS, TaskStatus
from scheduler.framework.session import Session

__all__ = [
    "close_session",
    "nominated_node",
    "podgroup_phase",
    "rfc3339",
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
    scheduled_tasks = job.tasks_in(_SCHEDULED)
    releasing_on_node = [t for t in job.tasks_in(TaskStatus.RELEASING) if t.node_name]
    scheduled = len(scheduled_tasks) + len(releasing_on_node)
    if scheduled and scheduled >= job.podgroup.min_member:
        if all(t.status & COMPLETED_STATUS for t in scheduled_tasks) and not releasing_on_node:
            return PHASE_COMPLETED
        return PHASE_RUNNING
    return PHASE_INQUEUE if job.podgroup.phase == PHASE_INQUEUE else PHASE_PENDING


def task_reason(job: JobInfo, task: TaskInfo) -> tuple[str, str]:
    """``(reason, message)`` of a task's PodScheduled=False condition after this cycle."""
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
        return "Unschedulable", str(errors)
    if task.last_node:
        return "Schedulable", f"{where} {task.last_node}, once minAvailable is satisfied"
    return "Unschedulable", job.job_fit_error or ALL_NODES_UNAVAILABLE


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
    for job in session.jobs.values():
        _close_job(session, job, now)
    allocated: dict[str, Resource] = {uid: Resource() for uid in session.queues}
    for job in session.jobs.values():
        if job.queue in allocated:
            for task in job.tasks_in(ALLOCATED_STATUS):
                allocated[job.queue].add(task.resreq)
                node = session.nodes.get(task.node_name)
                if node is not None and node.others:
                    # vGPU memory and cores are held per card, not requested; Volcano adds them
                    allocated[job.queue].add(queue_device_usage(node, task))
    for uid, queue in session.queues.items():
        session.sink.update_queue_allocated(queue, allocated[uid])


def _close_job(session: Session, job: JobInfo, now: str) -> None:
    invalid = session.invalid_jobs.get(job.uid)
    if invalid is not None:
        reason, message = invalid
        session.update_podgroup_condition(
            job, "Unschedulable", reason=reason, message=message, now=now)
        job.job_fit_error = message
    podgroup = job.podgroup
    before = session.podgroup_status_before.get(job.uid)
    podgroup.phase = podgroup_phase(session, job)
    podgroup.running = job.count(TaskStatus.RUNNING)
    podgroup.succeeded = job.count(TaskStatus.SUCCEEDED)
    podgroup.failed = job.count(TaskStatus.FAILED)
    event: tuple[str, str, str] | None = None
    if podgroup.phase in (PHASE_PENDING, PHASE_INQUEUE, PHASE_UNKNOWN):
        pending = len(job.task_status_index.get(TaskStatus.PENDING, {}))
        if job.enqueue_message and podgroup.phase == PHASE_PENDING:
            event = ("Normal", "Unschedulable", job.enqueue_message)
            job.job_fit_error = job.enqueue_message
        elif pending or invalid is not None:
            detail = invalid[1] if invalid is not None else job.fit_error()
            event = (
                "Warning",
                "Unschedulable",
                f"{pending}/{len(job.tasks)} tasks in gang unschedulable: {detail}",
            )
    elif before is not None and before.phase != podgroup.phase:
        event = ("Normal", "Scheduled", "pod group is ready")
    unready = None if invalid is not None else unready_tasks(job)
    session.sink.update_podgroup(job, event, unready=unready)
    for status in (TaskStatus.ALLOCATED, TaskStatus.PENDING, TaskStatus.PIPELINED):
        for task in list(job.task_status_index.get(status, {}).values()):
            if task.sched_gated:
                continue
            reason, message = task_reason(job, task)
            session.sink.update_task_condition(
                task, reason=reason, message=message, nominated_node=nominated_node(task)
            )
