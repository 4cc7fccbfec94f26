"""The NodeShard mirror of one scheduler and the nodes it may use, as Volcano's cache keeps them.

With ``--scheduler-sharding-mode hard|soft`` the cache watches every NodeShard. After each
change (Volcano's ``RefreshNodeShards``, pkg/scheduler/cache/shard_coordinator.go) the nodes
this scheduler may use are recomputed: its own shard's ``spec.nodesDesired`` less every node
another shard still lists in ``status.nodesInUse`` (``getAvailableNodesFromShard``), so a node
moving between shards is used by its new owner only once the old owner has let it go. The
scheduler then reports that set in its own shard's status, with ``nodesToAdd`` (desired, not
yet usable) and ``nodesToRemove`` (usable, no longer desired), and only when one of the three
lists changed (``generateNodeShardWithStatus``). No shard of our name: no node is ours (Volcano
logs an error and keeps the set it had, which starts empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from scheduler.api.nodeshard import (
    NONE_SHARDING,
    SHARDING_MODES,
    NodeShard,
    ShardScope,
    node_shard_from_object,
)

__all__ = ["NodeShardStore"]

log = structlog.get_logger("lahar.cache")


class NodeShardStore:
    """NodeShards by name, and this scheduler's usable nodes (``in_use``)."""

    def __init__(self, *, mode: str = NONE_SHARDING, name: str = "volcano") -> None:
        if mode not in SHARDING_MODES:
            raise ValueError(f"sharding mode {mode!r}: must be one of {', '.join(SHARDING_MODES)}")
        self.mode = mode
        self.name = name
        self.shards: dict[str, NodeShard] = {}
        self.in_use: frozenset[str] = frozenset()
        self._missing_told = False

    @property
    def enabled(self) -> bool:
        return self.mode != NONE_SHARDING

    def apply(self, deleted: bool, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """Take one NodeShard event; returns the status to write on our shard, or None.

        A malformed object raises :class:`~scheduler.api.errors.ObjectError` (the cache
        reports it); what was known of that shard before is kept."""
        if not self.enabled:
            return None
        name = str((obj.get("metadata") or {}).get("name", ""))
        if deleted:
            if self.shards.pop(name, None) is None:
                return None
        else:
            self.shards[name] = node_shard_from_object(obj)
        return self.refresh()

    def refresh(self) -> dict[str, Any] | None:
        own = self.shards.get(self.name)
        if own is None:
            return None
        self._missing_told = False
        usable = set(own.desired)
        for other in self.shards.values():
            if other.name != own.name:
                usable -= other.in_use
        self.in_use = frozenset(usable)
        return self.status_of(own)

    def status_of(self, own: NodeShard) -> dict[str, Any] | None:
        """The status our shard should carry, or None when it already does."""
        in_use = self.in_use
        to_remove = in_use - own.desired
        to_add = own.desired - in_use
        if (in_use == own.status_in_use and to_remove == own.status_to_remove
                and to_add == own.status_to_add):
            return None
        return {"nodesInUse": sorted(in_use), "nodesToAdd": sorted(to_add),
                "nodesToRemove": sorted(to_remove)}

    def scope(self) -> ShardScope | None:
        """What the next session sees (None with sharding off)."""
        if not self.enabled:
            return None
        if self.name not in self.shards and not self._missing_told:
            log.error("node sharding is on but no NodeShard is named after this scheduler; "
                      "it places on no node (hard) or prefers none (soft)", shard=self.name,
                      mode=self.mode)
            self._missing_told = True
        return ShardScope(mode=self.mode, nodes=self.in_use)
