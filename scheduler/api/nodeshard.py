"""Volcano's ``NodeShard`` (``shard.volcano.sh/v1alpha1``): the nodes one scheduler may use.

A sharding controller writes one cluster-scoped NodeShard per scheduler, named after it, with
``spec.nodesDesired``; each scheduler reports in ``status`` the nodes it uses
(``nodesInUse``) and the hand-over still under way (``nodesToAdd``, ``nodesToRemove``). A
scheduler started with ``--scheduler-sharding-mode hard|soft`` and ``--scheduler-sharding-name``
reads them; ``none`` (the default) ignores them. This module holds the object as the scheduler
reads it and the scope a session works with; the rules are in :mod:`scheduler.cache.shards`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.errors import ObjectError

__all__ = [
    "HARD_SHARDING",
    "NONE_SHARDING",
    "NOT_IN_SHARD",
    "SHARDING_MODES",
    "SHARD_API_VERSION",
    "SOFT_SHARDING",
    "NodeShard",
    "ShardScope",
    "node_shard_from_object",
]

SHARD_API_VERSION = "shard.volcano.sh/v1alpha1"
NONE_SHARDING = "none"
HARD_SHARDING = "hard"
SOFT_SHARDING = "soft"
SHARDING_MODES = (NONE_SHARDING, HARD_SHARDING, SOFT_SHARDING)
"""Volcano's ``--scheduler-sharding-mode`` values (pkg/util/util.go: NoneShardingMode, ...)."""
NOT_IN_SHARD = "node isn't in scheduler node shard"
"""The fit error of a node outside the shard in hard mode, in Volcano's words
(pkg/scheduler/util/predicate_helper.go: PredicateNodes)."""


@dataclass(frozen=True, slots=True)
class NodeShard:
    """One NodeShard as Volcano's ``api.NewNodeShardInfo`` reads it: ``to_add`` and
    ``to_remove`` are computed from ``desired`` and ``in_use`` (the status copies may lag);
    the ``status_*`` fields are the lists as written, to tell whether a write would change
    anything."""

    name: str
    desired: frozenset[str]
    in_use: frozenset[str]
    status_in_use: frozenset[str] = frozenset()
    status_to_add: frozenset[str] = frozenset()
    status_to_remove: frozenset[str] = frozenset()

    @property
    def to_add(self) -> frozenset[str]:
        return self.desired - self.in_use

    @property
    def to_remove(self) -> frozenset[str]:
        return self.in_use - self.desired


@dataclass(frozen=True, slots=True)
class ShardScope:
    """What a session needs: the mode and the nodes this scheduler may use now."""

    mode: str
    nodes: frozenset[str]


def _names(obj: Mapping[str, Any], name: str, path: str) -> frozenset[str]:
    section, _, field_name = path.partition(".")
    holder = obj.get(section)
    if holder is None:
        return frozenset()
    if not isinstance(holder, Mapping):
        raise ObjectError(kind="NodeShard", name=name, field=section,
                          problem=f"must be an object, got {holder!r}")
    value = holder.get(field_name)
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ObjectError(kind="NodeShard", name=name, field=path,
                          problem=f"must be a list of node names, got {value!r}")
    return frozenset(value)


def node_shard_from_object(obj: Mapping[str, Any]) -> NodeShard:
    """Read a raw NodeShard; :class:`ObjectError` names the field that is wrong."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    in_use = _names(obj, name, "status.nodesInUse")
    return NodeShard(
        name=name,
        desired=_names(obj, name, "spec.nodesDesired"),
        in_use=in_use,
        status_in_use=in_use,
        status_to_add=_names(obj, name, "status.nodesToAdd"),
        status_to_remove=_names(obj, name, "status.nodesToRemove"),
    )
