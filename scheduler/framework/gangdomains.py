"""HyperNode domains of gang eviction: where gangpreempt and gangreclaim look for victims.

Volcano's ``actions/utils/util.go`` (``GetCandidateDomains``, ``PickDomainsFromGradients``) and
``simulate.go`` (``BuildNominationPlanInDomain``, ``organizeEvictionWorksheet``,
``runSimulateTrialAtHyperNode``):

* the candidate domains of a preemptor job are its eviction gradients (the
  ``network-topology-aware`` plugin's, widest tier first and at most
  ``hypernode.gradient.evict.max-hypernodes`` HyperNodes, each of allowed tier and with
  allocatable resources for the job's ``minResources``), flattened and capped at the action's
  ``maxDomains``. A job with no hard constraint (no constraint, or no plugin answering) has the
  whole cluster as its one domain; a constrained job none of whose HyperNodes qualifies has none,
  so nothing is evicted for it;
* victims are taken only from the domain's nodes and counted against its idle and releasing
  resources, and the preemptor's pending tasks are pipelined only onto its nodes: a sub-job with
  a constraint of its own inside one HyperNode from its own eviction gradients under the domain
  (the first where all its pending tasks fit), any other in the domain. Sub-jobs the job needs
  for ``minSubGroups`` go first; once the job is pipelined (or, when it was already ready, after
  one sub-job) the plan is complete.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.subjob import SubJob
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskStatus
from scheduler.framework.eviction import candidate_rows, unresolvable_exact
from scheduler.framework.hypernodes import CLUSTER_TOP
from scheduler.framework.select import best_node
from scheduler.framework.statement import Statement
from scheduler.framework.subjobs import sub_job_gradients, sub_job_ready

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = ["candidate_domains", "domain_nodes", "domain_room", "has_hard_topology", "in_domain",
           "pending_for_eviction", "pending_of", "plan_in_domain", "sub_job_order",
           "sub_job_targets"]


def has_hard_topology(session: Session, job: JobInfo) -> bool:
    """Volcano's ``ContainsHardTopology`` after the session turned soft constraints hard: the
    job or one of its sub-groups is bounded by a tier."""
    view = session.hypernodes
    if view.limit(job) is not None:
        return True
    return any(view.sub_limit(job, group.network_topology) is not None
               for group in job.podgroup.sub_groups)


def candidate_domains(session: Session, job: JobInfo, max_domains: int) -> list[str]:
    """``GetCandidateDomains``: the job's eviction gradients from the cluster top, flattened
    in order, without repeats, at most ``max_domains``; the cluster top when there are none
    and the job has no hard constraint."""
    domains: list[str] = []
    for gradient in session.hypernode_gradients(job, CLUSTER_TOP, "evict"):
        for name in gradient:
            if name in domains:
                continue
            domains.append(name)
            if len(domains) >= max_domains:
                return domains
    if not domains and not has_hard_topology(session, job):
        domains.append(CLUSTER_TOP)
    return domains


def domain_nodes(session: Session, domain: str) -> frozenset[str] | None:
    """The names of the domain's nodes; None for the whole cluster (no filter to apply)."""
    if domain == CLUSTER_TOP:
        return None
    table = session.table
    return frozenset(table.nodes[int(row)].name for row in session.hypernodes.rows(domain))


def domain_room(session: Session, domain: str) -> Resource:
    """``SumIdleAndReleasing`` over the domain's nodes."""
    room = Resource()
    for row in session.hypernodes.rows(domain):
        node = session.table.nodes[int(row)]
        room.add(node.idle).add(node.releasing)
    return room


def sub_job_order(session: Session, job: JobInfo, pending: list[TaskInfo]) -> list[SubJob]:
    """``organizeEvictionWorksheet``: every sub-job with pending tasks, the not-ready ones
    still needed for their policy's ``minSubGroups`` first, then in sub-job order (the order
    their first pending task comes in, task order)."""
    subs = job.sub_jobs()
    ready: dict[str, int] = {}
    for sub in subs.by_uid.values():
        if sub_job_ready(session, sub):
            ready[sub.gid] = ready.get(sub.gid, 0) + 1
    ordered: list[SubJob] = []
    for task in pending:
        part = subs.of(task)
        if part is not None and part not in ordered:
            ordered.append(part)
    required: set[str] = set()
    for sub in ordered:
        if sub_job_ready(session, sub):
            continue
        if ready.get(sub.gid, 0) < subs.min_sub_groups.get(sub.gid, 0):
            required.add(sub.uid)
            ready[sub.gid] = ready.get(sub.gid, 0) + 1
    return sorted(ordered, key=lambda sub: sub.uid not in required)


