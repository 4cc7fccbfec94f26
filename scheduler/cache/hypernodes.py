"""The cache's HyperNodes: objects applied one event at a time, the tree rebuilt on demand.

A HyperNode event replaces or drops one parsed object. The tree (:func:`build_tree`) depends
on the HyperNodes and on which nodes exist and their labels, so it is rebuilt at the next
snapshot after a HyperNode changes or a node event can change what a member picks (a node a
member names, any node for a regex member, a relabelled node for a label member), and handed
to every snapshot until then (sessions only read it).
What the tree builder warns about is logged once per distinct message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from scheduler.api.hypernode import (
    MEMBER_NODE,
    HyperNode,
    HyperNodeTree,
    build_tree,
    hypernode_from_object,
)
from scheduler.api.node import NodeInfo
from scheduler.api.podgroup import PodGroup

__all__ = ["HyperNodeStore", "warn_unacted_topology"]

log = structlog.get_logger("lahar.cache")


class HyperNodeStore:
    __slots__ = ("_by_label", "_by_name", "_named", "_reported", "_tree", "objects")

    def __init__(self) -> None:
        self.objects: dict[str, HyperNode] = {}
        self._tree: HyperNodeTree | None = None
        self._reported: set[str] = set()
        self._named: set[str] = set()
        """Node names exact members name."""
        self._by_name = False
        """Whether some member picks nodes by a regular expression on the name."""
        self._by_label = False
        """Whether some member picks nodes by labels."""

    def _changed(self) -> None:
        self._tree = None
        members = [m for h in self.objects.values() for m in h.members if m.type == MEMBER_NODE]
        self._named = {m.exact for m in members if m.exact}
        self._by_name = any(m.regex for m in members)
        self._by_label = any(m.label is not None for m in members)

    def apply(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        """One HyperNode event; a malformed object raises ``ObjectError`` (the last readable
        version stays)."""
        if deleted:
            name = str((obj.get("metadata") or {}).get("name") or "")
            if self.objects.pop(name, None) is not None:
                self._changed()
            return
        hypernode = hypernode_from_object(obj)
        if self.objects.get(hypernode.name) != hypernode:
            self.objects[hypernode.name] = hypernode
            self._changed()

    def node_changed(self, old: NodeInfo | None, new: NodeInfo | None) -> None:
        """A node was added, deleted or updated: members may pick other nodes now."""
        node = new if new is not None else old
        if not self.objects or node is None:
            return
        if old is None or new is None:
            if node.name in self._named or self._by_name or self._by_label:
                self._tree = None
        elif self._by_label and old.labels != new.labels:
            self._tree = None

    def tree(self, nodes: Mapping[str, NodeInfo]) -> HyperNodeTree:
        if self._tree is None:
            self._tree = build_tree(
                self.objects.values(), {name: node.labels for name, node in nodes.items()}
            )
            for warning in self._tree.warnings:
                if warning not in self._reported:
                    log.warning("hypernode tree", problem=warning)
            self._reported = set(self._tree.warnings)
        return self._tree


def warn_unacted_topology(uid: str, old: PodGroup | None, new: PodGroup) -> None:
    """Log, once per change, what of a PodGroup's topology fields is read but not acted on."""
    topology = new.network_topology
    if (topology is not None and topology.hard and topology.highest_tier_allowed is None
            and not topology.highest_tier_name
            and (old is None or old.network_topology != topology)):
        log.warning(
            "PodGroup spec.networkTopology is hard but names no tier (highestTierAllowed or "
            "highestTierName); as in Volcano the job is not constrained", podgroup=uid)
    keyless = [group.name for group in new.sub_groups if not group.match_label_keys]
    if keyless and (old is None or old.sub_groups != new.sub_groups):
        log.warning(
            "PodGroup spec.subGroupPolicy entries without matchLabelKeys select no pod (as in "
            "Volcano): their pods stay in the job's default sub-group", podgroup=uid,
            sub_groups=keyless)
