"""gangpreempt: starving gangs take room from whole lower-priority gangs of their own queue.

Volcano ≥ 1.15's ``actions/gangpreempt/gangpreempt.go``. Queue by queue (queue order), each
starving, valid, non-Pending job (job order) gets one statement. Its candidates are the
Running or Bound, preemptable tasks of *other* jobs of the *same* queue whose job priority is
strictly lower and whose PodGroup does not say ``volcano.sh/preemptable: "false"``; they are
grouped into safe and whole bundles per job, ranked lower job first, filtered once by the
plugins, and evicted prefix by prefix until a dry run pipelines every pending task of the job
(:mod:`scheduler.framework.gangevict`), one HyperNode domain after another
(:mod:`scheduler.framework.gangdomains`). The statement is committed when the job is then
pipelined, else discarded. Unlike ``preempt``, a best-effort preemptor is not limited to
best-effort victims and ``preemptionPolicy: Never`` is not read, as in Volcano.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import PREEMPTABLE_STATUS, JobID, QueueID
from scheduler.framework.action_args import action_args
from scheduler.framework.gangdomains import domain_nodes
from scheduler.framework.gangevict import (
    NOT_ACTED_ON,
    Bundle,
    GangEvictArgs,
    job_preemptable,
    run_gang_eviction,
    select_bundles,
    victim_job_policy,
)
from scheduler.framework.gangvictims import EvictionContext, EvictionKind
from scheduler.framework.session import Session

__all__ = ["GangPreempt"]

REASON = "gangpreempt"


class GangPreempt:
    NAME = "gangpreempt"
    Args = GangEvictArgs
    NOT_ACTED_ON = NOT_ACTED_ON
    """Arguments of Volcano's action accepted without effect; the conf loader warns."""

    def execute(self, session: Session) -> None:
        args: GangEvictArgs = action_args(self.NAME, GangEvictArgs, session.configurations)
        by_queue: dict[QueueID, list[JobInfo]] = {}
        for job in session.jobs.values():
            by_queue.setdefault(job.queue, []).append(job)
        policy = victim_job_policy(session)

        def select(queue: QueueInfo, job: JobInfo, pending: list[TaskInfo],
                   need: Resource, domain: str) -> list[Bundle]:
            nodes = domain_nodes(session, domain)
            candidates = victim_candidates(session, job, by_queue.get(job.queue, []),
                                           nodes=nodes)
            context = EvictionContext(EvictionKind.GANG_PREEMPT, job, pending[0], domain)
            return select_bundles(session, context=context, candidates=candidates, need=need,
                                  policy=policy, allow_whole=args.allow_whole_bundle)

        run_gang_eviction(session, reason=REASON, select=select, reclaim=False,
                          max_domains=args.max_domains)


def victim_candidates(
    session: Session, preemptor: JobInfo, jobs: list[JobInfo], *,
    nodes: AbstractSet[str] | None = None,
) -> dict[JobID, list[TaskInfo]]:
    """Per victim job of the preemptor's queue (``jobs``), its tasks gangpreempt may take
    (on ``nodes``, the domain's, when given)."""
    out: dict[JobID, list[TaskInfo]] = {}
    for job in jobs:
        if (job.uid == preemptor.uid or job.queue != preemptor.queue
                or job.priority >= preemptor.priority or not job_preemptable(job)):
            continue
        tasks = [t for t in job.tasks_in(PREEMPTABLE_STATUS)
                 if t.preemptable and t.node_name in session.nodes
                 and (nodes is None or t.node_name in nodes)]
        if tasks:
            out[job.uid] = tasks
    return out
