"""Session: one scheduling cycle over a snapshot, with the plugins of the conf's tiers.

Plugins are built fresh for every session and register capabilities by implementing the hook
Protocols of :mod:`scheduler.framework.hooks`. This module combines them exactly as Volcano
does per extension point: first non-zero for orders, AND for readiness and predicates, OR for
overuse, sums for scores, and tier-scoped votes for pipelining and enqueueing.
"""

from __future__ import annotations

import inspect
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.nodeshard import NOT_IN_SHARD
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.status import Status
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, JobID, QueueID, TaskStatus
from scheduler.framework import hooks as h
from scheduler.framework.hypernodes import HyperNodeView
from scheduler.framework.interface import SessionSink
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.settled import Contribution
from scheduler.framework.shard import ShardView
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.victims import (
    combine_evictable,
    preempt_mask,
    victim_order,
    victim_tasks,
)

__all__ = [
    "AllocateError",
    "NodeSampling",
    "PluginEntry",
    "Session",
    "default_task_order",
]


log = structlog.get_logger("lahar.session")


class AllocateError(Exception):
    """Raised by an ``on_allocate`` handler to veto an in-session placement."""


@dataclass(frozen=True, slots=True)
class NodeSampling:
    """``--percentage-nodes-to-find`` and friends (0 percentage = adaptive)."""

    percentage: int = 0
    minimum_feasible: int = 100
    minimum_percentage: int = 5


@dataclass(slots=True)
class PluginEntry:
    plugin: Any
    flags: Mapping[str, bool] = field(default_factory=dict)
    tier: int = 0

    def enabled(self, flag: str | None) -> bool:
        return flag is None or self.flags.get(flag, True)


_IMPLEMENTS: dict[tuple[type, Any], bool] = {}
"""(plugin class, hook Protocol) → whether the class implements it. Plugins are built anew
for every session and a runtime ``Protocol`` check walks the protocol's members each time;
plugins define their hooks as methods of their class, so the answer is the class's."""


def _implements(plugin: Any, protocol: Any) -> bool:
    key = (type(plugin), protocol)
    known = _IMPLEMENTS.get(key)
    if known is None:
        known = _IMPLEMENTS[key] = isinstance(plugin, protocol)
    return known


_TAKES_ROWS: dict[type, bool] = {}


def _takes_rows(plugin: Any) -> bool:
    """Whether ``plugin.predicate_mask`` accepts ``rows`` (:class:`.hooks.Predicate`)."""
    cls = type(plugin)
    known = _TAKES_ROWS.get(cls)
    if known is None:
        parameters = inspect.signature(plugin.predicate_mask).parameters
        known = _TAKES_ROWS[cls] = "rows" in parameters
    return known


def _cmp(left: float, right: float) -> int:
    return -1 if left < right else (1 if left > right else 0)


def _name_index(name: str) -> int | None:
    parts = name.split("-")
    if len(parts) >= 3 and parts[-1].isdigit():
        return int(parts[-1])
    return None


def default_task_order(left: TaskInfo, right: TaskInfo) -> int:
    """Volcano's fallback: vc-Job pod index, then creation time, then UID."""
    li, ri = _name_index(left.name), _name_index(right.name)
    if li is not None and ri is not None and li != ri:
        return _cmp(li, ri)
    return _cmp(left.creation, right.creation) or (
        -1 if left.uid < right.uid else int(left.uid > right.uid)
    )


