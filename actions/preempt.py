"""preempt: starving jobs take resources from lower-value tasks of their own queue.

Volcano's ``actions/preempt/preempt.go``. Preemptor jobs are the jobs that are not Pending, are
valid and starving (``JobStarving``). Queue by queue (queue order):

* between jobs: each preemptor job in job order gets one statement; its pending tasks (task
  order) each look for a node where evicting Running/Bound, preemptable tasks of *other* jobs
  of the *same* queue makes room. The statement is committed when the job is then pipelined,
  else discarded;
* inside a job: each pending task of a starving job may evict lower tasks of its own job; each
  success is committed on its own.

A task never preempts when its pod says ``preemptionPolicy: Never``, or when the pod already
has a nominated node that passes the predicates (its victims are still leaving). A
best-effort preemptor only evicts best-effort tasks. Per node: the plugins name the victims
(``Preemptable``), the node must hold the request with them gone, victims leave lowest first
until the queue is allocatable, the request fits future idle and the predicates pass; then the
preemptor is pipelined there. With ``enableTopologyAwarePreemption`` the node is chosen by a
kube-scheduler style dry run instead (:mod:`scheduler.framework.dryrun`). A job with a
network-topology constraint (on the PodGroup or a sub-group) never preempts, as in Volcano.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Default
from scheduler.api.task import TaskInfo
from scheduler.api.types import PREEMPTABLE_STATUS, QueueID, TaskStatus
from scheduler.framework import hooks as h
from scheduler.framework.action_args import action_args
from scheduler.framework.arguments import arg
from scheduler.framework.dryrun import TopologyChooser
from scheduler.framework.eviction import (
    EvictableIndex,
    TaskFilter,
    candidate_rows,
    evict_on_node,
    plugin_in_every_tier,
    predicate_passes,
    preemption_never,
    sorted_victims,
    unresolvable_exact,
    victims_suffice,
)
from scheduler.framework.heap import PriorityQueue
from scheduler.framework.hypernodes import has_network_topology
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.metrics import record_preemption_attempt, record_victims

__all__ = ["Preempt", "PreemptArgs"]

REASON = "preempt"


@dataclass(frozen=True, slots=True)
class PreemptArgs:
    """The ``configurations`` entry of the preempt action."""

    predicate_error_cache: bool = arg("predicateErrorCacheEnable", True)
    topology_aware: bool = arg("enableTopologyAwarePreemption", False)
    worker_num: int = arg("topologyAwarePreemptWorkerNum", 16)
    min_candidate_percentage: int = arg("minCandidateNodesPercentage", 10)
    min_candidate_absolute: int = arg("minCandidateNodesAbsolute", 1)
    max_candidate_absolute: int = arg("maxCandidateNodesAbsolute", 100)


_NOT_ACTED_ON = {
    "predicateErrorCacheEnable": "candidate nodes are filtered per task with vector masks, "
    "so there is no per-role error cache to switch",
    "topologyAwarePreemptWorkerNum": "the dry runs are done one node after another",
}


class Preempt:
    NAME = "preempt"
    NOT_ACTED_ON = _NOT_ACTED_ON
    """Arguments of Volcano's action accepted without effect; the conf loader warns."""

    def __init__(self) -> None:
        self._warned: set[str] = set()

    def execute(self, session: Session) -> None:
        args: PreemptArgs = action_args(
            self.NAME, PreemptArgs, session.configurations,
            warned=self._warned)
        run = _Run(session, args)
        run.execute()


