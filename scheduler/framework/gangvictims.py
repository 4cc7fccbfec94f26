"""The plugins' say in gang-aware eviction: Volcano's ``UnifiedEvictableFn``.

gangpreempt and gangreclaim hand the plugins their ranked candidates once per preemptor job
(``Session.UnifiedEvictable``). A plugin answers through :class:`UnifiedEvictable`, as the four
that register such a function in Volcano do (priority, gang, conformance, capacity); the others
abstain. Tiers are walked as
for the legacy ``Preemptable``/``Reclaimable`` hooks (:mod:`scheduler.framework.victims`): the
answers of a tier are intersected, the first tier with victims decides, and an empty
intersection ends the tier (Volcano lets the next plugin of the tier overwrite it). No conf
switch takes a plugin out, as in Volcano.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable

from scheduler.api.job import JobInfo
from scheduler.api.task import TaskInfo
from scheduler.api.types import Vote
from scheduler.framework.session import Session

__all__ = [
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


def unified_evictable(
    session: Session, context: EvictionContext, candidates: list[TaskInfo]
) -> list[TaskInfo]:
    """Volcano's ``Session.UnifiedEvictable``: tiers in order, answers intersected inside a
    tier, the first tier with victims decides. No conf switch gates it, as in Volcano."""
    for tier in session.tiers:
        victims: list[TaskInfo] | None = None
        for entry in tier:
            plugin = entry.plugin
            if not isinstance(plugin, UnifiedEvictable):
                continue
            answer, vote = plugin.unified_evictable(context, candidates)
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
