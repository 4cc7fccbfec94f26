"""reclaim: starving jobs take back resources their queue deserves from other queues.

Volcano's ``actions/reclaim/reclaim.go``. Queues are served in queue order and an overused
queue is skipped. For every starving, valid, non-Pending job of a queue (job order), one
statement: each pending task (task order) — unless its pod says ``preemptionPolicy: Never`` or
the queue may not reclaim for it (``Preemptive``) or a pre-predicate fails — looks for a node
where Running, preemptable tasks of jobs in *other*, reclaimable queues (``spec.reclaimable``
not false) can be evicted: the plugins name the victims (``Reclaimable``), the node must hold
the request with them gone, and they leave lowest first until the request fits. The task is
then pipelined there. The job's statement is committed when the job is pipelined, else
discarded; evictions made on a node where the task then did not fit are never kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.task import TaskInfo
from scheduler.api.types import QueueID, TaskStatus
from scheduler.framework import hooks as h
from scheduler.framework.action_args import action_args
from scheduler.framework.arguments import arg
from scheduler.framework.eviction import (
    EvictableIndex,
    candidate_rows,
    evict_on_node,
    fits_resources,
    plugin_in_every_tier,
    preemption_never,
    sorted_victims,
    victims_suffice,
)
from scheduler.framework.heap import PriorityQueue
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement

__all__ = ["Reclaim", "ReclaimArgs"]

REASON = "reclaim"


@dataclass(frozen=True, slots=True)
class ReclaimArgs:
    predicate_error_cache: bool = arg("predicateErrorCacheEnable", True)


_NOT_ACTED_ON = {
    "predicateErrorCacheEnable": "candidate nodes are filtered per task with vector masks, "
    "so there is no per-role error cache to switch",
}


class Reclaim:
    NAME = "reclaim"
    NOT_ACTED_ON = _NOT_ACTED_ON
    """Arguments of Volcano's action accepted without effect; the conf loader warns."""

    def __init__(self) -> None:
        self._warned: set[str] = set()

    def execute(self, session: Session) -> None:
        action_args(self.NAME, ReclaimArgs, session.configurations,
                    warned=self._warned)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order)
        seen: set[QueueID] = set()
        starving: dict[QueueID, PriorityQueue[JobInfo]] = {}
        tasks: dict[str, PriorityQueue[TaskInfo]] = {}
        for job in session.jobs.values():
            if job.is_pending() or not session.is_valid(job):
                continue
            queue = session.queues.get(job.queue)
            if queue is None:
                continue
            if queue.uid not in seen:
                seen.add(queue.uid)
                queues.push(queue)
            if session.job_starving(job):
                starving.setdefault(queue.uid, PriorityQueue(session.job_order)).push(job)
                pending = job.task_status_index.get(TaskStatus.PENDING, {}).values()
                tasks[job.uid] = PriorityQueue(
                    session.task_order, [t for t in pending if not t.sched_gated])
        if not starving:
            return
        index = EvictableIndex(
            session, TaskStatus.RUNNING,
            gang_guard=plugin_in_every_tier(session, h.Reclaimable, "gang"))
        while queues:
            queue = queues.pop()
            if session.overused(queue):
                continue
            jobs = starving.get(queue.uid)
            while jobs:
                job = jobs.pop()
                statement = Statement(session)
                self._reclaim_for_job(session, index, queue, job, tasks[job.uid], statement)
                if session.job_pipelined(job):
                    statement.commit()
                else:
                    undone = statement.evicted()
                    statement.discard()
                    index.evicted(undone, +1.0)

    def _reclaim_for_job(
        self,
        session: Session,
        index: EvictableIndex,
        queue: QueueInfo,
        job: JobInfo,
        pending: PriorityQueue[TaskInfo],
        statement: Statement,
    ) -> None:
        others = [
            q.uid for q in session.queues.values() if q.uid != job.queue and q.reclaimable
        ]
        while session.job_starving(job) and pending:
            task = pending.pop()
            if task.status is not TaskStatus.PENDING or preemption_never(task):
                continue
            if not session.preemptive(queue, task):
                continue
            if session.pre_predicate(task) is not None:
                continue
            for row in candidate_rows(session, task, index.total(others), scored=False):
                node = session.table.nodes[int(row)]
                reclaimees = [t for t in node.tasks.values() if _reclaimee(session, t, job)]
                if not reclaimees:
                    continue
                victims = session.reclaimable(task, reclaimees)
                if not victims_suffice(task, node, victims):
                    continue
                node_statement = evict_on_node(
                    session, task=task, node=node,
                    victims=sorted_victims(session, task, victims),
                    fits=fits_resources(task), reason=REASON)
                if node_statement is not None:
                    index.evicted(node_statement.evicted())
                    statement.merge(node_statement)
                    break


def _reclaimee(session: Session, task: TaskInfo, reclaimer_job: JobInfo) -> bool:
    if task.status is not TaskStatus.RUNNING or not task.preemptable:
        return False
    job = session.jobs.get(task.job)
    if job is None or job.queue == reclaimer_job.queue:
        return False
    queue = session.queues.get(job.queue)
    return queue is not None and queue.reclaimable
