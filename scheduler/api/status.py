"""Scheduling outcomes as values, and the aggregated fit-error messages users read.

``FitErrors`` renders Volcano's shape: ``0/4 nodes are unavailable: 3 Insufficient cpu,
1 node(s) had untolerated taint {gpu: true}.`` — reason counts across nodes, each entry
``"<count> <reason>"``, sorted lexicographically, ending with a period.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["ALL_NODES_UNAVAILABLE", "Code", "FitErrors", "Status"]

ALL_NODES_UNAVAILABLE = "all nodes are unavailable"


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNRESOLVABLE = 3
    """Unschedulable and unresolvable: preemption cannot help."""
    WAIT = 4
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    @classmethod
    def unschedulable(cls, reason: str, *, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, (reason,), plugin)

    @classmethod
    def unresolvable(cls, reason: str, *, plugin: str = "") -> Status:
        return cls(Code.UNRESOLVABLE, (reason,), plugin)

    @classmethod
    def error(cls, reason: str, *, plugin: str = "") -> Status:
        return cls(Code.ERROR, (reason,), plugin)


SUCCESS = Status()


@dataclass(slots=True)
class FitErrors:
    """Why a task fits no node: reason counts over the nodes that were evaluated."""

    nodes: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    error: str = ""
    """A task-level reason (e.g. a failed pre-predicate) that applies to every node."""
    condition_reason: str = "Unschedulable"
    """The reason of the pod's PodScheduled=False condition: ``SchedulerError`` when the
    scheduler itself failed (a DRA allocator error), as kube-scheduler writes it."""

    @classmethod
    def for_pod(cls, nodes: int, reason: str) -> FitErrors:
        """A reason about the pod itself (a failed pre-predicate: a request that can never be
        honoured), the same on every node. Volcano counts it once per node (``2 pod default/x
        requests …``); here it is said once, after the same ``0/N nodes are unavailable:``."""
        return cls(nodes=nodes, error=f"0/{nodes} nodes are unavailable: {reason}.")

    def add(self, reason: str, count: int = 1) -> None:
        if count > 0:
            self.reasons[reason] += count

    def __str__(self) -> str:
        if self.error and not self.reasons:
            return self.error
        if not self.reasons:
            return f"0/{self.nodes} nodes are unavailable."
        entries = sorted(f"{count} {reason}" for reason, count in self.reasons.items())
        return f"0/{self.nodes} nodes are unavailable: {', '.join(entries)}."
