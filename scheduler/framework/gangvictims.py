"""The plugins' say in gang-aware eviction: Volcano's ``UnifiedEvictableFn``.

gangpreempt and gangreclaim hand the plugins their ranked candidates once per preemptor job
(``Session.UnifiedEvictable``). A plugin answers through :class:`UnifiedEvictable`; the four
plugins that register such a function in Volcano (priority, gang, conformance, capacity) are
answered here from their state when they do not implement it themselves. Tiers are walked as
for the legacy ``Preemptable``/``Reclaimable`` hooks (:mod:`scheduler.framework.victims`): the
answers of a tier are intersected, the first tier with victims decides, and an empty
intersection ends the tier (Volcano lets the next plugin of the tier overwrite it). No conf
switch takes a plugin out, as in Volcano.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from scheduler.api.job import JobInfo
from scheduler.api.resource import Resource
from scheduler.api.resource_dims import intersects, over_on_declared
from scheduler.api.task import TaskInfo
from scheduler.api.types import Vote
from scheduler.framework.session import Session

__all__ = [
    "BUILTIN_ANSWERS",
    "EvictionContext",
    "EvictionKind",
    "UnifiedEvictable",
    "unified_evictable",
]


class EvictionKind(Enum):
    GANG_PREEMPT = "gangpreempt"
    GANG_RECLAIM = "gangreclaim"


@dataclass(frozen=True, slots=True)
class EvictionContext:
    """Who evicts: Volcano's ``EvictionContext`` (the domain is always the whole cluster)."""

    kind: EvictionKind
    job: JobInfo
    task: TaskInfo
    """The preemptor job's first pending task, for the legacy hooks reused below."""


@runtime_checkable
class UnifiedEvictable(Protocol):
    """Volcano's ``UnifiedEvictableFn``: which ``candidates`` gang eviction may take."""

    def unified_evictable(
        self, context: EvictionContext, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]: ...


Answer = tuple[list[TaskInfo], Vote]


def _permit_all(plugin: Any, session: Session, ctx: EvictionContext,
                candidates: list[TaskInfo]) -> Answer:
    return list(candidates), Vote.PERMIT


def _priority(plugin: Any, session: Session, ctx: EvictionContext,
              candidates: list[TaskInfo]) -> Answer:
    # Reclaim is about queue shares: priority lets every candidate through.
    if ctx.kind is EvictionKind.GANG_RECLAIM:
        return list(candidates), Vote.PERMIT
    jobs = session.jobs
    return [t for t in candidates
            if (job := jobs.get(t.job)) is not None and job.priority < ctx.job.priority
            ], Vote.PERMIT


def _conformance(plugin: Any, session: Session, ctx: EvictionContext,
                 candidates: list[TaskInfo]) -> Answer:
    # Its legacy answer does not depend on the evictor: critical and kube-system pods stay.
    answer: Answer = plugin.preemptable(ctx.task, candidates)
    return answer


def _capacity(plugin: Any, session: Session, ctx: EvictionContext,
              candidates: list[TaskInfo]) -> Answer:
    if ctx.kind is EvictionKind.GANG_PREEMPT:
        return list(candidates), Vote.PERMIT
    if not getattr(plugin, "ready", True):
        return [], Vote.REJECT
    attrs = plugin.attrs
    allocations: dict[str, Resource] = {}
    victims: list[TaskInfo] = []
    for task in candidates:
        job = session.jobs.get(task.job)
        attr = attrs.get(job.queue) if job is not None else None
        if attr is None:
            continue
        allocated = allocations.setdefault(attr.uid, attr.allocated.clone())
        if not attr.guarantee.less_equal(allocated - task.resreq):
            continue  # the queue would drop below its guarantee
        if (not intersects(task.resreq, attr.deserved)
                or over_on_declared(allocated, attr.deserved, task.resreq)):
            allocated.sub(task.resreq)
            victims.append(task)
    return victims, Vote.PERMIT


BUILTIN_ANSWERS: dict[str, Callable[[Any, Session, EvictionContext, list[TaskInfo]], Answer]] = {
    "priority": _priority,
    "gang": _permit_all,
    "conformance": _conformance,
    "capacity": _capacity,
}
"""Volcano's ``AddUnifiedEvictableFn`` registrations (priority, gang, conformance, capacity),
answered from the plugins' state for plugins that do not implement :class:`UnifiedEvictable`.
gang permits every candidate: the bundles already guard ``minAvailable``."""


def unified_evictable(
    session: Session, context: EvictionContext, candidates: list[TaskInfo]
) -> list[TaskInfo]:
    """Volcano's ``Session.UnifiedEvictable``: tiers in order, answers intersected inside a
    tier, the first tier with victims decides. No conf switch gates it, as in Volcano."""
    for tier in session.tiers:
        victims: list[TaskInfo] | None = None
        for entry in tier:
            plugin = entry.plugin
            if isinstance(plugin, UnifiedEvictable):
                answer, vote = plugin.unified_evictable(context, candidates)
            else:
                builtin = BUILTIN_ANSWERS.get(getattr(plugin, "NAME", ""))
                if builtin is None:
                    continue
                answer, vote = builtin(plugin, session, context, candidates)
            if vote == Vote.ABSTAIN:
                continue
            if not answer:
                victims = None
                break
            if victims is None:
                victims = list(answer)
                continue
            allowed = {t.uid for t in answer}
            victims = [t for t in victims if t.uid in allowed]
            if not victims:
                victims = None
                break
        if victims is not None:
            return victims
    return []
