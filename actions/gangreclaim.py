"""gangreclaim: starving gangs take back their queue's share from whole gangs of other queues.

Volcano ≥ 1.15's ``actions/gangreclaim/gangreclaim.go``. Queues are served in queue order and
an overused queue is skipped. Each starving, valid, non-Pending job (job order) gets one
statement, provided its queue may reclaim for all of its pending tasks together
(``Preemptive``). Its candidates are the Running, preemptable tasks of jobs in *other* queues
that are reclaimable (``spec.reclaimable`` not false) and whose PodGroup does not say
``volcano.sh/preemptable: "false"``; they are grouped into safe and whole bundles per job,
ranked by victim queue order (``VictimQueueOrder``, else reverse queue order), filtered once
by the plugins, and evicted prefix by prefix until a dry run pipelines every pending task of
the job (:mod:`scheduler.framework.gangevict`), one HyperNode domain after another
(:mod:`scheduler.framework.gangdomains`). The statement is committed when the job is
then pipelined, else discarded.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, TaskStatus
from scheduler.framework.action_args import action_args
from scheduler.framework.gangdomains import domain_nodes
from scheduler.framework.gangevict import (
    NOT_ACTED_ON,
    Bundle,
    GangEvictArgs,
    job_preemptable,
    run_gang_eviction,
    select_bundles,
    victim_queue_policy,
)
from scheduler.framework.gangvictims import EvictionContext, EvictionKind
from scheduler.framework.session import Session

__all__ = ["GangReclaim"]

REASON = "gangreclaim"


class GangReclaim:
    NAME = "gangreclaim"
    Args = GangEvictArgs
    NOT_ACTED_ON = NOT_ACTED_ON
    """Arguments of Volcano's action accepted without effect; the conf loader warns."""

    def execute(self, session: Session) -> None:
        args: GangEvictArgs = action_args(self.NAME, GangEvictArgs, session.configurations)

        def select(queue: QueueInfo, job: JobInfo, pending: list[TaskInfo],
                   need: Resource, domain: str) -> list[Bundle]:
            nodes = domain_nodes(session, domain)
            candidates = reclaimees(session, job, nodes=nodes)
            context = EvictionContext(EvictionKind.GANG_RECLAIM, job, pending[0], domain)
            return select_bundles(session, context=context, candidates=candidates, need=need,
                                  policy=victim_queue_policy(session, queue),
                                  allow_whole=args.allow_whole_bundle)

        run_gang_eviction(session, reason=REASON, select=select, reclaim=True,
                          max_domains=args.max_domains)


def reclaimees(session: Session, reclaimer: JobInfo, *,
               nodes: AbstractSet[str] | None = None) -> dict[JobID, list[TaskInfo]]:
    """Per victim job of another, reclaimable queue, its tasks gangreclaim may take (on
    ``nodes``, the domain's, when given)."""
    out: dict[JobID, list[TaskInfo]] = {}
    for job in session.jobs.values():
        if job.queue == reclaimer.queue or not job_preemptable(job):
            continue
        queue = session.queues.get(job.queue)
        if queue is None or not queue.reclaimable:
            continue
        tasks = [t for t in job.task_status_index.get(TaskStatus.RUNNING, {}).values()
                 if t.preemptable and t.node_name in session.nodes
                 and (nodes is None or t.node_name in nodes)]
        if tasks:
            out[job.uid] = tasks
    return out