def sub_job_targets(session: Session, job: JobInfo, sub: SubJob, domain: str) -> list[str]:
    """Where a sub-job's pending tasks may be pipelined inside ``domain``: for a sub-job with
    a constraint of a job with a hard one, its eviction gradients under the domain, in order
    (``HyperNodeGradientForSubJobFn`` with ``PurposeEvict``); else the domain itself."""
    if sub.topology is None or not has_hard_topology(session, job):
        return [domain]
    return [name for gradient in sub_job_gradients(session, job, sub, domain, "evict")
            for name in gradient]


def in_domain(session: Session, rows: np.ndarray, domain: str) -> np.ndarray:
    """``rows`` of the node table that lie in ``domain``."""
    if domain == CLUSTER_TOP:
        return rows
    return rows[session.hypernodes.mask(domain)[rows]]


def pending_of(sub: SubJob, pending: list[TaskInfo]) -> list[TaskInfo]:
    """The sub-job's share of the job's pending tasks, in their order."""
    return [task for task in pending if task.uid in sub.tasks
            and task.status is TaskStatus.PENDING]


def pending_for_eviction(session: Session, job: JobInfo) -> list[TaskInfo]:
    """The tasks gang eviction makes room for, in task order: every pending task that is not
    held by a scheduling gate and asks for something (``organizeEvictionWorksheet``)."""
    pending = [t for t in job.task_status_index.get(TaskStatus.PENDING, {}).values()
               if not t.sched_gated and not t.init_resreq.is_empty()]
    return sorted(pending, key=functools.cmp_to_key(session.task_order))


def plan_in_domain(
    session: Session, *, queue: QueueInfo, job: JobInfo, victims: list[TaskInfo], reason: str,
    domain: str = CLUSTER_TOP,
) -> Statement | None:
    """``BuildNominationPlanInDomain``: evict ``victims``, then pipeline the job's pending
    tasks sub-job by sub-job inside ``domain`` (``simulate.go:40``); the statement (still
    applied) when the job is then pipelined, else nothing."""
    pending = pending_for_eviction(session, job)
    if not pending:  # an empty worksheet never makes a plan
        return None
    was_ready = session.job_ready(job)
    statement = Statement(session)
    for victim in victims:
        statement.evict(victim, reason, for_job=job)
    pipelined = False
    for sub in sub_job_order(session, job, pending):
        tasks = pending_of(sub, pending)
        if not tasks:
            continue
        for target in sub_job_targets(session, job, sub, domain):
            trial = _trial(session, queue=queue, tasks=tasks, within=target,
                           victims=bool(victims))
            if trial is not None:
                statement.merge(trial)
                break
        else:
            statement.discard()
            return None
        pipelined = session.job_pipelined(job)
        if was_ready or pipelined:
            break
    if pipelined:
        return statement
    statement.discard()
    return None


def _trial(session: Session, *, queue: QueueInfo, tasks: list[TaskInfo], within: str,
           victims: bool) -> Statement | None:
    """``runSimulateTrialAtHyperNode``: every task of ``tasks`` pipelined inside ``within``,
    or nothing (the statement undone)."""
    trial = Statement(session)
    nodes = session.table.nodes
    for task in tasks:
        if not session.allocatable(queue, task) or session.pre_predicate(task) is not None:
            break
        rows = in_domain(session, candidate_rows(session, task, None, scored=False), within)
        rows = rows[np.array([not unresolvable_exact(session, task, nodes[int(r)])
                              for r in rows], dtype=bool)]
        if not len(rows):
            break
        node, _ = best_node(session, task, rows)
        if trial.pipeline(task, node, eviction_occurred=victims) is not None:
            break
    else:
        if len(trial):
            return trial
    trial.discard()
    return None
