"""The jobs of a snapshot: one per PodGroup whose queue exists, in the cache's PodGroup order.

A job is built from a fresh copy of its PodGroup and the task copies of the snapshot. Between
snapshots most jobs do not change, so the cache hands out again:

* a job none of whose tasks changed keeps its task index and counters (``reuse``); only what
  a cycle writes onto a job and what derives from its PodGroup are set afresh;
* a settled job (:mod:`scheduler.framework.settled`) is handed out exactly as it was.

When the last snapshot's jobs are a valid starting point (no PodGroup orphaned by a missing
queue in it, no queue deleted or priority class changed since), the new dict starts as a
copy of the last one, drops deleted PodGroups, renews every job that is not settled in place
and appends new PodGroups in the order the cache received them, which is the cache's order:
the cost follows what changed, not the number of jobs. Otherwise every PodGroup is walked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PodGroup
from scheduler.api.task import TaskInfo, preemptable_flag
from scheduler.api.types import JobID, QueueID, TaskID

__all__ = ["JobChanges", "JobPool", "JobSource", "JobsRefresh", "assemble_jobs"]


@dataclass(slots=True)
class JobChanges:
    """PodGroups added and deleted since the last snapshot, kept by the cache's handlers."""

    added: dict[JobID, None] = field(default_factory=dict)
    """In the order the cache received them (a re-added PodGroup moves to the end)."""
    deleted: set[JobID] = field(default_factory=set)
    walk: bool = True
    """The next snapshot must walk every PodGroup (no usable last snapshot)."""
    seq: dict[JobID, int] = field(default_factory=dict)
    """PodGroup → its place in the cache's order (the order jobs are listed in)."""
    _next: int = 0

    def podgroup(self, uid: JobID, *, deleted: bool, known: bool) -> None:
        if deleted:
            self.added.pop(uid, None)
            self.deleted.add(uid)
            self.seq.pop(uid, None)
        elif not known:
            self.added.pop(uid, None)
            self.added[uid] = None
            self.seq[uid] = self._next
            self._next += 1

    def reset(self) -> None:
        self.added = {}
        self.deleted = set()
        self.walk = False


class JobPool(Protocol):
    """What the jobs read and keep of the cache's snapshot pool
    (:class:`~scheduler.cache.snapshot.SnapshotPool`)."""

    active: set[JobID]

    @property
    def job_changes(self) -> JobChanges: ...

    @property
    def steady(self) -> set[JobID]: ...


class JobSource(Protocol):
    """What the jobs read of the cache (:class:`~scheduler.cache.cache.SchedulerCache`)."""

    orphans: list[JobID]

    @property
    def pool(self) -> JobPool: ...

    @property
    def tasks(self) -> Mapping[TaskID, TaskInfo]: ...

    @property
    def tasks_by_job(self) -> Mapping[JobID, Any]: ...

    @property
    def podgroups(self) -> Mapping[JobID, PodGroup]: ...

    @property
    def queues(self) -> Mapping[QueueID, Any]: ...

    def job_priority(self, podgroup: PodGroup) -> int: ...


class JobsRefresh(Protocol):
    """What the jobs read of one snapshot's refresh
    (:class:`~scheduler.cache.snapshot.PoolRefresh`)."""

    @property
    def jobs(self) -> dict[JobID, JobInfo]: ...

    @property
    def renewed_jobs(self) -> set[JobID]: ...

    @property
    def entered(self) -> set[JobID]: ...

    @property
    def left(self) -> set[JobID]: ...


