"""Incremental snapshots: the session-facing copies of nodes and tasks, kept between cycles.

A session must never change what the cache owns, so it works on copies. Copying every node
and task each cycle makes a cycle's cost grow with the cluster; instead the cache keeps the
copies it handed out last time and renews only those that may differ from a fresh copy:

* objects the cache changed since (its event handlers and write side mark them dirty through
  :meth:`SnapshotPool.mark_task` / :meth:`SnapshotPool.mark_node`), and
* objects the last session changed (the session records every node and task it touches in
  ``Snapshot.touched_nodes`` / ``Snapshot.touched_tasks``; placement, eviction and their undo
  are its only mutation path).

Everything else is handed out again as it was, which is exactly what a fresh copy would be.
The last session's node table travels with the snapshot, so the next table copies its columns
and recomputes only the rows of renewed nodes. A job is rebuilt only when one of its tasks was
renewed; otherwise its task index and counters are kept and only what a cycle writes onto a
job (fit errors, messages, the PodGroup copy and what derives from it) is set afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, TaskID
from scheduler.cache.jobs import JobChanges
from scheduler.framework.settled import SettledStore
from scheduler.framework.snapshot import Snapshot

__all__ = ["PoolRefresh", "SnapshotPool"]


@dataclass(slots=True)
class PoolRefresh:
    """What :meth:`SnapshotPool.refresh` hands the cache for one snapshot."""

    tasks: dict[TaskID, TaskInfo]
    nodes: list[NodeInfo]
    renewed_nodes: frozenset[str]
    """Nodes copied afresh this time (their table rows must be recomputed)."""
    jobs: dict[JobID, JobInfo]
    """Jobs of the last snapshot; those not in ``renewed_jobs`` are reusable as they are."""
    renewed_jobs: set[JobID] = field(default_factory=set)
    """Jobs one of whose tasks or whose PodGroup changed since the last snapshot."""
    entered: set[JobID] = field(default_factory=set)
    left: set[JobID] = field(default_factory=set)
    """Jobs that became settled / stopped being settled since the last snapshot."""
    reset: bool = False
    """The settled set was emptied wholesale (kept sums must start afresh)."""


@dataclass(slots=True)
class SnapshotPool:
    tasks: dict[TaskID, TaskInfo] = field(default_factory=dict)
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    dirty_tasks: set[TaskID] = field(default_factory=set)
    dirty_nodes: set[str] = field(default_factory=set)
    jobs: dict[JobID, JobInfo] = field(default_factory=dict)
    dirty_jobs: set[JobID] = field(default_factory=set)
    last: Snapshot | None = None
    """The snapshot handed out last; its session's touches are collected at the next one."""
    complete: bool = False
    """Whether ``tasks`` and ``nodes`` mirror the cache (False: copy everything next time)."""
    steady: set[JobID] = field(default_factory=set)
    """Jobs settled for the snapshot last handed out: steady at the close before it and not
    renewed since (see :mod:`scheduler.framework.settled`). Moved by what changed only; a
    session reads it and it changes only when the next snapshot is taken."""
    active: set[JobID] = field(default_factory=set)
    """The last snapshot's jobs that are not settled (kept by ``cache.jobs``)."""
    _reset: bool = False
    settle: bool = True
    """False: no job is ever settled, every cycle visits every job (as Volcano does)."""
    sums: SettledStore = field(default_factory=SettledStore)
    """Per-queue sums over settled jobs, kept across cycles for plugins' open hooks."""
    job_changes: JobChanges = field(default_factory=JobChanges)
    """PodGroups added and deleted since the last snapshot (for assembling its jobs)."""

    def unsettle_all(self) -> None:
        """Rebuild every job at the next snapshot, which leaves none settled (a queue or a
        priority class changed, which any job may read)."""
        self.jobs = {}
        self.job_changes.walk = True
        self._unsettle()

    def _unsettle(self) -> None:
        """Empty the settled set wholesale; the next jobs are assembled by a full walk."""
        self.steady = set()
        self._reset = True
        self.job_changes.walk = True

    def mark_task(self, uid: TaskID, node_name: str = "", job: JobID | None = None) -> None:
        self.dirty_tasks.add(uid)
        if node_name:
            self.dirty_nodes.add(node_name)
        if job is not None:
            self.dirty_jobs.add(job)

    def mark_node(self, name: str) -> None:
        self.dirty_nodes.add(name)

    def invalidate(self) -> None:
        """Copy everything at the next snapshot."""
        self.complete = False
        self.job_changes.walk = True
        self._unsettle()

    def refresh(
        self, tasks: Mapping[TaskID, TaskInfo], nodes: Mapping[str, NodeInfo]
    ) -> PoolRefresh:
        """Bring the copies in step with the cache's ``tasks`` and ``nodes`` (under its lock)."""
        last, self.last = self.last, None
        if last is not None:
            self.dirty_tasks |= last.touched_tasks
            self.dirty_nodes |= last.touched_nodes
        if last is None or last.closed_jobs is None or not self.settle:
            self._unsettle()  # no close to go by: settle afresh from the next one
        if not self.complete:
            self.tasks = {uid: task.clone() for uid, task in tasks.items()}
            self.nodes = {name: node.clone(self.tasks) for name, node in nodes.items()}
            self.jobs = {}
            renewed = frozenset(self.nodes)
            self.complete = True
        else:
            renewed = self._renew(tasks, nodes)
        renewed_jobs, entered, left = self.dirty_jobs, set(), set()
        steady = self.steady
        if last is not None and last.closed_jobs is not None and not self._reset:
            # Settled: steady at the last close and not renewed since. Only the jobs that
            # close visited or that changed can move in or out.
            for uid in last.closed_jobs:
                if uid in last.steady_closed:
                    if uid not in steady:
                        steady.add(uid)
                        entered.add(uid)
                elif uid in steady:
                    steady.discard(uid)
                    left.add(uid)
        for uid in renewed_jobs:
            if uid in steady:
                steady.discard(uid)
                if uid in entered:
                    entered.discard(uid)
                else:
                    left.add(uid)
        reset, self._reset = self._reset, False
        self.dirty_tasks = set()
        self.dirty_nodes = set()
        self.dirty_jobs = set()
        # The cache's order, so an incremental snapshot lists nodes as a full copy would.
        node_list = [self.nodes[name] for name in nodes]
        return PoolRefresh(tasks=self.tasks, nodes=node_list, renewed_nodes=renewed,
                           jobs=self.jobs, renewed_jobs=renewed_jobs, entered=entered,
                           left=left, reset=reset)

    def _renew(
        self, tasks: Mapping[TaskID, TaskInfo], nodes: Mapping[str, NodeInfo]
    ) -> frozenset[str]:
        dirty_nodes, dirty_jobs = self.dirty_nodes, self.dirty_jobs
        for uid in self.dirty_tasks:
            old = self.tasks.pop(uid, None)
            if old is not None:
                dirty_jobs.add(old.job)
                if old.node_name:
                    dirty_nodes.add(old.node_name)  # it may still list the old copy
            current = tasks.get(uid)
            if current is not None:
                self.tasks[uid] = current.clone()
                dirty_jobs.add(current.job)
                if current.node_name:
                    dirty_nodes.add(current.node_name)
        renewed: set[str] = set()
        for name in dirty_nodes:
            node = nodes.get(name)
            if node is None:
                self.nodes.pop(name, None)
                continue
            self.nodes[name] = node.clone(self.tasks)
            renewed.add(name)
        return frozenset(renewed)
