"""Extension-point Protocols a plugin may implement, and the conf flag that gates each.

A plugin implements only what it needs; the session discovers capabilities once per cycle
with ``isinstance`` checks and keeps per-tier lists. The combination rule of each point
(AND, OR, sum, first non-zero, votes) lives in :mod:`scheduler.framework.session`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.status import Status
from scheduler.api.task import TaskInfo
from scheduler.api.types import Vote

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable
    from scheduler.framework.session import Session

__all__ = [
    "HOOK_FLAGS",
    "Allocatable",
    "BoolArray",
    "EventHandler",
    "ExactPredicate",
    "FloatArray",
    "HyperNodeGradient",
    "HyperNodeScorer",
    "IntArray",
    "JobEnqueueable",
    "JobEnqueued",
    "JobOrder",
    "JobOrderKey",
    "JobPipelined",
    "JobReady",
    "JobStarving",
    "JobValid",
    "NodeScorer",
    "Overused",
    "Plugin",
    "PrePredicate",
    "Predicate",
    "PreemptPredicate",
    "Preemptable",
    "Preemptive",
    "QueueOrder",
    "Reclaimable",
    "SimulatePredicate",
    "TaskOrder",
    "VictimQueueOrder",
    "VictimTasks",
]

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


class Plugin(Protocol):
    """Every plugin: built per session from its typed ``Args``."""

    NAME: str

    def on_session_open(self, session: Session) -> None: ...

    def on_session_close(self, session: Session) -> None: ...


@runtime_checkable
class JobOrder(Protocol):
    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        """Negative when ``left`` goes first, positive when ``right`` does, 0 to defer."""


@runtime_checkable
class JobOrderKey(Protocol):
    """A job order that is the order of a key: ``job_order(left, right)`` is the sign of
    comparing ``job_order_key(left)`` with ``job_order_key(right)``, for every two jobs.

    The key may change within a session only when the job's tasks do (a placement, an
    eviction or their undo, which move ``JobInfo.revision``): the session keeps each job's
    key until then, so a heap comparison costs two lookups and one tuple comparison."""

    def job_order_key(self, job: JobInfo) -> Any: ...


@runtime_checkable
class TaskOrder(Protocol):
    def task_order(self, left: TaskInfo, right: TaskInfo) -> int: ...


@runtime_checkable
class QueueOrder(Protocol):
    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int: ...


@runtime_checkable
class JobValid(Protocol):
    def job_valid(self, job: JobInfo) -> tuple[str, str] | None:
        """``None`` when valid, else ``(reason, message)`` for the PodGroup condition.

        A function of the job alone: a settled job (unchanged since it was found valid) is
        not asked again (:mod:`scheduler.framework.settled`)."""


@runtime_checkable
class JobReady(Protocol):
    def job_ready(self, job: JobInfo) -> bool: ...


@runtime_checkable
class JobPipelined(Protocol):
    def job_pipelined(self, job: JobInfo) -> Vote: ...


@runtime_checkable
class JobStarving(Protocol):
    def job_starving(self, job: JobInfo) -> bool: ...


@runtime_checkable
class JobEnqueueable(Protocol):
    def job_enqueueable(self, job: JobInfo) -> Vote: ...


@runtime_checkable
class JobEnqueued(Protocol):
    def job_enqueued(self, job: JobInfo) -> None: ...


@runtime_checkable
class PrePredicate(Protocol):
    def pre_predicate(self, task: TaskInfo) -> Status | None:
        """Once per task before node filtering; a non-None status rejects every node."""


@runtime_checkable
class Predicate(Protocol):
    """Vectorised node filter: a boolean mask over every node of the table."""

    def predicate_mask(
        self, task: TaskInfo, table: NodeTable, rows: slice | None = None
    ) -> BoolArray:
        """The mask over every node, or over the table rows of the ``rows`` slice only (node
        selection asks window by window, :mod:`scheduler.framework.select`). A plugin may
        leave ``rows`` out of its signature: the session then slices its whole mask."""

    def predicate_reasons(
        self, task: TaskInfo, table: NodeTable, alive: BoolArray
    ) -> list[tuple[BoolArray, str]]:
        """Why nodes in ``alive`` fail, in check order: ``(failed mask, reason)`` pairs, each
        node counted under its first failing check. Called only to explain a failure."""


@runtime_checkable
class ExactPredicate(Protocol):
    """A per-node check too detailed to vectorise, run only on vector-filtered candidates."""

    def check_node(self, task: TaskInfo, node: NodeInfo) -> Status | None: ...

    def wants_exact(self, task: TaskInfo) -> bool:
        """False when :meth:`check_node` would pass every node for ``task`` (e.g. a pod that
        asks for no device), so the per-node loop can be skipped.

        A plugin may also have ``exact_known(task, rows)``: what :meth:`check_node` is already
        known to answer on the node ``rows`` (codes 1 passes, 0 unknown, ``-1 - i`` fails with
        ``reasons[i]``, and the reasons), or None; node selection then checks only the rows
        it does not know (:meth:`Session.exact_known`)."""


@runtime_checkable
class NodeScorer(Protocol):
    def score_nodes(self, task: TaskInfo, table: NodeTable, candidates: IntArray) -> FloatArray:
        """Scores for the node rows in ``candidates`` (already weighted)."""


@runtime_checkable
class Overused(Protocol):
    def overused(self, queue: QueueInfo) -> bool: ...


@runtime_checkable
class Allocatable(Protocol):
    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool: ...


@runtime_checkable
class Preemptable(Protocol):
    def preemptable(
        self, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]: ...


@runtime_checkable
class Reclaimable(Protocol):
    def reclaimable(
        self, reclaimer: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]: ...


@runtime_checkable
class Preemptive(Protocol):
    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Whether ``queue`` may reclaim resources from other queues for ``task``."""


