"""Identifiers and task statuses shared by every layer.

Task statuses are an :class:`enum.Flag` so that the status groups Volcano uses
(allocated, scheduled, completed …) are plain bit masks.
"""

from __future__ import annotations

from enum import Flag, IntEnum, auto
from typing import NewType

__all__ = [
    "ALLOCATED_STATUS",
    "COMPLETED_STATUS",
    "PREEMPTABLE_STATUS",
    "READY_STATUS",
    "SCHEDULED_STATUS",
    "JobID",
    "NodeName",
    "QueueID",
    "TaskID",
    "TaskStatus",
    "Vote",
]

TaskID = NewType("TaskID", str)
"""A pod UID."""
JobID = NewType("JobID", str)
"""``<namespace>/<podgroup name>``."""
QueueID = NewType("QueueID", str)
"""The queue name (queues are cluster-scoped)."""
NodeName = NewType("NodeName", str)


class TaskStatus(Flag):
    PENDING = auto()
    ALLOCATED = auto()
    PIPELINED = auto()
    BINDING = auto()
    BOUND = auto()
    RUNNING = auto()
    RELEASING = auto()
    SUCCEEDED = auto()
    FAILED = auto()
    UNKNOWN = auto()

    # Members (combinations too) are singletons compared by identity, so identity hashing
    # agrees with equality; Enum's own __hash__ is a Python call, and statuses key the
    # per-job task indexes looked up for every job of every cycle.
    __hash__ = object.__hash__

    def __str__(self) -> str:
        return (self.name or "Unknown").capitalize()


ALLOCATED_STATUS = TaskStatus.BOUND | TaskStatus.BINDING | TaskStatus.RUNNING | TaskStatus.ALLOCATED
"""Tasks that hold resources on a node for good."""
SCHEDULED_STATUS = TaskStatus.RUNNING | TaskStatus.BOUND | TaskStatus.FAILED | TaskStatus.SUCCEEDED
PREEMPTABLE_STATUS = TaskStatus.BOUND | TaskStatus.RUNNING
COMPLETED_STATUS = TaskStatus.FAILED | TaskStatus.SUCCEEDED
READY_STATUS = ALLOCATED_STATUS | TaskStatus.SUCCEEDED
"""Tasks counted towards gang readiness."""


class Vote(IntEnum):
    """A plugin's answer at a voting extension point."""

    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1
