"""Allocate's placement of a job cut into partitions by ``spec.subGroupPolicy``.

Volcano's ``allocateForJob`` / ``allocateForSubJob`` (``pkg/scheduler/actions/allocate``):

* the job's worksheet holds its partitions that are not ready yet, each with its pending tasks;
  the partitions a policy still needs to reach ``minSubGroups`` come first, the rest in
  sub-job order (gang: unready first; priority: highest task priority first; then the first
  match value and the name);
* for each gradient of HyperNodes the job may use (lowest tier first; the whole cluster when
  the job has no constraint), the job is dry-run in every candidate: partitions are taken in
  turn, each placed (:func:`_place_partition`) inside the candidate, a partition with tasks
  left going back to the worksheet, until the job is ready. A candidate where the job became
  ready or pipelined scores the sum of its partitions' HyperNode scores; the best is replayed;
* a partition is placed the same way one level down: its own gradients (under the job's
  HyperNode, its own limit, its placed tasks and pending requests), a dry run in each
  candidate, and the best-scored HyperNode where it became ready or pipelined replayed.

Readiness of a partition is the plugins' ``sub_job_ready`` (gang: ``subGroupSize`` tasks
placed); without a plugin answering, any placement makes it ready, as in Volcano.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from scheduler.api.job import JobInfo
from scheduler.api.subjob import SubJob
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskStatus, Vote
from scheduler.framework import hooks as h
from scheduler.framework.hypernodes import CLUSTER_TOP
from scheduler.framework.statement import Statement

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = [
    "SubJobGradient",
    "SubJobReady",
    "SubJobScorer",
    "Worksheet",
    "place_partitions",
    "sub_job_pipelined",
    "sub_job_ready",
    "worksheet_of",
]


@runtime_checkable
class SubJobReady(Protocol):
    def sub_job_ready(self, sub: SubJob) -> bool: ...

    def sub_job_pipelined(self, sub: SubJob) -> Vote: ...


@runtime_checkable
class SubJobGradient(Protocol):
    def sub_job_gradients(
        self, job: JobInfo, sub: SubJob, root: str, purpose: str
    ) -> list[list[str]]: ...


@runtime_checkable
class SubJobScorer(Protocol):
    def score_sub_hypernodes(self, sub: SubJob, names: list[str]) -> dict[str, float]: ...


def sub_job_ready(session: Session, sub: SubJob) -> bool:
    """Volcano's ``SubJobReady``: every job-ready plugin that judges partitions agrees."""
    return all(
        p.sub_job_ready(sub)
        for tier in session.hooks(h.JobReady)
        for p in tier
        if isinstance(p, SubJobReady)
    )


def sub_job_pipelined(session: Session, sub: SubJob) -> bool:
    """Volcano's ``SubJobPipelined``: votes by tier, a reject ends it, a permit settles it."""
    return h.tier_vote([functools.partial(p.sub_job_pipelined, sub)
                        for p in tier if isinstance(p, SubJobReady)]
                       for tier in session.hooks(h.JobPipelined))


def _order(session: Session) -> Callable[[SubJob], tuple[int, ...]]:
    """Volcano's ``SubJobOrderFn``: gang and priority in tier order, then the match index."""
    names = [
        getattr(p, "NAME", "")
        for tier in session.hooks(h.JobOrder)
        for p in tier
        if getattr(p, "NAME", "") in ("gang", "priority")
    ]

    def key(sub: SubJob) -> tuple[int, ...]:
        parts = [
            (1 if sub_job_ready(session, sub) else 0) if name == "gang" else -sub.priority
            for name in names
        ]
        return (*parts, sub.match_index)

    return key


@dataclass(slots=True)
class Worksheet:
    """The partitions a job still has to place and, per partition, its tasks in order."""

    queue: list[SubJob] = field(default_factory=list)
    tasks: dict[str, list[TaskInfo]] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)

    def copy(self) -> Worksheet:
        return Worksheet(
            list(self.queue), {k: list(v) for k, v in self.tasks.items()}, set(self.required)
        )

    def pop(self, key: Callable[[SubJob], tuple[int, ...]]) -> SubJob:
        best = min(self.queue, key=lambda s: (s.uid not in self.required, key(s), s.uid))
        self.queue.remove(best)
        return best


