"""Gang-aware eviction: what the gangpreempt and gangreclaim actions share.

Volcano ≥ 1.15's ``actions/gangpreempt``, ``actions/gangreclaim`` and ``actions/utils``
(``bundle.go``, ``simulate.go``, ``util.go``). Victims are chosen job by job, never task by task:

* **Bundles.** The candidate tasks of each victim job are split in two (``CreateJobBundles``):
  the *safe* bundle holds the tasks the job can lose and still meet its ``minAvailable`` (each
  role its ``minTaskMember``, each sub-group policy its ``minSubGroups`` ready partitions),
  lowest task priority first; the *whole* bundle holds the rest, whose eviction breaks the
  gang. Every safe bundle is ranked before every whole bundle,
  so a gang is broken only when surplus tasks everywhere do not make room.
* **One filter call.** The bundles are ranked, flattened and handed once to the plugins'
  unified victim filter (:func:`unified_evictable`); a whole bundle survives only if all of its
  tasks do, a safe bundle shrinks to those allowed. The survivors are ranked again.
* **Domains.** The search runs in the preemptor job's HyperNode domains in turn
  (:mod:`scheduler.framework.gangdomains`: its eviction gradients capped at ``maxDomains``, the
  whole cluster for a job without a hard constraint); bundles are built from the victims on the
  domain's nodes and the first domain that yields a plan wins.
* **Prefix and dry run.** Bundles are added one by one; once the domain's idle plus releasing
  resources and the victims' requests hold everything the preemptor job still waits for, the
  victims are evicted and the job's pending tasks pipelined in a dry run, sub-job by sub-job
  inside the domain (``Allocatable``, pre-predicates, ``PredicateForPreemptAction``, best node
  with idle before future idle). The first prefix whose dry run leaves the job pipelined is
  kept; a failed one is undone.

Two deliberate differences (``docs/fidelity.md``): an empty intersection inside a tier ends
the tier, as for the legacy hooks (:mod:`scheduler.framework.victims`); and a whole bundle is
offered only when, with the job's safe bundle, it covers every task of the job that holds a
node, so no victim gang is ever left running below ``minAvailable``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from enum import IntEnum

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Default, Resource
from scheduler.api.task import PREEMPTABLE_KEY, TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, JobID, TaskStatus
from scheduler.framework import hooks as h
from scheduler.framework.arguments import arg, note, notes_field
from scheduler.framework.gangdomains import (
    candidate_domains,
    domain_room,
    pending_for_eviction,
    plan_in_domain,
)
from scheduler.framework.gangvictims import EvictionContext, unified_evictable
from scheduler.framework.heap import PriorityQueue
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement

__all__ = [
    "Bundle",
    "BundleKind",
    "GangEvictArgs",
    "apply_allowed",
    "flatten",
    "job_bundles",
    "job_preemptable",
    "pending_for_eviction",
    "plan_in_domain",
    "preemptive_for",
    "rank_bundles",
    "run_gang_eviction",
    "select_bundles",
    "victim_job_policy",
    "victim_queue_policy",
]

DEFAULT_MAX_DOMAINS = 8


@dataclass(frozen=True, slots=True)
class GangEvictArgs:
    """The ``configurations`` entry of gangpreempt and gangreclaim (``parseArguments``)."""

    max_domains: int = arg("maxDomains", DEFAULT_MAX_DOMAINS)
    allow_whole_bundle: bool = arg("allowWholeBundle", True)
    notes: tuple[str, ...] = notes_field()

    def __post_init__(self) -> None:
        if self.max_domains <= 0:
            note(self, f"argument 'maxDomains' is {self.max_domains}: it must be above 0; "
                       f"{DEFAULT_MAX_DOMAINS} is used, as in Volcano")
            object.__setattr__(self, "max_domains", DEFAULT_MAX_DOMAINS)


NOT_ACTED_ON: dict[str, str] = {}
"""Arguments of both actions accepted without effect (none); the conf loader warns."""


# -- bundles ------------------------------------------------------------------------------
class BundleKind(IntEnum):
    SAFE = 0
    WHOLE = 1


@dataclass(slots=True)
class Bundle:
    kind: BundleKind
    job: JobInfo
    tasks: list[TaskInfo]
    local: Resource
    """What evicting the bundle frees."""
    cost: Resource
    """What it disrupts: nothing beyond itself for a safe bundle, the whole job otherwise."""


def _sum(tasks: Iterable[TaskInfo], *, init: bool = False) -> Resource:
    total = Resource()
    for task in tasks:
        total.add(task.init_resreq if init else task.resreq)
    return total


def job_preemptable(job: JobInfo) -> bool:
    """``IsJobPreemptableForGangEviction``: a PodGroup that says nothing lets its job be taken;
    one that says ``volcano.sh/preemptable`` is read as the job's flag."""
    podgroup = job.podgroup
    if PREEMPTABLE_KEY in podgroup.annotations or PREEMPTABLE_KEY in podgroup.labels:
        return job.preemptable
    return True