@runtime_checkable
class VictimQueueOrder(Protocol):
    def victim_queue_order(
        self, left: QueueInfo, right: QueueInfo, preemptor_queue: QueueInfo
    ) -> int:
        """Negative when victims of ``left`` go first (are evicted before those of ``right``)."""


@runtime_checkable
class VictimTasks(Protocol):
    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        """Of the running ``tasks``, those this plugin wants evicted now (``shuffle``)."""


@runtime_checkable
class PreemptPredicate(Protocol):
    """A vectorised predicate that can tell failures eviction may cure from those it cannot.

    Volcano's ``PredicateForPreemptAction`` drops a node only for UnschedulableAndUnresolvable
    (or Error/Skip/Wait) statuses; a plain Unschedulable one (too many pods, a host port in
    use) may go away once victims leave. For a :class:`Predicate` without this method the
    session reads its reasons instead (``CURABLE_BY_EVICTION`` in
    :mod:`scheduler.framework.victims`).
    """

    def preempt_mask(self, task: TaskInfo, table: NodeTable) -> BoolArray:
        """Nodes not ruled out for good: they pass, or fail only for curable reasons."""


@runtime_checkable
class SimulatePredicate(Protocol):
    """The node checks topology-aware preemption's dry run repeats as victims leave
    (Volcano's ``SimulatePredicateFn``): only what victims leaving can change and the plugin
    chooses to re-check there — for ``predicates``, inter-pod affinity alone."""

    def simulate_predicate_mask(self, task: TaskInfo, table: NodeTable) -> BoolArray: ...


@runtime_checkable
class EventHandler(Protocol):
    """Told of every in-session allocate/pipeline and evict/unallocate."""

    def on_allocate(self, task: TaskInfo) -> None: ...

    def on_deallocate(self, task: TaskInfo) -> None: ...


@runtime_checkable
class HyperNodeGradient(Protocol):
    def hypernode_gradients(self, job: JobInfo, root: str, purpose: str) -> list[list[str]]:
        """Candidate HyperNodes under ``root`` for the whole job, grouped lowest tier first
        (``purpose``: ``allocate`` or ``evict``)."""


@runtime_checkable
class HyperNodeScorer(Protocol):
    def score_hypernodes(self, job: JobInfo, names: list[str]) -> dict[str, float]:
        """Scores of candidate HyperNodes for the job (already weighted)."""


HOOK_FLAGS: dict[type, str | None] = {
    JobOrder: "enableJobOrder",
    TaskOrder: "enableTaskOrder",
    QueueOrder: "enableQueueOrder",
    JobValid: None,
    JobReady: "enableJobReady",
    JobPipelined: "enableJobPipelined",
    JobStarving: "enableJobStarving",
    JobEnqueueable: "enableJobEnqueued",
    JobEnqueued: "enableJobEnqueued",
    PrePredicate: "enablePredicate",
    Predicate: "enablePredicate",
    ExactPredicate: "enablePredicate",
    NodeScorer: "enableNodeOrder",
    Overused: "enabledOverused",
    Allocatable: "enabledAllocatable",
    Preemptable: "enablePreemptable",
    Reclaimable: "enableReclaimable",
    Preemptive: "enablePreemptive",
    VictimQueueOrder: None,
    VictimTasks: "enabledVictim",
    PreemptPredicate: "enablePredicate",
    SimulatePredicate: "enablePredicate",
    EventHandler: None,
    HyperNodeGradient: "enabledHyperNodeGradient",
    HyperNodeScorer: "enabledHyperNodeOrder",
}
"""Each extension point and the PluginOption flag that switches it (None: always on)."""


def tier_vote(tiers: Iterable[Iterable[Callable[..., Vote]]], *args: Any) -> bool:
    """Volcano's vote over tiers (``JobPipelined``, ``JobEnqueueable``, ``SubJobPipelined``):
    any reject ends it false, a tier with a permit ends it true, abstentions pass to the next
    tier, and a vote nobody cast is true. Each voter is asked lazily, in order, with
    ``args``."""
    for tier in tiers:
        permitted = False
        for ask in tier:
            vote = ask(*args)
            if vote == Vote.REJECT:
                return False
            permitted = permitted or vote == Vote.PERMIT
        if permitted:
            return True
    return True