def worksheet_of(session: Session, job: JobInfo, candidates: list[TaskInfo]) -> Worksheet:
    """Volcano's ``organizeJobWorksheet`` for the job's schedulable pending ``candidates``."""
    subs = job.sub_jobs()
    key = _order(session)
    ready: dict[str, int] = {}
    waiting: list[SubJob] = []
    for sub in subs.by_uid.values():
        if sub_job_ready(session, sub):
            ready[sub.gid] = ready.get(sub.gid, 0) + 1
        else:
            waiting.append(sub)
    sheet = Worksheet()
    for sub in sorted(waiting, key=lambda s: (key(s), s.uid)):
        if ready.get(sub.gid, 0) < subs.min_sub_groups.get(sub.gid, 0):
            sheet.required.add(sub.uid)
            ready[sub.gid] = ready.get(sub.gid, 0) + 1
    for task in candidates:
        uid = subs.of_task.get(task.uid)
        if uid is not None:
            sheet.tasks.setdefault(uid, []).append(task)
    sheet.queue = [subs.by_uid[uid] for uid in sorted(sheet.tasks)]
    return sheet


Attempt = Callable[[SubJob, list[TaskInfo], str], tuple[Statement | None, list[TaskInfo]]]
"""Place a partition's tasks inside a HyperNode: the statement when it became ready or
pipelined (applied), and the tasks not tried."""

_Ops = list[tuple[TaskStatus, TaskInfo, str]]


def _save(statement: Statement) -> _Ops:
    return [(op.task.status, op.task, op.task.node_name) for op in statement.operations]


def _replay(session: Session, statement: Statement, ops: _Ops) -> None:
    for status, task, node in ops:
        target = session.nodes[node]
        if status is TaskStatus.PIPELINED:
            statement.pipeline(task, target)
        else:
            statement.allocate(task, target)


def _best(session: Session, scores: dict[str, float]) -> str:
    names = list(scores)
    session.rng.shuffle(names)  # Volcano's map order among equal scores
    return max(names, key=lambda n: scores[n])


def _sub_scores(session: Session, sub: SubJob, names: list[str]) -> dict[str, float]:
    total = dict.fromkeys(names, 0.0)
    for tier in session.hooks(h.HyperNodeScorer):
        for plugin in tier:
            if isinstance(plugin, SubJobScorer):
                for name, score in plugin.score_sub_hypernodes(sub, names).items():
                    total[name] += score
    return total


def _sub_gradients(
    session: Session, job: JobInfo, sub: SubJob, root: str, purpose: str = "allocate"
) -> list[list[str]]:
    for tier in session.hooks(h.HyperNodeGradient):
        for plugin in tier:
            if isinstance(plugin, SubJobGradient):
                return plugin.sub_job_gradients(job, sub, root, purpose)
            return [[root]]
    return [[root]]


def sub_job_gradients(
    session: Session, job: JobInfo, sub: SubJob, root: str, purpose: str
) -> list[list[str]]:
    """Volcano's ``HyperNodeGradientForSubJobFn``: the first gradient plugin's answer, else
    ``root`` alone."""
    return _sub_gradients(session, job, sub, root, purpose)


def default_sub_job_candidates(session: Session, job: JobInfo, root: str) -> list[str]:
    """For a job whose constraint is on the PodGroup alone: the HyperNodes under ``root`` (the
    job's candidate) its default sub-job may go to, as Volcano's ``allocateForSubJob`` asks
    ``HyperNodeGradientForSubJobFn`` with ``SubJobInfo.GetMinResources`` (every pending task's
    request, not only ``minMember``'s): lowest tier first, each tier best score first. Empty
    when no HyperNode there holds all the job's pending tasks by its idle or future idle."""
    sub = job.sub_jobs().by_uid.get(str(job.uid))
    if sub is None:
        return [root]
    ordered: list[str] = []
    for gradient in _sub_gradients(session, job, sub, root):
        scores = _sub_scores(session, sub, gradient)
        names = list(gradient)
        session.rng.shuffle(names)  # Volcano's map order among equal scores
        ordered.extend(sorted(names, key=lambda n: -scores[n]))
    return ordered


