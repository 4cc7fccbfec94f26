"""The cache's HyperNodes: objects applied one event at a time, the tree rebuilt on demand.

A HyperNode event replaces or drops one parsed object. The tree (:func:`build_tree`) depends
on the HyperNodes and on which nodes exist and their labels, so it is rebuilt at the next
snapshot after either changes, and handed to every snapshot until then (sessions only read it).
What the tree builder warns about is logged once per distinct message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from scheduler.api.hypernode import HyperNode, HyperNodeTree, build_tree, hypernode_from_object
from scheduler.api.node import NodeInfo

__all__ = ["HyperNodeStore"]

log = structlog.get_logger("lahar.cache")


class HyperNodeStore:
    __slots__ = ("_reported", "_tree", "objects")

    def __init__(self) -> None:
        self.objects: dict[str, HyperNode] = {}
        self._tree: HyperNodeTree | None = None
        self._reported: set[str] = set()

    def apply(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        """One HyperNode event; a malformed object raises ``ObjectError`` (the last readable
        version stays)."""
        if deleted:
            name = str((obj.get("metadata") or {}).get("name") or "")
            if self.objects.pop(name, None) is not None:
                self._tree = None
            return
        hypernode = hypernode_from_object(obj)
        if self.objects.get(hypernode.name) != hypernode:
            self.objects[hypernode.name] = hypernode
            self._tree = None

    def node_changed(self, old: NodeInfo | None, new: NodeInfo | None) -> None:
        """A node was added, deleted or relabelled: members may pick other nodes now."""
        if not self.objects:
            return
        if old is None or new is None or old.labels != new.labels:
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