class Session:
    def __init__(
        self,
        snapshot: Snapshot,
        *,
        tiers: Sequence[Sequence[PluginEntry]],
        sink: SessionSink,
        configurations: Mapping[str, Mapping[str, Any]] | None = None,
        clock: Callable[[], float],
        rng: random.Random,
        enabled_actions: Sequence[str] = (),
        sampling: NodeSampling | None = None,
        cursor: int = 0,
    ) -> None:
        self.uid = str(uuid.UUID(int=rng.getrandbits(128)))
        self.clock = clock
        self.rng = rng
        self.sink = sink
        self.configurations = dict(configurations or {})
        self.enabled_actions = tuple(enabled_actions)
        self.sampling = sampling or NodeSampling()
        self.cursor = cursor
        """Rotating start row for node sampling, carried from session to session."""
        self.jobs: dict[JobID, JobInfo] = snapshot.jobs
        self.snapshot = snapshot
        self.settled: AbstractSet[JobID] = snapshot.settled
        """Jobs whose close is known in advance (:mod:`scheduler.framework.settled`)."""
        self.active_jobs: dict[JobID, JobInfo]
        if not self.settled:
            self.active_jobs = self.jobs
        elif snapshot.active is not None:
            self.active_jobs = {uid: self.jobs[uid] for uid in snapshot.active}
        else:
            self.active_jobs = {uid: job for uid, job in self.jobs.items()
                                if uid not in self.settled}
        """The jobs that are not settled, in ``jobs`` order: every job with a pending task or
        a pending PodGroup is here."""
        self.touched_jobs: set[JobID] = set()
        """Jobs whose tasks or PodGroup this session changed."""
        self.queues: dict[QueueID, QueueInfo] = snapshot.queues
        self.node_list: list[NodeInfo] = snapshot.nodes
        self.nodes: dict[str, NodeInfo] = {node.name: node for node in snapshot.nodes}
        self.table = NodeTable(
            snapshot.nodes,
            extra_dims=snapshot.device_dims,
            previous=snapshot.previous_table,
            renewed=snapshot.renewed_nodes,
        )
        snapshot.table = self.table
        # Consumed: the table keeps what it needs of its predecessor for this session only.
        # Left here, each snapshot would keep the last session (through its table's row hooks
        # and plugins) and so every session before it alive.
        snapshot.previous_table = None
        self.touched_nodes = snapshot.touched_nodes
        self.touched_tasks = snapshot.touched_tasks
        """Copies this session changed; the cache renews them before the next session."""
        self.namespace_labels = snapshot.namespace_labels
        self.total_resource = self.table.total_allocatable()
        self.tiers = [list(tier) for tier in tiers]
        self.invalid_jobs: dict[JobID, tuple[str, str]] = {}
        self.plugin_seconds: dict[tuple[str, str], float] = {}
        """``(plugin name, "OnSessionOpen"|"OnSessionClose")`` → seconds spent there."""
        self.allocation_version = 0
        """Bumped on every in-session placement or eviction (a cache key for derived state)."""
        # Only the phase is compared at close; copying whole PodGroups here cost a clone per job.
        # A settled job's phase stays as its last close set it unless the session changes
        # the job.
        self.podgroup_phase_before: dict[JobID, str] = {
            uid: job.podgroup.phase for uid, job in self.active_jobs.items()}
        self.shared: dict[str, object] = {}
        """Per-session state plugins share (the pod index), gone with the session. Kept here
        rather than in a module-level map keyed by session, whose values would keep every
        session they refer back to alive."""
        self._device_nodes: bool | None = None
        self._allocated_at_open: dict[JobID, Resource] = {}
        """Copies of ``JobInfo.allocated`` taken just before a job's first in-session change."""
        self._hook_cache: dict[type, list[list[Any]]] = {}
        self._hypernode_view: HyperNodeView | None = None
        self._shard_view: ShardView | None = None
        self._job_order = self._flat(h.JobOrder, "job_order")
        ordering = [p for tier in self.hooks(h.JobOrder) for p in tier]
        self._order_keys: dict[JobID, tuple[int, tuple[Any, ...]]] | None = (
            {} if all(isinstance(p, h.JobOrderKey) for p in ordering) else None)
        """Job → (its revision, its order key) when every job order is a key order
        (:class:`~scheduler.framework.hooks.JobOrderKey`); None: compare plugin by plugin."""
        self._order_key_fns = tuple(p.job_order_key for p in ordering
                                    if isinstance(p, h.JobOrderKey))
        self._task_order = self._flat(h.TaskOrder, "task_order")
        self._job_ready: list[Callable[[JobInfo], bool]] = [
            p.job_ready for tier in self.hooks(h.JobReady) for p in tier]
        self._voters: dict[str, list[list[Callable[[JobInfo], Any]]]] = {}
        """Vote method → its plugins' bound methods by tier (:meth:`_vote`)."""
        self._queue_order = self._flat(h.QueueOrder, "queue_order")
        self._handlers = [p for tier in self.hooks(h.EventHandler) for p in tier]
        self._scorers = [p for tier in self.hooks(h.NodeScorer) for p in tier]
        self._predicates = [p for tier in self.hooks(h.Predicate) for p in tier]
        self._windowed = [_takes_rows(p) for p in self._predicates]
        """Per predicate plugin: whether its ``predicate_mask`` takes ``rows``."""
        self._preempt_predicates = [
            (p, _implements(p, h.PreemptPredicate)) for p in self._predicates
        ]
        self._exact = [p for tier in self.hooks(h.ExactPredicate) for p in tier]

    # -- lifecycle ------------------------------------------------------------------------
    def open(self) -> None:
        """Run every plugin's ``on_session_open`` in tier order, then drop invalid jobs."""
        for tier in self.tiers:
            for entry in tier:
                started = time.perf_counter()
                entry.plugin.on_session_open(self)
                self.time_plugin(entry, "OnSessionOpen", time.perf_counter() - started)
        # A settled job was valid at its last close and has not changed since.
        for job in list(self.active_jobs.values()):
            verdict = self.job_valid(job)
            if verdict is None and (
                job.podgroup.network_topology is not None or job.podgroup.sub_groups
            ):
                self.hypernodes.tell_tier_name_problem(job)
            if verdict is not None:
                self.invalid_jobs[job.uid] = verdict

    def time_plugin(self, entry: PluginEntry, stage: str, seconds: float) -> None:
        name = getattr(entry.plugin, "NAME", "") or type(entry.plugin).__name__
        key = (name, stage)
        self.plugin_seconds[key] = self.plugin_seconds.get(key, 0.0) + seconds

    def plugin_entries(self) -> list[PluginEntry]:
        return [entry for tier in self.tiers for entry in tier]

    def release(self) -> None:
        """After close: unlink the plugins, which point back at this session.

        The session and everything it alone holds (its snapshot's clones, the node table)
        then go by reference counting when the cycle ends, instead of waiting for a full
        garbage collection, which on a big cluster stops every thread for a fraction of a
        second.
        """
        for tier in self.tiers:
            for entry in tier:
                fields = getattr(entry.plugin, "__dict__", {})
                for name in [name for name, value in fields.items() if value is self]:
                    fields[name] = None

    def hooks(self, protocol: Any) -> list[list[Any]]:
        """Plugins implementing ``protocol`` with its flag enabled, grouped by tier."""
        cached = self._hook_cache.get(protocol)
        if cached is None:
            flag = h.HOOK_FLAGS.get(protocol)
            cached = [
                [e.plugin for e in tier if _implements(e.plugin, protocol) and e.enabled(flag)]
                for tier in self.tiers
            ]
            self._hook_cache[protocol] = cached
        return cached

    def _flat(self, protocol: Any, method: str) -> list[Callable[[Any, Any], int]]:
        return [getattr(p, method) for tier in self.hooks(protocol) for p in tier]

    def is_valid(self, job: JobInfo) -> bool:
        return job.uid not in self.invalid_jobs

    def phase_before(self, uid: JobID) -> str | None:
        """The job's PodGroup phase when the session opened (None: not a job then)."""
        phase = self.podgroup_phase_before.get(uid)
        if phase is None and uid in self.settled:
            # Unchanged since it settled; read before close sets this cycle's phase.
            return self.jobs[uid].podgroup.phase
        return phase

    def closing_jobs(self) -> list[JobInfo]:
        """The jobs whose close must be derived: all but the settled jobs left untouched."""
        if not self.settled:
            return list(self.jobs.values())
        touched = self.touched_jobs & self.settled
        if not touched:
            return list(self.active_jobs.values())
        return [job for uid, job in self.jobs.items()
                if uid not in self.settled or uid in touched]

    def settled_totals(
        self, name: str, contribution: Contribution, *, width: int
    ) -> tuple[dict[QueueID, list[Resource]], list[JobInfo]]:
        """Per-queue sums of ``contribution`` over the settled jobs, and the jobs the caller
        must add itself: the active ones, the settled ones whose contribution is not kept and
        those this session changed (in ``jobs`` order). Without kept sums, every job is the
        caller's. A contribution read at close sees the session's changes this way."""
        store = self.snapshot.settled_sums
        if store is None or not self.settled:
            return {}, list(self.jobs.values())
        touched = self.touched_jobs & self.settled
        totals, left = store.totals(name, jobs=self.jobs, contribution=contribution,
                                    width=width, exclude=touched)
        if not left:
            return totals, list(self.active_jobs.values())
        return totals, [job for uid, job in self.jobs.items()
                        if uid not in self.settled or uid in left]

    # -- orders (first non-zero) ----------------------------------------------------------
    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        if self._order_keys is not None:
            lk, rk = self._current_order_key(left), self._current_order_key(right)
            return -1 if lk < rk else (1 if lk > rk else 0)
        for fn in self._job_order:
            result = fn(left, right)
            if result:
                return result
        return _cmp(left.creation, right.creation) or _cmp_str(left.uid, right.uid)

    def job_order_key(self) -> Callable[[JobInfo], tuple[Any, ...]] | None:
        """A key whose order is :meth:`job_order` (for a keyed
        :class:`~scheduler.framework.heap.PriorityQueue`), or None when some job order is not
        a key order. A job's key holds until its tasks change."""
        return self._current_order_key if self._order_keys is not None else None

    def _current_order_key(self, job: JobInfo) -> tuple[Any, ...]:
        assert self._order_keys is not None
        kept = self._order_keys.get(job.uid)
        return kept[1] if kept is not None and kept[0] == job.revision else self._order_key(job)

    def _order_key(self, job: JobInfo) -> tuple[Any, ...]:
        """The job's place in job order: each plugin's key, then creation time and UID (the
        fallback of :meth:`job_order`), kept until the job's tasks change."""
        assert self._order_keys is not None
        key = (*(fn(job) for fn in self._order_key_fns), job.creation, job.uid)
        self._order_keys[job.uid] = (job.revision, key)
        return key

    def _forget_order(self, uid: JobID) -> None:
        """Drop a kept order key once the event handlers saw a change of the job's tasks
        (the revision already moved; this also covers plugin state the handlers moved)."""
        if self._order_keys is not None:
            self._order_keys.pop(uid, None)

    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        for fn in self._task_order:
            result = fn(left, right)
            if result:
                return result
        return default_task_order(left, right)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        for fn in self._queue_order:
            result = fn(left, right)
            if result:
                return result
        return _cmp(left.creation, right.creation) or _cmp_str(left.uid, right.uid)

    # -- job predicates -------------------------------------------------------------------
    def job_valid(self, job: JobInfo) -> tuple[str, str] | None:
        for tier in self.hooks(h.JobValid):
            for plugin in tier:
                verdict = plugin.job_valid(job)
                if verdict is not None:
                    return verdict
        return None

    def job_ready(self, job: JobInfo) -> bool:
        return all(ready(job) for ready in self._job_ready)

    def _vote(self, protocol: Any, method: str, job: JobInfo) -> bool:
        voters = self._voters.get(method)
        if voters is None:
            voters = self._voters[method] = [[getattr(plugin, method) for plugin in tier]
                                             for tier in self.hooks(protocol)]
        return h.tier_vote(voters, job)

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote(h.JobPipelined, "job_pipelined", job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote(h.JobEnqueueable, "job_enqueueable", job)

    def job_enqueued(self, job: JobInfo) -> None:
        for tier in self.hooks(h.JobEnqueued):
            for plugin in tier:
                plugin.job_enqueued(job)

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self.hooks(h.JobStarving):
            if tier:
                return all(p.job_starving(job) for p in tier)
        return False

    # -- queue predicates -----------------------------------------------------------------
    def overused(self, queue: QueueInfo) -> bool:
        return any(p.overused(queue) for tier in self.hooks(h.Overused) for p in tier)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(p.allocatable(queue, task) for tier in self.hooks(h.Allocatable) for p in tier)

    def allocatable_refused_by(self, queue: QueueInfo, task: TaskInfo) -> str | None:
        """The name of the first plugin whose Allocatable refuses ``task`` in ``queue``."""
        for tier in self.hooks(h.Allocatable):
            for plugin in tier:
                if not plugin.allocatable(queue, task):
                    return str(getattr(plugin, "NAME", type(plugin).__name__))
        return None

    def allocatable_reason(self, queue: QueueInfo, task: TaskInfo) -> str | None:
        """A refusing plugin's own words for its last Allocatable refusal of ``task``."""
        for tier in self.hooks(h.Allocatable):
            for plugin in tier:
                explain = getattr(plugin, "allocatable_reason", None)
                reason = explain(queue, task) if explain is not None else None
                if reason:
                    return str(reason)
        return None

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """AND: may ``queue`` reclaim from other queues for ``task``."""
        return all(p.preemptive(queue, task) for tier in self.hooks(h.Preemptive) for p in tier)

    # -- eviction (combination rules in scheduler.framework.victims) ----------------------
    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return combine_evictable(self, h.Preemptable, "preemptable", preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return combine_evictable(self, h.Reclaimable, "reclaimable", reclaimer, candidates)

    def victim_order(self, preemptor: TaskInfo) -> Callable[[TaskInfo, TaskInfo], int]:
        return victim_order(self, preemptor)

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        return victim_tasks(self, tasks)

    # -- node filtering and scoring -------------------------------------------------------
    def pre_predicate(self, task: TaskInfo) -> Status | None:
        for tier in self.hooks(h.PrePredicate):
            for plugin in tier:
                status = plugin.pre_predicate(task)
                if status is not None and not status.ok:
                    return status
        return None

    @property
    def shard(self) -> ShardView:
        """This scheduler's node shard over the node table (:mod:`.shard`)."""
        view = self._shard_view
        if view is None:
            view = self._shard_view = ShardView(self.snapshot.shard, self.table)
        return view

    def predicate_mask(self, task: TaskInfo, rows: slice | None = None) -> h.BoolArray:
        """AND of every vectorised predicate (resource fit is the caller's first check), and
        of the node shard in hard sharding mode: over every node, or over the table rows of
        the ``rows`` slice only (node selection's windowed search, :mod:`.select`)."""
        table = self.table
        window = slice(None) if rows is None else rows
        if self.shard.hard:
            mask = self.shard.mask[window].copy()
        else:
            mask = np.ones(len(table.span(window)), dtype=bool)
        for plugin, windowed in zip(self._predicates, self._windowed, strict=True):
            if rows is None:
                mask &= plugin.predicate_mask(task, table)
            elif windowed:
                mask &= plugin.predicate_mask(task, table, rows=rows)
            else:  # a plugin that answers for every node only
                mask &= plugin.predicate_mask(task, table)[rows]
        return mask

    def preempt_mask(self, task: TaskInfo) -> h.BoolArray:
        """Nodes no predicate rules out for good (``PredicateForPreemptAction``), inside the
        node shard in hard sharding mode."""
        mask = preempt_mask(self, task, self._preempt_predicates)
        if self.shard.hard:
            mask &= self.shard.mask
        return mask

    def predicate_reasons(
        self, task: TaskInfo, alive: h.BoolArray
    ) -> list[tuple[h.BoolArray, str]]:
        out: list[tuple[h.BoolArray, str]] = []
        remaining = alive.copy()
        if self.shard.hard:  # checked before any predicate, as Volcano's PredicateNodes does
            outside = remaining & ~self.shard.mask
            if outside.any():
                out.append((outside, NOT_IN_SHARD))
                remaining &= self.shard.mask
        for plugin in self._predicates:
            for failed, reason in plugin.predicate_reasons(task, self.table, remaining):
                failed = failed & remaining
                if failed.any():
                    out.append((failed, reason))
                    remaining &= ~failed
        return out

    def simulate_predicate(self, task: TaskInfo, node: NodeInfo) -> bool:
        """Volcano's ``SimulatePredicateFn`` for one node: the AND of the plugins' simulate
        checks, then the device checks (Volcano's predicates plugin runs each device family's
        ``FilterNode`` there); with no plugin that simulates, every node passes."""
        plugins = [p for tier in self.hooks(h.SimulatePredicate) for p in tier]
        if not plugins:
            return True
        for plugin in plugins:
            if not plugin.simulate_predicate_mask(task, self.table)[node.index]:
                return False
        return not self.wants_exact(task) or self.exact_check(task, node) is None

    def wants_exact(self, task: TaskInfo) -> bool:
        """Whether any exact predicate has something to check for ``task``."""
        return any(plugin.wants_exact(task) for plugin in self._exact)

    def exact_known(self, task: TaskInfo, rows: h.IntArray
                    ) -> tuple[h.IntArray, list[str]] | None:
        """What the exact check is already known to answer on the node ``rows``, when one
        plugin alone checks ``task`` and can say (``exact_known``): codes (1 passes, 0 unknown,
        ``-1 - i`` fails with ``reasons[i]``) and the reasons; else None."""
        wanting = [plugin for plugin in self._exact if plugin.wants_exact(task)]
        if len(wanting) != 1:
            return None
        known = getattr(wanting[0], "exact_known", None)
        return None if known is None else known(task, rows)

    def exact_check(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        for plugin in self._exact:
            status = plugin.check_node(task, node)
            if status is not None and not status.ok:
                return status
        return None

    # -- network topology (HyperNodes) ---------------------------------------------------
    @property
    def hypernodes(self) -> HyperNodeView:
        """The HyperNode tree as this session sees it (built on first use)."""
        view = self._hypernode_view
        if view is None:
            view = self._hypernode_view = HyperNodeView(self.snapshot.hypernodes, self.table)
        return view

    def hypernode_gradients(self, job: JobInfo, root: str, purpose: str) -> list[list[str]]:
        """The first plugin's answer in tier order (Volcano's ``HyperNodeGradientForJobFn``);
        without one, ``root`` alone."""
        for tier in self.hooks(h.HyperNodeGradient):
            for plugin in tier:
                return list(plugin.hypernode_gradients(job, root, purpose))
        return [[root]]

    def score_hypernodes(self, job: JobInfo, names: list[str]) -> dict[str, float]:
        """The sum of every scoring plugin's scores (Volcano's ``HyperNodeOrderMapFn``)."""
        total = dict.fromkeys(names, 0.0)
        for tier in self.hooks(h.HyperNodeScorer):
            for plugin in tier:
                for name, score in plugin.score_hypernodes(job, names).items():
                    if name in total:
                        total[name] += score
        return total

    def score(self, task: TaskInfo, candidates: h.IntArray) -> h.FloatArray:
        total = np.zeros(len(candidates))
        for plugin in self._scorers:
            total += plugin.score_nodes(task, self.table, candidates)
        return total

    # -- in-session state changes (only Statement and dispatch call these) ----------------
    def place(self, task: TaskInfo, node: NodeInfo, status: TaskStatus) -> None:
        """Put a Pending task on ``node`` as Allocated or Pipelined; handlers may veto."""
        job = self.jobs[task.job]
        self.allocation_version += 1
        self.touched_tasks.add(task.uid)
        self.touched_nodes.add(node.name)
        self.touched_jobs.add(job.uid)
        self._keep_allocated_at_open(job)
        job.update_task_status(task, status)
        task.node_name = node.name
        task.last_node = node.name
        node.add_task(task)
        self.table.sync(node.index)
        try:
            for handler in self._handlers:
                handler.on_allocate(task)
        except AllocateError:
            self.unplace(task, notify=False)
            raise
        finally:
            self._forget_order(job.uid)

    def unplace(self, task: TaskInfo, *, notify: bool = True) -> None:
        """Undo :meth:`place`: back to Pending, off the node."""
        self.allocation_version += 1
        self.touched_tasks.add(task.uid)
        self.touched_nodes.add(task.node_name)
        self.touched_jobs.add(task.job)
        node = self.nodes.get(task.node_name)
        if node is not None:
            node.remove_task(task)
            self.table.sync(node.index)
        self._keep_allocated_at_open(self.jobs[task.job])
        self.jobs[task.job].update_task_status(task, TaskStatus.PENDING)
        task.node_name = ""
        if notify:
            for handler in self._handlers:
                handler.on_deallocate(task)
        self._forget_order(task.job)

    def mark_releasing(self, task: TaskInfo, releasing: bool) -> None:
        """Evict (``True``) or un-evict a running task in session state."""
        self.allocation_version += 1
        self.touched_tasks.add(task.uid)
        self.touched_nodes.add(task.node_name)
        self.touched_jobs.add(task.job)
        node = self.nodes[task.node_name]
        node.remove_task(task)
        self._keep_allocated_at_open(self.jobs[task.job])
        self.jobs[task.job].update_task_status(
            task, TaskStatus.RELEASING if releasing else TaskStatus.RUNNING
        )
        node.add_task(task)
        self.table.sync(node.index)
        for handler in self._handlers:
            (handler.on_deallocate if releasing else handler.on_allocate)(task)
        self._forget_order(task.job)

    def dispatch(self, job: JobInfo) -> None:
        """Send every Allocated task of a ready job to the binder (non-transactional path)."""
        tasks = list(job.task_status_index.get(TaskStatus.ALLOCATED, {}).values())
        if tasks:
            self.sink.bind(tasks)
            for task in tasks:
                job.update_task_status(task, TaskStatus.BINDING)

    # -- podgroup conditions --------------------------------------------------------------
    def update_podgroup_condition(self, job: JobInfo, kind: str, *, reason: str, message: str,
                                  now: str) -> None:
        """Set the PodGroup condition ``kind`` (status True), stamped with this session."""
        self.touched_jobs.add(job.uid)
        condition = {"type": kind, "status": "True", "transitionID": self.uid,
                     "lastTransitionTime": now, "reason": reason, "message": message}
        conditions = job.podgroup.conditions
        for i, existing in enumerate(conditions):
            if existing.get("type") == condition["type"]:
                conditions[i] = condition
                return
        conditions.append(condition)

    def allocated_at_open(self, job: JobInfo) -> Resource:
        """``job.allocated`` as it was when the session opened (not a copy: do not change it).

        Plugins that track allocations from open on can copy a job's only when they first
        need it, instead of copying every job's at open."""
        return self._allocated_at_open.get(job.uid, job.allocated)

    def _keep_allocated_at_open(self, job: JobInfo) -> None:
        if job.uid not in self._allocated_at_open:
            self._allocated_at_open[job.uid] = job.allocated.clone()

    def has_device_nodes(self) -> bool:
        """Whether any node carries a device family (whose per-card usage queues count)."""
        if self._device_nodes is None:
            self._device_nodes = any(node.others for node in self.node_list)
        return self._device_nodes

    def allocated_of(self, queue: QueueID) -> Resource:
        total = Resource()
        for job in self.jobs.values():
            if job.queue == queue:
                for task in job.tasks_in(ALLOCATED_STATUS):
                    total.add(task.resreq)
        return total


def _cmp_str(left: str, right: str) -> int:
    return -1 if left < right else (1 if left > right else 0)
