"""backfill: place best-effort tasks (no resource requests) of admitted, valid jobs.

Such tasks need no resources, so they skip the resource check but still pass every predicate;
they are allocated directly and dispatched as soon as their job is ready. Tasks are taken in
Volcano's order, fixed before the first placement: queues in queue order, each queue's jobs
in job order, each job's tasks in task order. A best-effort task left pipelined (by an
earlier action) is released first and placed again like the others.
"""

from __future__ import annotations

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, QueueID, TaskStatus
from scheduler.framework.heap import PriorityQueue
from scheduler.framework.select import best_node, feasible_nodes
from scheduler.framework.session import AllocateError, Session

__all__ = ["Backfill"]


class Backfill:
    NAME = "backfill"

    def execute(self, session: Session) -> None:
        for task in self._pending_tasks(session):
            job = session.jobs[task.job]
            rows, errors = feasible_nodes(session, task, check_resources=False)
            if errors is not None:
                job.nodes_fit_errors[task.uid] = errors
                continue
            node, _ = best_node(session, task, rows)
            try:
                session.place(task, node, TaskStatus.ALLOCATED)
            except AllocateError:
                continue
            job.nodes_fit_errors.pop(task.uid, None)
            if session.job_ready(job):
                session.dispatch(job)

    @staticmethod
    def _pending_tasks(session: Session) -> list[TaskInfo]:
        """Every best-effort task to try, in queue → job → task order (Volcano's
        ``pickUpPendingTasks``)."""
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order)
        jobs: dict[QueueID, PriorityQueue[JobInfo]] = {}
        tasks: dict[JobID, PriorityQueue[TaskInfo]] = {}
        for job in session.active_jobs.values():  # a settled job has no pending task
            queue = session.queues.get(job.queue)
            if job.is_pending() or not session.is_valid(job) or queue is None:
                continue
            candidates = [
                t
                for t in job.task_status_index.get(TaskStatus.PENDING, {}).values()
                if t.best_effort and not t.sched_gated
            ]
            for task in list(job.task_status_index.get(TaskStatus.PIPELINED, {}).values()):
                if task.best_effort:
                    session.unplace(task)
                    candidates.append(task)
            if not candidates:
                continue
            tasks[job.uid] = PriorityQueue(session.task_order, candidates)
            if queue.uid not in jobs:
                jobs[queue.uid] = PriorityQueue(session.job_order)
                queues.push(queue)
            jobs[queue.uid].push(job)
        ordered: list[TaskInfo] = []
        while queues:
            queue_jobs = jobs[queues.pop().uid]
            while queue_jobs:
                job_tasks = tasks[queue_jobs.pop().uid]
                while job_tasks:
                    ordered.append(job_tasks.pop())
        return ordered
