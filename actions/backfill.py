"""backfill: place best-effort tasks (no resource requests) of admitted, valid jobs.

Such tasks need no resources, so they skip the resource check but still pass every predicate;
they are allocated directly and dispatched as soon as their job is ready.
"""

from __future__ import annotations

from scheduler.api.types import TaskStatus
from scheduler.framework.select import best_node, feasible_nodes
from scheduler.framework.session import AllocateError, Session

__all__ = ["Backfill"]


class Backfill:
    NAME = "backfill"

    def execute(self, session: Session) -> None:
        enqueue_on = "enqueue" in session.enabled_actions
        for job in sorted(session.jobs.values(), key=lambda j: (j.creation, j.uid)):
            if (enqueue_on and job.is_pending()) or not session.is_valid(job):
                continue
            if job.queue not in session.queues:
                continue
            pending = job.task_status_index.get(TaskStatus.PENDING, {})
            for task in [t for t in pending.values() if t.best_effort and not t.sched_gated]:
                rows, errors = feasible_nodes(session, task, check_resources=False)
                if errors is not None:
                    job.nodes_fit_errors[task.uid] = errors
                    continue
                node, _ = best_node(session, task, rows)
                try:
                    session.place(task, node, TaskStatus.ALLOCATED)
                except AllocateError:
                    continue
                if session.job_ready(job):
                    session.dispatch(job)
