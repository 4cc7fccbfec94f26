"""Node sharding inside a session: which rows of the node table are this scheduler's shard.

Volcano (1.14+) applies the shard in two ways, both kept here over the node table:

* **hard** — a node outside the shard fails the predicates with ``node isn't in scheduler
  node shard``, before any other check (``PredicateNodes``, pkg/scheduler/util/
  predicate_helper.go); the session ANDs :attr:`ShardView.mask` into its predicate and
  preempt masks, so allocate, backfill, preempt and reclaim all see the same rule.
* **soft** — every node stays feasible, and the candidates are tried in shard order: allocate
  picks from idle fits in the shard, then idle fits outside it, then future-idle fits in the
  shard, then outside (``prioritizeNodes``, pkg/scheduler/actions/allocate/allocate.go);
  backfill, preempt and reclaim try the shard's nodes before the others
  (``GetPredicatedNodeByShard``). :func:`shard_first` splits rows that way.

``none`` (or no scope at all) changes nothing.
"""

from __future__ import annotations

import numpy as np

from scheduler.api.nodeshard import HARD_SHARDING, SOFT_SHARDING, ShardScope
from scheduler.framework.hooks import BoolArray, IntArray
from scheduler.framework.nodetable import NodeTable

__all__ = ["ShardView", "shard_first"]


class ShardView:
    """The shard as a boolean mask over a session's node table."""

    __slots__ = ("hard", "mask", "soft")

    def __init__(self, scope: ShardScope | None, table: NodeTable) -> None:
        self.hard = scope is not None and scope.mode == HARD_SHARDING
        self.soft = scope is not None and scope.mode == SOFT_SHARDING
        if scope is None or not (self.hard or self.soft):
            self.mask: BoolArray = np.ones(len(table), dtype=bool)
            return
        nodes = scope.nodes
        self.mask = np.fromiter((node.name in nodes for node in table.nodes), dtype=bool,
                                count=len(table))

    def split(self, rows: IntArray) -> list[IntArray]:
        """``rows`` as the groups to try in order: in soft mode the shard's rows, then the
        others (either may be empty); otherwise ``rows`` alone."""
        if not self.soft:
            return [rows]
        inside = self.mask[rows]
        return [rows[inside], rows[~inside]]


def shard_first(view: ShardView, rows: IntArray) -> IntArray:
    """``rows`` with the shard's rows first, each group in its given order (soft mode)."""
    if not view.soft or len(rows) < 2:
        return rows
    return np.concatenate(view.split(rows))