def _place_partition(
    session: Session,
    job: JobInfo,
    sub: SubJob,
    *,
    tasks: list[TaskInfo],
    within: str,
    attempt: Attempt,
) -> tuple[Statement | None, float, list[TaskInfo]]:
    """Volcano's ``allocateForSubJob``: (statement, its HyperNode's score, tasks left)."""
    view = session.hypernodes
    for gradient in _sub_gradients(session, job, sub, within):
        tried: dict[str, tuple[_Ops, list[TaskInfo]]] = {}
        for name in gradient:
            for uid in sub.tasks:  # each HyperNode is judged afresh (ResetSubJobFitErr)
                job.nodes_fit_errors.pop(uid, None)
                job.unfit_tasks.discard(uid)
            statement, left = attempt(sub, tasks, name)
            if statement is not None and len(statement):
                tried[name] = (_save(statement), left)
                statement.discard()
        if not tried:
            continue
        scores = _sub_scores(session, sub, list(tried))
        best = _best(session, scores)
        statement = Statement(session)
        _replay(session, statement, tried[best][0])
        before = view.sub_allocated(sub.uid, list(sub.tasks.values()))
        view.set_sub_allocated(sub.uid, view.lca(before, best))
        return statement, scores[best], tried[best][1]
    return None, 0.0, tasks


@dataclass(slots=True)
class _Solution:
    score: float
    ops: _Ops
    sheet: Worksheet


def place_partitions(
    session: Session, job: JobInfo, *, sheet: Worksheet, attempt: Attempt
) -> tuple[Statement | None, Worksheet]:
    """Volcano's ``allocateForJob`` for a job with partitions: the statement of the best
    HyperNode of the lowest gradient that holds the job (None when none does) and the
    worksheet left after it."""
    view = session.hypernodes
    key = _order(session)
    for gradient in session.hypernode_gradients(job, CLUSTER_TOP, "allocate"):
        solutions: dict[str, _Solution] = {}
        for name in gradient:
            job.nodes_fit_errors.clear()  # ResetFitErr
            job.unfit_tasks.clear()
            copy = sheet.copy()
            saved = {sub.uid: view.sub_allocated(sub.uid, list(sub.tasks.values()))
                     for sub in copy.queue}
            statements: list[Statement] = []
            score = 0.0
            while copy.queue:
                sub = copy.pop(key)
                statement, gained, left = _place_partition(
                    session, job, sub, tasks=copy.tasks[sub.uid], within=name, attempt=attempt
                )
                if statement is not None and len(statement):
                    statements.append(statement)
                    score += gained
                    copy.tasks[sub.uid] = left
                    if left:
                        copy.queue.append(sub)
                    if session.job_ready(job):
                        break
            for uid, allocated in saved.items():
                view.set_sub_allocated(uid, allocated)
            view.trying.pop(job.uid, None)
            if not statements:
                continue
            if session.job_ready(job) or session.job_pipelined(job):
                ops = [op for statement in statements for op in _save(statement)]
                solutions[name] = _Solution(score, ops, copy)
            for statement in reversed(statements):
                statement.discard()
        if not solutions:
            continue
        best = _best(session, {name: s.score for name, s in solutions.items()})
        final = Statement(session)
        _replay(session, final, solutions[best].ops)
        view.set_allocated(job, view.lca(view.allocated(job), best))
        for sub in job.sub_jobs().by_uid.values():
            view.set_sub_allocated(sub.uid, None)  # read again from the tasks just placed
        return final, solutions[best].sheet
    return None, sheet
