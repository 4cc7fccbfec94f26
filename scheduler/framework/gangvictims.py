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

import functools
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable

from scheduler.api.job import JobInfo
from scheduler.api.task import TaskInfo
from scheduler.api.types import Vote
from scheduler.framework.session import Session
from scheduler.framework.victims import agreed_victims

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
    """Who evicts: Volcano's ``EvictionContext``."""

    kind: EvictionKind
    job: JobInfo
    task: TaskInfo
    """The preemptor job's first pending task, for the legacy hooks reused below."""
    hypernode: str = ""
    """The domain searched (Volcano's ``EvictionContext.HyperNode``)."""


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
    return agreed_victims(
        [[functools.partial(entry.plugin.unified_evictable, context, candidates)
          for entry in tier if isinstance(entry.plugin, UnifiedEvictable)]
         for tier in session.tiers])
