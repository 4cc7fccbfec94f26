"""What one session sees of the DRA objects, and what it decided about claims.

Built by the cache (``scheduler.cache.dra``) with each snapshot and read by the ``dra`` plugin:
the parsed DeviceClasses, ResourceSlices and ResourceClaims, each claim's allocation and the
pods it is reserved for (as written, or decided in an earlier cycle and not written yet), and,
filled by the session, the claims of each task it placed, which the cache writes before the
task's bind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.types import TaskID

__all__ = ["DraView", "PendingClaim"]


@dataclass(slots=True)
class PendingClaim:
    """One claim of one placed pod: its allocation (new or existing) and the pod to reserve."""

    key: str
    allocation: Any
    pod_name: str
    pod_uid: str


@dataclass(slots=True)
class DraView:
    """What one session sees of the DRA objects (shared with the store: read only, except
    :attr:`session`, which the session's DRA plugin fills)."""

    classes: dict[str, Any] = field(default_factory=dict)
    slices: list[Any] = field(default_factory=list)
    claims: dict[str, Any] = field(default_factory=dict)
    """``namespace/name`` → parsed ResourceClaim."""
    claim_objects: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    templates: frozenset[str] = frozenset()
    allocations: dict[str, Any] = field(default_factory=dict)
    """Claim key → its allocation, written or pending."""
    reserved: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Claim key → uids of the pods it is reserved for, written or pending."""
    slice_nodes: frozenset[str] = frozenset()
    """Nodes that node-local slices (``nodeName``) publish devices for."""
    network_slices: bool = False
    """Whether a slice serves several nodes (``allNodes`` or ``nodeSelector``)."""
    session: dict[TaskID, list[PendingClaim]] = field(default_factory=dict)
    """Filled by the session: each placed task's claims, moved to pending when committed."""

    @property
    def empty(self) -> bool:
        return not self.slices and not self.claims
