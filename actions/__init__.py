"""Actions, one per module, in an explicit registry keyed by the conf's action names.

The registry names every action's module and class up front and imports a module the first
time its action is looked up (:class:`~scheduler.framework.lazyregistry.LazyRegistry`): a
conf running ``enqueue, allocate, backfill`` never imports the preemption and reclaim
modules. Membership and iteration import nothing, so an unknown action is refused before
any import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from scheduler.framework.lazyregistry import LazyRegistry

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = ["ACTIONS", "Action"]


class Action(Protocol):
    NAME: str

    def execute(self, session: Session) -> None: ...


ACTIONS = LazyRegistry({
    "enqueue": "actions.enqueue:Enqueue",
    "allocate": "actions.allocate:Allocate",
    "backfill": "actions.backfill:Backfill",
    "preempt": "actions.preempt:Preempt",
    "reclaim": "actions.reclaim:Reclaim",
    "shuffle": "actions.shuffle:Shuffle",
    "gangpreempt": "actions.gangpreempt:GangPreempt",
    "gangreclaim": "actions.gangreclaim:GangReclaim",
})
"""Conf name → :class:`Action` class."""
