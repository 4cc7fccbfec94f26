"""Per-queue requests and allocations of the cached pods, kept as they change.

The queue gauges of each cycle (``volcano_queue_request_*``, ``volcano_queue_allocated_*``)
add up every cached pod of a queue that has not completed: all of them for the request, the
ones on a node for the allocation. Summing 100,000 pods each cycle costs more than the cycle,
so the cache moves these sums on every change of a cached task (its ``_add_task`` /
``_remove_task``, which every change goes through) and of a PodGroup's queue.

Only ``lahar run`` publishes these gauges, so the sums are kept from the first time they are
read (:meth:`QueueUsage.activate`, one pass over the pods) and cost nothing before.

The sums are exact: a task whose request has a non-integral value is not added but counted,
and a queue with such tasks is summed task by task when read (float sums of integral values
do not depend on the order; others might). Pending pods are indexed too, for the count of
unschedulable ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import COMPLETED_STATUS, TaskID, TaskStatus
from scheduler.framework.settled import Flat, QueueSums, flatten

__all__ = ["QueueUsage"]

_NOTHING: Flat = (0.0, 0.0, ())


@dataclass(slots=True)
class QueueUsage:
    sums: dict[str, QueueSums] = field(default_factory=dict)
    """Queue name → (request, allocated) of its integral tasks."""
    inexact: dict[str, int] = field(default_factory=dict)
    """Queue name → how many of its tasks have a non-integral request."""
    pending: dict[TaskID, TaskInfo] = field(default_factory=dict)
    """Cached tasks that are Pending and belong to a job."""
    active: bool = False
    """Whether the sums are kept (callers skip :meth:`change` until then)."""

    def activate(self, tasks: Iterable[TaskInfo], queue_of: Callable[[TaskInfo], str]) -> None:
        """Start keeping the sums, from the cached ``tasks`` as they are now."""
        self.sums, self.inexact, self.pending = {}, {}, {}
        self.active = True
        for task in tasks:
            self.change(task, queue_of(task), +1)

    def change(self, task: TaskInfo, queue: str, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) ``task`` as a member of ``queue`` ("" = none)."""
        if task.status is TaskStatus.PENDING and task.job:
            if sign > 0:
                self.pending[task.uid] = task
            else:
                self.pending.pop(task.uid, None)
        if not queue or task.status & COMPLETED_STATUS:
            return
        flat = flatten([task.resreq])
        if flat is None:
            left = self.inexact.get(queue, 0) + sign
            if left:
                self.inexact[queue] = left
            else:
                self.inexact.pop(queue, None)
            return
        sums = self.sums.get(queue)
        if sums is None:
            sums = self.sums[queue] = QueueSums.empty(2)
        sums.change((flat[0], flat[0] if task.node_name else _NOTHING), sign)

    def totals(
        self, tasks: Callable[[], Iterable[TaskInfo]], queue_of: Callable[[TaskInfo], str]
    ) -> tuple[dict[str, Resource], dict[str, Resource]]:
        """``(request, allocated)`` by queue name; ``tasks``/``queue_of`` serve the queues
        that must be summed task by task."""
        request: dict[str, Resource] = {}
        allocated: dict[str, Resource] = {}
        for queue, sums in self.sums.items():
            if queue not in self.inexact:
                request[queue], allocated[queue] = sums.resources()
        if self.inexact:
            for queue in self.inexact:
                request[queue], allocated[queue] = Resource(), Resource()
            for task in tasks():
                queue = queue_of(task)
                if queue in self.inexact and not task.status & COMPLETED_STATUS:
                    request[queue].add(task.resreq)
                    if task.node_name:
                        allocated[queue].add(task.resreq)
        return request, allocated
