"""The per-cycle copy of cluster state a session works on."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.types import JobID, QueueID

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
