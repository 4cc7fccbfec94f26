"""Settled jobs: what a cycle may skip because its outcome is already known.

Most jobs of a busy cluster are placed (bound, running or done) and stay so cycle after
cycle; Volcano visits each of them in every session (plugin open hooks, the job updater at
close), so a cycle costs O(jobs) however little changed. A job is *settled* for a session when

* its last close found it valid and scheduled (PodGroup ``Running`` or ``Completed``, or
  ``Inqueue`` with binds in flight: placed, waiting only for the cluster to show it), with no
  task waiting for a place (none Pending, Allocated or Pipelined, so none gets a condition), no
  ``Unschedulable`` condition, and no fit error or message left on it, so that closing it
  again would derive the same phase (hence no event) and the same status,
* and nothing about it changed since: none of its tasks was renewed in the snapshot (a watch
  event, a bind, an eviction, the last session's own changes), its PodGroup had no event, no
  write of its status was lost, and no queue or priority class changed (those reset the set).

For such a job the session's close would derive exactly what it wrote last time, so close and
gang's close skip it, ``job_valid`` keeps its last verdict (valid), and actions that only look
at jobs with pending tasks or pending PodGroups (enqueue, allocate, backfill) never see it. It
stays in ``Session.jobs`` for everything else (victims of preempt and reclaim, plugins that
sum over all jobs). A session that does change a settled job (an eviction, a condition) makes
its close visit that job as usual.

What the open hooks add up over all jobs comes from :class:`SettledStore`: per-queue sums of a
per-job contribution over the settled jobs, kept between cycles and moved only by the jobs
that entered or left the settled set. A contribution is kept only when all its values are
integral, where float sums are exact in any order, so the kept totals equal a fresh sum bit
for bit; a job with any other contribution is handed back to the caller to add itself.
(One visible difference with visiting every job: gang stamps its ``Scheduled`` condition with
the session's ``transitionID`` and time; a settled job keeps the stamp of the cycle that last
changed it, which is when the condition last transitioned.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from scheduler.api.job import JobInfo
from scheduler.api.resource import Resource
from scheduler.api.types import JobID, QueueID

__all__ = ["Contribution", "Flat", "QueueSums", "SettledStore", "SettledSums", "flatten"]

Contribution = Callable[[JobInfo], "Sequence[Resource] | None"]
"""A job's part of each sum (same length for every job), or None to leave the job to the
caller. It must depend only on the job (settled jobs do not change between cycles)."""


Flat = tuple[float, float, tuple[tuple[str, float], ...]]
"""A copy of one Resource: milli-CPU, memory and the scalars (kept apart from the job's own
objects, which a later session may change)."""


def flatten(parts: Sequence[Resource]) -> tuple[Flat, ...] | None:
    """The parts as plain numbers, or None when a value is not integral."""
    out = []
    for r in parts:
        cpu, memory = r.milli_cpu, r.memory
        if cpu % 1 or memory % 1:
            return None
        scalars = tuple(r.scalars.items()) if r.scalars else ()
        for _, value in scalars:
            if value % 1:
                return None
        out.append((cpu, memory, scalars))
    return tuple(out)


@dataclass(slots=True)
class QueueSums:
    """One queue's sums, with how many kept contributions name each scalar (a fresh sum names
    a scalar only while some addend does)."""

    cpu: list[float]
    memory: list[float]
    scalars: list[dict[str, float]]
    names: list[dict[str, int]]

    @classmethod
    def empty(cls, width: int) -> QueueSums:
        return cls(cpu=[0.0] * width, memory=[0.0] * width,
                   scalars=[{} for _ in range(width)], names=[{} for _ in range(width)])

    def change(self, parts: tuple[Flat, ...], sign: int) -> None:
        for i, (cpu, memory, scalars) in enumerate(parts):
            self.cpu[i] += sign * cpu
            self.memory[i] += sign * memory
            if not scalars:
                continue
            totals, names = self.scalars[i], self.names[i]
            for name, value in scalars:
                left = names.get(name, 0) + sign
                if left:
                    names[name] = left
                    totals[name] = totals.get(name, 0.0) + sign * value
                else:
                    names.pop(name, None)
                    totals.pop(name, None)

    def copy(self) -> QueueSums:
        return QueueSums(cpu=list(self.cpu), memory=list(self.memory),
                         scalars=[dict(d) for d in self.scalars],
                         names=[dict(d) for d in self.names])

    def resources(self) -> list[Resource]:
        return [Resource(cpu, memory, dict(scalars))
                for cpu, memory, scalars in zip(self.cpu, self.memory, self.scalars,
                                                strict=True)]


@dataclass(slots=True)
class SettledSums:
    """Per-queue sums of one contribution over the settled jobs."""

    width: int
    parts: dict[JobID, tuple[QueueID, tuple[Flat, ...]]] = field(default_factory=dict)
    loose: set[JobID] = field(default_factory=set)
    """Settled jobs whose contribution is not kept (None or not integral)."""
    queues: dict[QueueID, QueueSums] = field(default_factory=dict)
    generation: int = -1

    def update(self, *, entered: Iterable[JobID], left: Iterable[JobID],
               jobs: Mapping[JobID, JobInfo], contribution: Contribution) -> None:
        for uid in left:
            self.loose.discard(uid)
            entry = self.parts.pop(uid, None)
            if entry is not None:
                self.queues[entry[0]].change(entry[1], -1)
        queues = self.queues
        for uid in entered:
            job = jobs[uid]
            parts = contribution(job)
            flat = None if parts is None else flatten(parts)
            if flat is None:
                self.loose.add(uid)
                continue
            sums = queues.get(job.queue)
            if sums is None:
                sums = queues[job.queue] = QueueSums.empty(self.width)
            sums.change(flat, +1)
            self.parts[uid] = (job.queue, flat)


@dataclass(slots=True)
class SettledStore:
    """The sums kept across cycles, by name (one per plugin use); owned by the cache, which
    calls :meth:`advance` with each snapshot's settled jobs."""

    sums: dict[str, SettledSums] = field(default_factory=dict)
    generation: int = 0
    settled: AbstractSet[JobID] = frozenset()
    entered: AbstractSet[JobID] = frozenset()
    left: AbstractSet[JobID] = frozenset()

    def advance(self, settled: AbstractSet[JobID], *, entered: AbstractSet[JobID],
                left: AbstractSet[JobID], reset: bool = False) -> None:
        """A new snapshot settles ``settled``, which ``entered`` joined and ``left`` left
        since the last one (``reset``: the set was emptied wholesale, start every sum
        afresh)."""
        self.generation += 1
        if reset:
            self.sums = {}
        self.entered, self.left, self.settled = entered, left, settled

    def totals(
        self,
        name: str,
        *,
        jobs: Mapping[JobID, JobInfo],
        contribution: Contribution,
        width: int,
        exclude: Iterable[JobID] = (),
    ) -> tuple[dict[QueueID, list[Resource]], set[JobID]]:
        """``(queue → copies of the sums, settled jobs the caller must add itself)``; the
        jobs in ``exclude`` (settled jobs a session changed) are taken out of the copies and
        left to the caller too."""
        kept = self.sums.get(name)
        if kept is not None and kept.width == width and kept.generation == self.generation - 1:
            kept.update(entered=self.entered, left=self.left, jobs=jobs,
                        contribution=contribution)
        elif kept is None or kept.width != width or kept.generation != self.generation:
            # Not brought up to date at the previous snapshot: a job may have left and
            # entered the settled set since with another contribution, so start afresh.
            kept = self.sums[name] = SettledSums(width=width)
            kept.update(entered=self.settled, left=(), jobs=jobs, contribution=contribution)
        kept.generation = self.generation
        queues = kept.queues
        left = set(kept.loose)
        for uid in exclude:
            entry = kept.parts.get(uid)
            if entry is not None:
                if queues is kept.queues:
                    queues = dict(queues)
                if queues[entry[0]] is kept.queues[entry[0]]:
                    queues[entry[0]] = queues[entry[0]].copy()
                queues[entry[0]].change(entry[1], -1)
            left.add(uid)
        return {uid: q.resources() for uid, q in queues.items()}, left