def job_bundles(job: JobInfo, tasks: list[TaskInfo]) -> list[Bundle]:
    """``CreateJobBundles``: ``tasks`` (the job's candidates) split into safe and whole."""
    if not tasks:
        return []
    tasks = sorted(tasks, key=lambda t: (t.priority, t.uid))
    surplus = job.ready_task_num() - job.min_available
    if surplus < 0:  # already below its gang: nothing more to break
        return [Bundle(BundleKind.SAFE, job, tasks, _sum(tasks), Resource())]
    minimums = job.min_task_member
    role_surplus: dict[str, int] = {}
    if job.min_available >= sum(minimums.values()):
        ready: Counter[str] = Counter()
        for status, members in job.task_status_index.items():
            if status & ALLOCATED_STATUS or status is TaskStatus.SUCCEEDED:
                ready.update(t.role for t in members.values())
            elif status is TaskStatus.PENDING:
                ready.update(t.role for t in members.values() if t.init_resreq.is_empty())
        role_surplus = {role: ready[role] - least for role, least in minimums.items()}
    subs = job.sub_jobs()
    broken: set[str] = set()
    group_surplus: dict[str, int] = {}
    if subs.min_sub_groups:  # bundle.go: a ready partition to spare per policy group
        for sub in subs.by_uid.values():
            if sub.is_ready():
                group_surplus[sub.gid] = group_surplus.get(sub.gid, 0) + 1
            else:
                broken.add(sub.uid)
        for gid, least in subs.min_sub_groups.items():
            group_surplus[gid] = group_surplus.get(gid, 0) - least
    safe: list[TaskInfo] = []
    whole: list[TaskInfo] = []
    for task in tasks:
        guarded = task.role in role_surplus
        part = subs.of(task) if subs.min_sub_groups else None
        group_safe = (not subs.min_sub_groups
                      or (part is not None
                          and (part.uid in broken or group_surplus.get(part.gid, 0) > 0)))
        if surplus > 0 and (not guarded or role_surplus[task.role] > 0) and group_safe:
            safe.append(task)
            surplus -= 1
            if guarded:
                role_surplus[task.role] -= 1
            if part is not None and part.uid not in broken:
                broken.add(part.uid)  # its first eviction costs the group a ready partition
                group_surplus[part.gid] = group_surplus.get(part.gid, 0) - 1
        else:
            whole.append(task)
    bundles = [Bundle(BundleKind.SAFE, job, safe, _sum(safe), Resource())] if safe else []
    holders = {t.uid for t in job.tasks_in(ALLOCATED_STATUS)}
    if whole and holders <= {t.uid for t in tasks}:
        bundles.append(Bundle(BundleKind.WHOLE, job, whole, _sum(whole), job.total_request))
    return bundles


def flatten(bundles: Iterable[Bundle]) -> list[TaskInfo]:
    return [task for bundle in bundles for task in bundle.tasks]


def apply_allowed(bundles: list[Bundle], allowed: AbstractSet[str]) -> list[Bundle]:
    """``ApplyAllowedTasks``: a whole bundle stays only if every task of it is allowed (and,
    here, its job's safe bundle was not cut), a safe bundle shrinks to its allowed tasks."""
    cut = {b.job.uid for b in bundles
           if b.kind is BundleKind.SAFE and any(t.uid not in allowed for t in b.tasks)}
    valid: list[Bundle] = []
    for bundle in bundles:
        kept = [t for t in bundle.tasks if t.uid in allowed]
        if bundle.kind is BundleKind.WHOLE:
            if len(kept) == len(bundle.tasks) and bundle.job.uid not in cut:
                valid.append(bundle)
        elif kept:
            valid.append(dataclasses.replace(bundle, tasks=kept, local=_sum(kept)))
    return valid


def _score(res: Resource, need: Resource, *, cap: bool) -> float:
    score = 0.0
    for name in need.resource_names():
        wanted = need.get(name)
        if wanted <= 0:
            continue
        value = res.get(name)
        score += (min(value, wanted) if cap else value) / wanted
    return score


def _roi(bundle: Bundle, need: Resource) -> float:
    """Local relief per unit of disruption (``bundleROI``); a safe bundle disrupts nothing."""
    cost = _score(bundle.cost, need, cap=False)
    return math.inf if cost == 0 else _score(bundle.local, need, cap=True) / cost


Policy = Callable[[Bundle, Bundle], int]
"""Negative when the left bundle is evicted first, 0 to leave it to the efficiency score."""


def victim_job_policy(session: Session) -> Policy:
    """gangpreempt: lower jobs first (``!JobOrderFn``)."""

    def compare(left: Bundle, right: Bundle) -> int:
        if left.job.uid == right.job.uid:
            return 0
        ij = not session.job_order(left.job, right.job) < 0
        ji = not session.job_order(right.job, left.job) < 0
        return 0 if ij == ji else (-1 if ij else 1)

    return compare


