"""What a session needs from the cache: where committed decisions and status go."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo

__all__ = ["SessionSink"]


class SessionSink(Protocol):
    """Implemented by the scheduler cache. Calls are cheap: real writes happen on flush."""

    def bind(self, tasks: Sequence[TaskInfo]) -> None:
        """Queue binds for tasks carrying ``node_name`` and ``bind_annotations``."""

    def evict(self, task: TaskInfo, reason: str, *, for_job: JobInfo | None = None) -> None:
        """Evict a victim; ``for_job`` is the gang it makes room for, when one is known."""

    def update_podgroup(
        self, job: JobInfo, event: tuple[str, str, str] | None, *, unready: int | None = None
    ) -> None:
        """Persist the job's PodGroup status if changed; ``event`` is (type, reason, message).

        ``unready`` is how many more tasks the gang needs to be ready (0 when it is), None for
        a job the session found invalid; it feeds ``volcano_unschedule_task_count``.
        """

    def update_task_condition(
        self, task: TaskInfo, *, reason: str, message: str, nominated_node: str = ""
    ) -> None:
        """Set PodScheduled=False with reason/message and emit FailedScheduling, on change.

        A non-empty ``nominated_node`` (a preemptor pipelined where victims were evicted for
        it) is written to the pod's ``status.nominatedNodeName``; an empty one leaves it as is.
        """

    def update_queue_allocated(self, queue: QueueInfo, allocated: Resource) -> None: ...
