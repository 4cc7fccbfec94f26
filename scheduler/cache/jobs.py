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
from typing import TYPE_CHECKING

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PodGroup
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, QueueID, TaskID

if TYPE_CHECKING:
    from scheduler.cache.cache import SchedulerCache

__all__ = ["JobChanges", "assemble_jobs"]


@dataclass(slots=True)
class JobChanges:
    """PodGroups added and deleted since the last snapshot, kept by the cache's handlers."""

    added: dict[JobID, None] = field(default_factory=dict)
    """In the order the cache received them (a re-added PodGroup moves to the end)."""
    deleted: set[JobID] = field(default_factory=set)
    walk: bool = True
    """The next snapshot must walk every PodGroup (no usable last snapshot)."""

    def podgroup(self, uid: JobID, *, deleted: bool, known: bool) -> None:
        if deleted:
            self.added.pop(uid, None)
            self.deleted.add(uid)
        elif not known:
            self.added.pop(uid, None)
            self.added[uid] = None

    def reset(self) -> None:
        self.added = {}
        self.deleted = set()
        self.walk = False


def assemble_jobs(
    cache: SchedulerCache,
    clones: Mapping[TaskID, TaskInfo],
    *,
    reuse: Mapping[JobID, JobInfo] | None,
    settled: frozenset[JobID],
    previous: Mapping[JobID, JobInfo] | None,
) -> dict[JobID, JobInfo]:
    """The snapshot's jobs (see the module docstring); sets ``cache.orphans``."""
    changes = cache.pool.job_changes
    fresh: list[JobInfo] = []
    if reuse is None:  # a full copy: the changes stay for the next incremental snapshot
        jobs = _walk(cache, reuse=None, settled=frozenset(), fresh=fresh)
    elif previous is not None and not changes.walk and not cache.orphans:
        jobs = _from_previous(cache, previous, reuse=reuse, settled=settled, fresh=fresh)
        changes.reset()
    else:
        jobs = _walk(cache, reuse=reuse, settled=settled, fresh=fresh)
        changes.reset()
    if reuse is None:
        for task_uid in cache.tasks:
            task = clones[task_uid]
            job = jobs.get(task.job)
            if job is not None:
                job.add_task(task)
    else:
        for job in fresh:
            for task_uid in cache.tasks_by_job.get(job.uid, ()):
                job.add_task(clones[task_uid])
    return jobs


def _walk(cache: SchedulerCache, *, reuse: Mapping[JobID, JobInfo] | None,
          settled: frozenset[JobID], fresh: list[JobInfo]) -> dict[JobID, JobInfo]:
    jobs: dict[JobID, JobInfo] = {}
    cache.orphans = []
    for uid, podgroup in cache.podgroups.items():
        if reuse is not None and uid in settled:
            jobs[uid] = reuse[uid]
            continue
        job = _job(cache, uid, podgroup, reuse, fresh)
        if job is not None:
            jobs[uid] = job
    return jobs


def _from_previous(cache: SchedulerCache, previous: Mapping[JobID, JobInfo], *,
                   reuse: Mapping[JobID, JobInfo], settled: frozenset[JobID],
                   fresh: list[JobInfo]) -> dict[JobID, JobInfo]:
    changes = cache.pool.job_changes
    jobs = dict(previous)
    for uid in changes.deleted:
        jobs.pop(uid, None)
    for uid in changes.added:
        jobs.pop(uid, None)  # appended below, in the cache's order
    cache.orphans = []
    for uid in jobs.keys() - settled:
        job = _job(cache, uid, cache.podgroups[uid], reuse, fresh)
        if job is None:
            del jobs[uid]
        else:
            jobs[uid] = job  # an existing key keeps its place
    for uid in changes.added:
        podgroup = cache.podgroups.get(uid)
        if podgroup is not None:
            job = _job(cache, uid, podgroup, reuse, fresh)
            if job is not None:
                jobs[uid] = job
    return jobs


def _job(cache: SchedulerCache, uid: JobID, podgroup: PodGroup,
         reuse: Mapping[JobID, JobInfo] | None, fresh: list[JobInfo]) -> JobInfo | None:
    """The job of ``podgroup`` for this snapshot, or None (and an orphan) without its queue."""
    if QueueID(podgroup.queue) not in cache.queues:
        cache.orphans.append(uid)
        return None
    job = None if reuse is None else reuse.get(uid)
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
    job.preemptable = str(podgroup.annotations.get("volcano.sh/preemptable")).lower() == "true"
    return job