class _Run:
    """One execution of the action over one session."""

    def __init__(self, session: Session, args: PreemptArgs) -> None:
        self.session = session
        self.args = args
        self._index: EvictableIndex | None = None
        self.by_priority = plugin_in_every_tier(session, h.Preemptable, "priority")
        self.topology = (
            TopologyChooser(
                session,
                min_percentage=args.min_candidate_percentage,
                min_absolute=args.min_candidate_absolute,
                max_absolute=args.max_candidate_absolute,
            )
            if args.topology_aware
            else None
        )

    @property
    def index(self) -> EvictableIndex:
        """Built on first use: a cycle without preemptors pays nothing for it."""
        if self._index is None:
            self._index = EvictableIndex(
                self.session, PREEMPTABLE_STATUS,
                gang_guard=plugin_in_every_tier(self.session, h.Preemptable, "gang"))
        return self._index

    def execute(self) -> None:
        session = self.session
        preemptors: dict[QueueID, PriorityQueue[JobInfo]] = {}
        tasks: dict[str, PriorityQueue[TaskInfo]] = {}
        under_request: dict[QueueID, list[JobInfo]] = {}
        for job in session.jobs.values():
            if job.is_pending() or not session.is_valid(job) or job.queue not in session.queues:
                continue
            if not session.job_starving(job):
                continue
            if has_network_topology(job):
                # Volcano's preempt skips such jobs (their preemption is not supported yet).
                continue
            preemptors.setdefault(job.queue, PriorityQueue(session.job_order)).push(job)
            under_request.setdefault(job.queue, []).append(job)
            tasks[job.uid] = PriorityQueue(session.task_order, _pending(job))
        queues: PriorityQueue[QueueInfo] = PriorityQueue(
            session.queue_order, [session.queues[q] for q in preemptors]
        )
        while queues:
            queue = queues.pop()
            jobs = preemptors[queue.uid]
            while jobs:
                self._between_jobs(jobs.pop(), tasks)
            for job in under_request[queue.uid]:
                self._within_job(job)

    def _between_jobs(self, job: JobInfo, tasks: dict[str, PriorityQueue[TaskInfo]]) -> None:
        session = self.session
        statement = Statement(session)
        pending = tasks[job.uid]
        while session.job_starving(job) and pending:
            preemptor = pending.pop()
            if preemptor.status is not TaskStatus.PENDING:
                continue

            def other_jobs(task: TaskInfo, preemptor: TaskInfo = preemptor) -> bool:
                victim_job = session.jobs.get(task.job)
                return (
                    _evictable(task, preemptor)
                    and victim_job is not None
                    and victim_job.queue == job.queue
                    and task.job != preemptor.job
                )

            self._preempt(statement, preemptor, job, other_jobs, other_jobs_only=True)
        if session.job_pipelined(job):
            statement.commit()
        else:
            undone = statement.evicted()
            statement.discard()
            self.index.evicted(undone, +1.0)

    def _within_job(self, job: JobInfo) -> None:
        pending = PriorityQueue(self.session.task_order, _pending(job))
        while pending:
            preemptor = pending.pop()
            if preemptor.status is not TaskStatus.PENDING:
                continue

            def same_job(task: TaskInfo, preemptor: TaskInfo = preemptor) -> bool:
                return _evictable(task, preemptor) and task.job == preemptor.job

            statement = Statement(self.session)
            if not self._preempt(statement, preemptor, job, same_job):
                statement.discard()  # holds nothing: nodes that failed kept no eviction
                break
            statement.commit()

    # -- one preemptor --------------------------------------------------------------------
    def _preempt(
        self,
        statement: Statement,
        preemptor: TaskInfo,
        job: JobInfo,
        victim_filter: TaskFilter,
        *,
        other_jobs_only: bool = False,
    ) -> bool:
        session = self.session
        if not self._eligible(preemptor):
            return False
        if session.pre_predicate(preemptor) is not None:
            return False
        queue = session.queues[job.queue]
        below = job.priority if other_jobs_only and self.by_priority else None
        bound = self.index.total([job.queue], below_priority=below)
        rows = candidate_rows(session, preemptor, bound)
        table_nodes = session.table.nodes
        if self.topology is not None:
            placed = self.topology.preempt(
                statement, preemptor=preemptor, queue=queue,
                nodes=[table_nodes[int(row)] for row in rows],
                victim_filter=victim_filter, reason=REASON)
            if placed is not None:
                self.index.evicted(placed)
            return placed is not None
        for row in rows.tolist():
            node = table_nodes[row]
            if unresolvable_exact(session, preemptor, node):
                continue
            candidates = [t for t in node.tasks.values() if victim_filter(t)]
            victims = session.preemptable(preemptor, candidates)
            record_victims(len(victims))
            if not victims_suffice(preemptor, node, victims):
                continue

            def fits(target: NodeInfo) -> bool:
                return (
                    session.allocatable(queue, preemptor)
                    and preemptor.init_resreq.less_equal(target.future_idle, Default.ZERO)
                    and predicate_passes(session, preemptor, target)
                )

            node_statement = evict_on_node(
                session, task=preemptor, node=node,
                victims=sorted_victims(session, preemptor, victims), fits=fits, reason=REASON)
            record_preemption_attempt()
            if node_statement is not None:
                self.index.evicted(node_statement.evicted())
                statement.merge(node_statement)
                return True
        return False

    def _eligible(self, preemptor: TaskInfo) -> bool:
        """Volcano's ``taskEligibleToPreempt``."""
        if preemption_never(preemptor):
            return False
        nominated = preemptor.nominated_node
        if not nominated:
            return True
        node = self.session.nodes.get(nominated)
        if node is None:
            return False
        if predicate_passes(self.session, preemptor, node):
            return False
        if not self.session.preempt_mask(preemptor)[node.index]:
            return True  # ruled out for good there: preempt elsewhere
        own = _pod_priority(preemptor)
        return not any(
            _pod_priority(task) < own and _terminating_by_preemption(task)
            for task in node.tasks.values()
        )


def _pending(job: JobInfo) -> list[TaskInfo]:
    return [t for t in job.task_status_index.get(TaskStatus.PENDING, {}).values()
            if not t.sched_gated]


_VICTIM_STATUSES = frozenset((TaskStatus.BOUND, TaskStatus.RUNNING))


def _evictable(task: TaskInfo, preemptor: TaskInfo) -> bool:
    if task.status not in _VICTIM_STATUSES or not task.preemptable:
        return False
    return not preemptor.best_effort or task.best_effort


def _pod_priority(task: TaskInfo) -> int:
    value = (task.pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _terminating_by_preemption(task: TaskInfo) -> bool:
    meta = task.pod.get("metadata") or {}
    if not meta.get("deletionTimestamp"):
        return False
    for condition in (task.pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget":
            return bool(condition.get("status") == "True"
                        and condition.get("reason") == "PreemptionByScheduler")
    return False
