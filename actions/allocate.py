"""allocate: gang placement of pending tasks, queue by queue, job by job.

Queues are served round-robin in queue order (re-evaluated after every job turn, since shares
move as tasks are placed) and an overused queue is dropped for the rest of the action. A job's
tasks are placed in task order inside one Statement: onto nodes whose current idle holds them
(allocate), else onto nodes whose future idle will (pipeline). The statement is committed only
when the gang is ready; a job that is merely pipelined keeps its reservations for the rest of
the cycle; anything else is discarded. A ready job yields after each further task so other
jobs get their turn.
"""

from __future__ import annotations

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PHASE_INQUEUE
from scheduler.api.queue import QueueInfo
from scheduler.api.status import FitErrors
from scheduler.api.task import TaskInfo
from scheduler.api.types import QueueID, TaskID, TaskStatus
from scheduler.framework.heap import PriorityQueue
from scheduler.framework.nominated import nominated_node
from scheduler.framework.select import best_node, feasible_nodes
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement

__all__ = ["Allocate"]


class Allocate:
    NAME = "allocate"

    def execute(self, session: Session) -> None:
        enqueue_on = "enqueue" in session.enabled_actions
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order)
        jobs_by_queue: dict[QueueID, PriorityQueue[JobInfo]] = {}
        pending_tasks: dict[str, PriorityQueue[TaskInfo]] = {}
        for job in session.jobs.values():
            if job.is_pending():
                if enqueue_on:
                    continue
                job.podgroup.phase = PHASE_INQUEUE
            queue = session.queues.get(job.queue)
            if queue is None or not session.is_valid(job):
                continue
            tasks = [
                t
                for t in job.task_status_index.get(TaskStatus.PENDING, {}).values()
                if not t.best_effort and not t.sched_gated
            ]
            if not tasks:
                continue
            pending_tasks[job.uid] = PriorityQueue(session.task_order, tasks)
            if job.queue not in jobs_by_queue:
                jobs_by_queue[job.queue] = PriorityQueue(session.job_order)
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
            statement = Statement(session)
            yielded = self._allocate_tasks(session, queue, job, pending_tasks[job.uid], statement)
            if session.job_ready(job):
                statement.commit()
                if yielded:
                    jobs.push(job)
            elif not session.job_pipelined(job):
                statement.discard()
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
        statement: Statement,
    ) -> bool:
        """Place tasks until the job is ready or one fails; True when it yielded its turn."""
        while tasks:
            task = tasks.pop()
            if task.status is not TaskStatus.PENDING:
                continue
            if not session.allocatable(queue, task):
                # Say why in the most useful terms: no node at all, else the queue's share.
                _, errors = feasible_nodes(session, task)
                job.nodes_fit_errors[task.uid] = errors or FitErrors(
                    nodes=len(session.table),
                    error=f"queue {queue.name} has no room for task {task.name} "
                    "within its deserved share",
                )
                continue
            # A node a preemption nominated for this pod is tried before the general search.
            nominated = nominated_node(session, task)
            if nominated is not None:
                node, fits_idle = nominated
            else:
                rows, errors = feasible_nodes(session, task)
                if errors is not None:
                    job.nodes_fit_errors[TaskID(task.uid)] = errors
                    return False
                node, fits_idle = best_node(session, task, rows)
            status = statement.allocate(task, node) if fits_idle else statement.pipeline(task, node)
            if status is not None:
                continue
            job.nodes_fit_errors.pop(task.uid, None)
            if session.job_ready(job) and tasks:
                return True
        return False
