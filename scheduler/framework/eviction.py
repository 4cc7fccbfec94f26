"""What the preempt and reclaim actions share: candidate nodes, the victim bound, eviction.

Candidate nodes follow Volcano's ``PredicateNodes`` with ``PredicateForPreemptAction``: every
node that no predicate rules out for good (a lack of resources does not), sampled from the
session's rotating start like allocate, then ordered by the summed plugin scores.

To avoid a Python pass over the tasks of nodes that cannot work out, :class:`EvictableIndex`
keeps, per queue and job priority, a column block with the summed requests of the tasks a
preemptor could at most evict on each node. ``future idle + evictable`` is an upper bound of
what evictions can free there, so nodes below the request are dropped with one vector
comparison — they would fail Volcano's ``ValidateVictims`` anyway. When the ``priority``
plugin takes part in every tier that names victims, only lower-priority jobs count; when
``gang`` does, only jobs above their minMember. The bound is kept exact across evictions and
their undoing, so it never hides a node that could work.

:func:`evict_on_node` is the per-node step of both actions: victims from the plugins, the
``ValidateVictims`` check, then evictions lowest first (``BuildVictimsPriorityQueue`` order)
in a statement of the node's own that is merged into the job's statement only once the
preemptor is pipelined there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.resource import Default
from scheduler.api.status import Code
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, QueueID, TaskID, TaskStatus
from scheduler.framework.hooks import FloatArray, IntArray
from scheduler.framework.select import sampling_target
from scheduler.framework.session import Session
from scheduler.framework.shard import shard_first
from scheduler.framework.statement import Statement

__all__ = [
    "EvictableIndex",
    "candidate_rows",
    "evict_on_node",
    "fits_resources",
    "plugin_in_every_tier",
    "predicate_passes",
    "preemption_never",
    "sorted_victims",
    "unresolvable_exact",
    "victims_suffice",
]

TaskFilter = Callable[[TaskInfo], bool]
FitCheck = Callable[[NodeInfo], bool]


@dataclass(slots=True)
class EvictableIndex:
    """Per queue and job priority, per node, the summed requests of the tasks in ``statuses``
    that may be evicted at all (preemptable flag set).

    With ``gang_guard`` (``gang`` takes part in every tier that names victims) a job counts
    only while it runs more than its ``minMember``: gang never gives up a task of a job at its
    minimum, so such a job's tasks could not be victims anyway.
    """

    session: Session
    statuses: TaskStatus
    gang_guard: bool = False
    blocks: dict[tuple[QueueID, int], FloatArray] = field(default_factory=dict)
    _tasks: dict[JobID, dict[TaskID, tuple[int, FloatArray]]] = field(default_factory=dict)
    """Per job, its evictable tasks: node row and request vector."""
    _counted: set[JobID] = field(default_factory=set)
    """Jobs whose tasks are in ``blocks``."""

    def __post_init__(self) -> None:
        table = self.session.table
        nodes = self.session.nodes
        statuses = {status for status in TaskStatus if status & self.statuses}
        vectors: dict[tuple[object, ...], FloatArray] = {}  # pods of one template ask alike
        rows: dict[tuple[QueueID, int], tuple[list[int], list[FloatArray]]] = {}
        for job in self.session.jobs.values():
            if job.queue not in self.session.queues:
                continue
            entries = self._tasks[job.uid] = {}
            counted = self._counts(job)
            if counted:
                self._counted.add(job.uid)
            for status in statuses:
                for task in job.task_status_index.get(status, {}).values():
                    node = nodes.get(task.node_name)
                    if node is None or not task.preemptable:
                        continue
                    request = task.resreq
                    signature = (request.milli_cpu, request.memory, *request.scalars.items())
                    vector = vectors.get(signature)
                    if vector is None:
                        vector = vectors[signature] = table.vector(request)
                    entries[task.uid] = (node.index, vector)
                    if counted:
                        indices, values = rows.setdefault((job.queue, job.priority), ([], []))
                        indices.append(node.index)
                        values.append(vector)
        shape = (len(table), len(table.dims))
        for job in self.session.jobs.values():
            self.blocks.setdefault((job.queue, job.priority), np.zeros(shape))
        for key, (indices, values) in rows.items():
            np.add.at(self.blocks[key], np.array(indices, dtype=np.intp), np.array(values))

    def _counts(self, job: JobInfo) -> bool:
        return not self.gang_guard or job.ready_task_num() > job.min_available

    def total(
        self, queues: Iterable[QueueID], *, below_priority: int | None = None
    ) -> FloatArray | None:
        """Summed over ``queues`` and, when given, job priorities below ``below_priority``."""
        wanted = set(queues)
        blocks = [
            block for (queue, priority), block in self.blocks.items()
            if queue in wanted and (below_priority is None or priority < below_priority)
        ]
        if not blocks:
            return None
        return blocks[0] if len(blocks) == 1 else np.sum(blocks, axis=0)

    def evicted(self, tasks: Iterable[TaskInfo], sign: float = -1.0) -> None:
        """Keep the bound exact: ``sign`` -1 after evictions, +1 once they are undone."""
        session = self.session
        touched: dict[JobID, JobInfo] = {}
        for task in tasks:
            job = session.jobs.get(task.job)
            entries = self._tasks.get(task.job)
            node = session.nodes.get(task.node_name)
            if job is None or entries is None or node is None:
                continue
            if sign < 0:
                entry = entries.pop(task.uid, None)
            else:
                entry = entries[task.uid] = (node.index, session.table.vector(task.resreq))
            if entry is not None and job.uid in self._counted:
                self.blocks[(job.queue, job.priority)][entry[0]] += sign * entry[1]
            touched[job.uid] = job
        for job in touched.values():
            counts = self._counts(job)
            if counts == (job.uid in self._counted):
                continue
            block = self.blocks[(job.queue, job.priority)]
            for row, vector in self._tasks[job.uid].values():
                block[row] += vector if counts else -vector
            if counts:
                self._counted.add(job.uid)
            else:
                self._counted.discard(job.uid)


def plugin_in_every_tier(session: Session, protocol: Any, name: str) -> bool:
    """Whether plugin ``name`` answers ``protocol`` (Preemptable / Reclaimable) in every tier
    where any plugin does. Tiers intersect their answers, so then no victim gets past it:
    with ``priority`` victims of another job have a lower job priority than the preemptor's,
    with ``gang`` their job runs more than its minMember."""
    tiers = [tier for tier in session.hooks(protocol) if tier]
    return bool(tiers) and all(
        any(getattr(plugin, "NAME", "") == name for plugin in tier) for tier in tiers
    )


def preemption_never(task: TaskInfo) -> bool:
    return (task.pod.get("spec") or {}).get("preemptionPolicy") == "Never"


def candidate_rows(
    session: Session, task: TaskInfo, evictable: FloatArray | None, *, scored: bool = True
) -> IntArray:
    """Rows worth trying for ``task``: best score first when ``scored`` (preempt), else in
    sampling order (reclaim does not score), the shard's first in soft node sharding; empty
    when none."""
    table = session.table
    total = len(table)
    mask = session.preempt_mask(task)
    rows = np.flatnonzero(mask)
    if not len(rows):
        return rows
    start = session.cursor % max(total, 1)
    rows = np.concatenate((rows[rows >= start], rows[rows < start]))
    target = sampling_target(total, session.sampling)
    if len(rows) > target:
        rows = rows[:target]
    if len(rows) < total:
        session.cursor = int(rows[-1]) + 1
    cols, values, _ = table.request_dims(task.init_resreq)
    if len(cols):
        if (cols < 0).any():
            return np.empty(0, dtype=np.intp)
        room = table.future_idle[rows][:, cols]
        if evictable is not None:
            room += evictable[rows][:, cols]
        rows = rows[np.all(values - room < 0.1, axis=1)]
    if scored and len(rows) > 1:
        scores = session.score(task, rows)
        rows = rows[np.argsort(-scores, kind="stable")]
    # Soft node sharding: the shard's nodes are tried first (GetPredicatedNodeByShard).
    return shard_first(session.shard, rows)


def predicate_passes(session: Session, task: TaskInfo, node: NodeInfo) -> bool:
    """``ssn.PredicateFn`` for one node: every plugin predicate, vector and exact."""
    if not session.predicate_mask(task, rows=slice(node.index, node.index + 1))[0]:
        return False
    return not session.wants_exact(task) or session.exact_check(task, node) is None


def unresolvable_exact(session: Session, task: TaskInfo, node: NodeInfo) -> bool:
    """An exact (per-node) predicate rules the node out whatever is evicted."""
    if not session.wants_exact(task):
        return False
    status = session.exact_check(task, node)
    return status is not None and status.code not in (Code.SUCCESS, Code.UNSCHEDULABLE)


def victims_suffice(task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """Volcano's ``ValidateVictims``: future idle plus the victims hold the request."""
    room = node.future_idle
    for victim in victims:
        room.add(victim.resreq)
    return task.init_resreq.less_equal(room, Default.ZERO)


def sorted_victims(session: Session, task: TaskInfo, victims: list[TaskInfo]) -> list[TaskInfo]:
    """Victims in eviction order, lowest first."""
    return sorted(victims, key=functools.cmp_to_key(session.victim_order(task)))


def evict_on_node(
    session: Session,
    *,
    task: TaskInfo,
    node: NodeInfo,
    victims: list[TaskInfo],
    fits: FitCheck,
    reason: str,
) -> Statement | None:
    """Evict ``victims`` (in order) until ``fits(node)``, then pipeline ``task`` there.

    Returns the node's statement (to merge) on success; otherwise nothing is left applied.
    """
    statement = Statement(session)
    fitted = fits(node)
    for victim in victims:
        if fitted:
            break
        statement.evict(victim, reason)
        fitted = fits(node)
    if fitted and statement.pipeline(task, node, eviction_occurred=statement.has_evictions) is None:
        return statement
    statement.discard()
    return None


def fits_resources(task: TaskInfo) -> FitCheck:
    def check(node: NodeInfo) -> bool:
        return task.init_resreq.less_equal(node.future_idle, Default.ZERO)

    return check
