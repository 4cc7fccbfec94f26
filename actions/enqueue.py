"""enqueue: admit Pending PodGroups to Inqueue when their queue and the cluster have room.

Queues are visited in queue order and each queue's pending jobs in job order; a job without
``minResources`` is always admitted, others only when every enqueue vote permits. A rejected
job does not block later jobs of its queue.
"""

from __future__ import annotations

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PHASE_INQUEUE
from scheduler.api.queue import QueueInfo
from scheduler.api.types import QueueID
from scheduler.framework.heap import PriorityQueue
from scheduler.framework.session import Session

__all__ = ["Enqueue"]


class Enqueue:
    NAME = "enqueue"

    def execute(self, session: Session) -> None:
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order)
        pending: dict[QueueID, PriorityQueue[JobInfo]] = {}
        order_key = session.job_order_key()  # enqueue changes no task of a queued job
        for job in session.active_jobs.values():  # a settled PodGroup is not pending
            queue = session.queues.get(job.queue)
            if queue is None or not job.is_pending():
                continue
            if job.queue not in pending:
                pending[job.queue] = PriorityQueue(session.job_order, key=order_key)
                queues.push(queue)
            pending[job.queue].push(job)
        while queues:
            queue = queues.pop()
            jobs = pending[queue.uid]
            if not jobs:
                continue
            job = jobs.pop()
            if job.podgroup.min_resources is None or session.job_enqueueable(job):
                session.job_enqueued(job)
                job.podgroup.phase = PHASE_INQUEUE
            queues.push(queue)