def assemble_jobs(
    cache: JobSource,
    clones: Mapping[TaskID, TaskInfo],
    *,
    refreshed: JobsRefresh | None,
    previous: dict[JobID, JobInfo] | None,
) -> tuple[dict[JobID, JobInfo], list[JobID] | None]:
    """The snapshot's jobs (see the module docstring) and the ones not settled, in order
    (None: all of them); sets ``cache.orphans``. Without ``refreshed``, a full copy."""
    pool = cache.pool
    changes = pool.job_changes
    fresh: list[JobInfo] = []
    if refreshed is None:  # a full copy: the changes stay for the next incremental snapshot
        jobs = _walk(cache, refreshed=None, fresh=fresh)
        active = None
    else:
        if previous is not None and not changes.walk and not cache.orphans:
            jobs = _from_previous(cache, previous, refreshed=refreshed, fresh=fresh)
        else:
            jobs = _walk(cache, refreshed=refreshed, fresh=fresh)
            pool.active = {uid for uid in jobs if uid not in pool.steady}
        changes.reset()
        seq = changes.seq
        active = sorted(pool.active, key=seq.__getitem__) if pool.steady else None
    if refreshed is None:
        for task_uid in cache.tasks:
            task = clones[task_uid]
            job = jobs.get(task.job)
            if job is not None:
                job.add_task(task)
    else:
        for job in fresh:
            for task_uid in cache.tasks_by_job.get(job.uid, ()):
                job.add_task(clones[task_uid])
    return jobs, active


def _walk(cache: JobSource, *, refreshed: JobsRefresh | None,
          fresh: list[JobInfo]) -> dict[JobID, JobInfo]:
    jobs: dict[JobID, JobInfo] = {}
    cache.orphans = []
    settled = cache.pool.steady if refreshed is not None else frozenset()
    for uid, podgroup in cache.podgroups.items():
        if refreshed is not None and uid in settled:
            jobs[uid] = refreshed.jobs[uid]
            continue
        job = _job(cache, uid, podgroup, refreshed, fresh)
        if job is not None:
            jobs[uid] = job
    return jobs


def _from_previous(cache: JobSource, previous: dict[JobID, JobInfo], *,
                   refreshed: JobsRefresh, fresh: list[JobInfo]) -> dict[JobID, JobInfo]:
    """The last snapshot's dict, changed in place (its session is over): deleted PodGroups
    out, every job that is not settled renewed where it stands, new PodGroups appended."""
    changes = cache.pool.job_changes
    active = cache.pool.active
    jobs = previous
    for uid in changes.deleted:
        jobs.pop(uid, None)
        active.discard(uid)
    for uid in changes.added:
        jobs.pop(uid, None)  # appended below, in the cache's order
        active.discard(uid)
    active.difference_update(refreshed.entered)
    active.update(uid for uid in refreshed.left if uid in jobs)
    cache.orphans = []
    for uid in list(active):
        job = _job(cache, uid, cache.podgroups[uid], refreshed, fresh)
        if job is None:
            del jobs[uid]
            active.discard(uid)
        else:
            jobs[uid] = job  # an existing key keeps its place
    for uid in changes.added:
        podgroup = cache.podgroups.get(uid)
        if podgroup is not None:
            job = _job(cache, uid, podgroup, refreshed, fresh)
            if job is not None:
                jobs[uid] = job
                active.add(uid)
    return jobs


def _job(cache: JobSource, uid: JobID, podgroup: PodGroup,
         refreshed: JobsRefresh | None, fresh: list[JobInfo]) -> JobInfo | None:
    """The job of ``podgroup`` for this snapshot, or None (and an orphan) without its queue."""
    if QueueID(podgroup.queue) not in cache.queues:
        cache.orphans.append(uid)
        return None
    job = None
    if refreshed is not None and uid not in refreshed.renewed_jobs:
        job = refreshed.jobs.get(uid)
    if job is None:
        job = JobInfo(uid=uid, name=podgroup.name, namespace=podgroup.namespace,
                      podgroup=podgroup, queue=QueueID(podgroup.queue))
        fresh.append(job)
    else:
        # What a cycle writes onto a job starts empty again (most jobs' already is).
        if job.nodes_fit_errors:
            job.nodes_fit_errors = {}
        if job.unfit_tasks:
            job.unfit_tasks = set()
        job.job_fit_error = ""
        job.enqueue_message = ""
    job.podgroup = podgroup.clone()
    job.queue = QueueID(podgroup.queue)
    job.priority = cache.job_priority(podgroup)
    job.min_available = podgroup.min_member
    job.preemptable = preemptable_flag(podgroup.annotations, podgroup.labels, False)
    return job
