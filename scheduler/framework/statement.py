"""Statement: the transaction through which actions change session state.

Operations apply to the session at once (so later decisions in the cycle see them) and are
recorded; ``commit`` sends binds and evictions to the cache, ``discard`` undoes them in reverse
order. A pipelined task never reaches the API: it only reserves resources inside the session.
Preempt and reclaim try each node in a statement of its own and :meth:`Statement.merge` it into
the job's statement only when the preemptor was placed, so a node that did not work out leaves
no eviction behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.status import Status
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskStatus
from scheduler.framework.session import AllocateError, Session

__all__ = ["Operation", "Statement"]


class Operation(Enum):
    ALLOCATE = "allocate"
    PIPELINE = "pipeline"
    EVICT = "evict"


@dataclass(slots=True)
class _Op:
    kind: Operation
    task: TaskInfo
    reason: str = ""
    nominated_before: str | None = None
    """The task's ``nominated_node`` before a pipeline that set it, restored on discard."""
    for_job: JobInfo | None = None
    """The job an eviction makes room for, when the action evicts for a whole gang."""


class Statement:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.operations: list[_Op] = []

    def __len__(self) -> int:
        return len(self.operations)

    def allocate(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        return self._place(task, node, TaskStatus.ALLOCATED, Operation.ALLOCATE)

    def pipeline(
        self, task: TaskInfo, node: NodeInfo, *, eviction_occurred: bool = False
    ) -> Status | None:
        """Reserve ``node`` for ``task``; after evictions made for it, the node is also
        recorded as the task's nominated node (written to ``status.nominatedNodeName``)."""
        before = task.nominated_node
        status = self._place(task, node, TaskStatus.PIPELINED, Operation.PIPELINE)
        if status is None and eviction_occurred:
            self.operations[-1].nominated_before = before
            task.nominated_node = node.name
        return status

    def _place(
        self, task: TaskInfo, node: NodeInfo, status: TaskStatus, kind: Operation
    ) -> Status | None:
        try:
            self.session.place(task, node, status)
        except AllocateError as exc:
            return Status.error(str(exc))
        self.operations.append(_Op(kind, task, nominated_before=task.nominated_node))
        return None

    def evict(self, task: TaskInfo, reason: str, *, for_job: JobInfo | None = None) -> None:
        """``for_job``: the gang the eviction makes room for (gang eviction), named on the
        victim's ``Evict`` event."""
        self.session.mark_releasing(task, True)
        self.operations.append(_Op(Operation.EVICT, task, reason, for_job=for_job))

    def unevict(self, task: TaskInfo) -> None:
        """Undo this statement's eviction of ``task`` alone (a dry run's reprieve)."""
        for i, op in enumerate(self.operations):
            if op.kind is Operation.EVICT and op.task is task:
                self.session.mark_releasing(task, False)
                del self.operations[i]
                return
        raise ValueError(f"task {task.key} was not evicted by this statement")

    @property
    def has_evictions(self) -> bool:
        return any(op.kind is Operation.EVICT for op in self.operations)

    def evicted(self) -> list[TaskInfo]:
        return [op.task for op in self.operations if op.kind is Operation.EVICT]

    def merge(self, other: Statement) -> None:
        """Take over ``other``'s operations (already applied) after this one's own."""
        self.operations.extend(other.operations)
        other.operations = []

    def discard(self) -> None:
        """Undo every operation, newest first."""
        for op in reversed(self.operations):
            if op.kind is Operation.EVICT:
                self.session.mark_releasing(op.task, False)
            else:
                self.session.unplace(op.task)
                if op.kind is Operation.PIPELINE:
                    before = op.nominated_before
                    op.task.nominated_node = before if before is not None else ""
        self.operations.clear()

    def commit(self) -> None:
        """Evictions go to the cache, allocated tasks are bound; pipelined stay in session."""
        to_bind: list[TaskInfo] = []
        for op in self.operations:
            if op.kind is Operation.EVICT and op.for_job is not None:
                self.session.sink.evict(op.task, op.reason, for_job=op.for_job)
            elif op.kind is Operation.EVICT:
                self.session.sink.evict(op.task, op.reason)
            elif op.kind is Operation.ALLOCATE:
                to_bind.append(op.task)
        if to_bind:
            self.session.sink.bind(to_bind)
            for task in to_bind:
                self.session.jobs[task.job].update_task_status(task, TaskStatus.BINDING)
        self.operations.clear()
