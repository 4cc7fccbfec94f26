"""The per-cycle copy of cluster state a session works on.

Besides the copies, a snapshot carries what lets the next one be incremental: the node table
of the previous cycle and the nodes whose rows changed since, and it records which nodes and
tasks its session touched (those copies are renewed before they are handed out again), and
which jobs are settled (their close is known in advance, so a cycle need not visit them).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.api.hypernode import HyperNodeTree
from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.nodeshard import ShardScope
from scheduler.api.queue import QueueInfo
from scheduler.api.types import JobID, QueueID, TaskID
from scheduler.framework.draview import DraView

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable
    from scheduler.framework.settled import SettledStore

__all__ = ["Snapshot"]


@dataclass(slots=True)
class Snapshot:
    nodes: list[NodeInfo] = field(default_factory=list)
    jobs: dict[JobID, JobInfo] = field(default_factory=dict)
    queues: dict[QueueID, QueueInfo] = field(default_factory=dict)
    device_dims: frozenset[str] = frozenset()
    """Scalar resource names device families report per node (kept in the node table)."""
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    """Namespace name → its labels, for pod affinity terms' ``namespaceSelector``."""
    previous_table: NodeTable | None = None
    """The last session's node table, whose rows of unchanged nodes are still right."""
    renewed_nodes: frozenset[str] | None = None
    """Nodes whose rows ``previous_table`` may have wrong (None: build the table anew)."""
    table: NodeTable | None = None
    """Set by the session that opens on this snapshot."""
    touched_nodes: set[str] = field(default_factory=set)
    touched_tasks: set[TaskID] = field(default_factory=set)
    """Filled by the session on every placement, eviction and undo."""
    settled: AbstractSet[JobID] = frozenset()
    """Jobs known to close exactly as they closed last cycle: every task runs, nothing about
    them changed since, and their last close wrote nothing new (see
    :mod:`scheduler.framework.settled`). Sessions skip them where the outcome is known."""
    settled_sums: SettledStore | None = None
    """Per-queue sums over settled jobs kept from cycle to cycle (None: none kept)."""
    hypernodes: HyperNodeTree = field(default_factory=HyperNodeTree)
    """The network-topology tree (shared with the cache and later snapshots: read only)."""
    dra: DraView | None = None
    """The DRA objects this session sees (None: none)."""
    shard: ShardScope | None = None
    """Node sharding: the mode and the nodes of this scheduler's shard (None: sharding off)."""
    active: list[JobID] | None = None
    """The jobs that are not settled, in ``jobs`` order (None: every job)."""
    closed_jobs: list[JobID] | None = None
    """Set by the session's close: the jobs it visited (None: the session did not close)."""
    steady_closed: set[JobID] = field(default_factory=set)
    """Set by the session's close: the visited jobs that will close the same way next cycle
    unless something changes them."""