def victim_queue_policy(session: Session, reclaimer: QueueInfo) -> Policy:
    """gangreclaim: the ``VictimQueueOrder`` plugins, else reverse queue order."""
    fns = [p.victim_queue_order for tier in session.hooks(h.VictimQueueOrder) for p in tier]

    def less(left: QueueInfo, right: QueueInfo) -> bool:
        for fn in fns:
            result = fn(left, right, reclaimer)
            if result:
                return bool(result < 0)
        return not session.queue_order(left, right) < 0

    def compare(left: Bundle, right: Bundle) -> int:
        lq, rq = session.queues.get(left.job.queue), session.queues.get(right.job.queue)
        if lq is None or rq is None or lq.uid == rq.uid:
            return 0
        ij, ji = less(lq, rq), less(rq, lq)
        return 0 if ij == ji else (-1 if ij else 1)

    return compare


def rank_bundles(bundles: list[Bundle], need: Resource, policy: Policy) -> list[Bundle]:
    """``SortBundlesForPreempt``/``ForReclaim``: safe first, then the policy, then efficiency,
    then job UID, first task UID and size."""

    def compare(left: Bundle, right: Bundle) -> int:
        if left.kind != right.kind:
            return int(left.kind) - int(right.kind)
        result = policy(left, right)
        if result:
            return result
        lroi, rroi = _roi(left, need), _roi(right, need)
        if lroi != rroi:
            return -1 if lroi > rroi else 1
        lkey = (left.job.uid, left.tasks[0].uid if left.tasks else "", len(left.tasks))
        rkey = (right.job.uid, right.tasks[0].uid if right.tasks else "", len(right.tasks))
        return -1 if lkey < rkey else int(lkey > rkey)

    return sorted(bundles, key=functools.cmp_to_key(compare))


# -- the preemptor side -------------------------------------------------------------------
def preemptive_for(session: Session, queue: QueueInfo, tasks: list[TaskInfo]) -> bool:
    """``Session.Preemptive(queue, tasks)``: the plugins asked once for the tasks' sum."""
    together = dataclasses.replace(tasks[0], resreq=_sum(tasks), init_resreq=_sum(tasks, init=True))
    return session.preemptive(queue, together)


def _evict_for_job(session: Session, *, queue: QueueInfo, job: JobInfo, domain: str,
                   bundles: list[Bundle], need: Resource, reason: str) -> Statement | None:
    """Bundles added one by one; a dry run once the freed room could hold ``need``."""
    room = domain_room(session, domain)
    chosen: list[TaskInfo] = []
    for bundle in bundles:
        chosen.extend(bundle.tasks)
        room.add(bundle.local)
        if not need.less_equal(room, Default.ZERO):
            continue
        plan = plan_in_domain(session, queue=queue, job=job, victims=list(chosen),
                              reason=reason, domain=domain)
        if plan is not None:
            return plan
    return None


def select_bundles(
    session: Session,
    *,
    context: EvictionContext,
    candidates: dict[JobID, list[TaskInfo]],
    need: Resource,
    policy: Policy,
    allow_whole: bool,
) -> list[Bundle]:
    """``selectDomainBundles`` after the action's own candidate filter: bundles per victim
    job, ranked, filtered once by the plugins, rebuilt, ranked again; whole bundles dropped
    unless ``allowWholeBundle``."""
    bundles = [bundle for uid, tasks in candidates.items()
               for bundle in job_bundles(session.jobs[uid], tasks)]
    if not bundles:
        return []
    bundles = rank_bundles(bundles, need, policy)
    allowed = {t.uid for t in unified_evictable(session, context, flatten(bundles))}
    if not allowed:
        return []
    valid = rank_bundles(apply_allowed(bundles, allowed), need, policy)
    return [b for b in valid if allow_whole or b.kind is BundleKind.SAFE]


Select = Callable[[QueueInfo, JobInfo, list[TaskInfo], Resource, str], list[Bundle]]
"""The action's bundles for a preemptor job of a queue, given its pending tasks, need and
domain (a HyperNode or the cluster top): victims only from the domain's nodes."""


def run_gang_eviction(
    session: Session, *, reason: str, select: Select, reclaim: bool, max_domains: int
) -> None:
    """The ``Execute`` of both actions: queues in queue order (gangreclaim skips overused
    ones), their starving, valid, non-Pending jobs in job order, one statement each, committed
    when the job is then pipelined."""
    queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order)
    seen: set[str] = set()
    starving: dict[str, PriorityQueue[JobInfo]] = {}
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
    while queues:
        queue = queues.pop()
        if reclaim and session.overused(queue):
            continue
        jobs = starving.get(queue.uid)
        while jobs:
            job = jobs.pop()
            statement = Statement(session)
            pending = pending_for_eviction(session, job)
            if pending and (not reclaim or preemptive_for(session, queue, pending)):
                need = _sum(pending, init=True)
                for domain in candidate_domains(session, job, max_domains):
                    if not len(session.hypernodes.rows(domain)):
                        continue
                    bundles = select(queue, job, pending, need, domain)
                    plan = _evict_for_job(session, queue=queue, job=job, domain=domain,
                                          need=need, reason=reason, bundles=bundles)
                    if plan is not None:
                        statement.merge(plan)
                        break
            if session.job_pipelined(job):
                statement.commit()
            else:
                statement.discard()
