"""Actions, one per module, in an explicit registry keyed by the conf's action names."""

from __future__ import annotations

from typing import Protocol

from actions.allocate import Allocate
from actions.backfill import Backfill
from actions.enqueue import Enqueue
from actions.gangpreempt import GangPreempt
from actions.gangreclaim import GangReclaim
from actions.preempt import Preempt
from actions.reclaim import Reclaim
from actions.shuffle import Shuffle
from scheduler.framework.session import Session

__all__ = ["ACTIONS", "Action"]


class Action(Protocol):
    NAME: str

    def execute(self, session: Session) -> None: ...


ACTIONS: dict[str, type[Action]] = {
    cls.NAME: cls
    for cls in (Enqueue, Allocate, Backfill, Preempt, Reclaim, Shuffle, GangPreempt, GangReclaim)
}
