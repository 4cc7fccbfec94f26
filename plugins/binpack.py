"""binpack: prefer the nodes that will be fullest after placing the pod.

``score = Σ_r w_r · (used_r + request_r) / allocatable_r ÷ Σ_r w_r × 100 × binpack.weight``
over the resources the pod requests that carry a weight (cpu, memory and the names listed in
``binpack.resources``). A resource the node does not have adds 0 but its weight still counts;
a node that would overflow any weighted resource scores 0. A negative resource weight counts
as 1, as in Volcano; a negative ``binpack.weight`` turns the score around (the emptiest nodes
win), as in Volcano. Both are warned about at conf load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.api.resource import CPU, MEMORY, MIN_RESOURCE
from scheduler.api.task import TaskInfo
from scheduler.framework.arguments import (
    arg,
    extra_args,
    listed_weights,
    negative_weights,
    note,
    notes_field,
)
from scheduler.framework.hooks import FloatArray, IntArray
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.plugin import PluginBase

__all__ = ["Binpack", "BinpackArgs"]

_PREFIX = "binpack.resources."


@dataclass(frozen=True, slots=True)
class BinpackArgs:
    weight: int = arg("binpack.weight", 1)
    cpu: int = arg("binpack.cpu", 1)
    memory: int = arg("binpack.memory", 1)
    resources: str = arg("binpack.resources", "")
    resource_weights: dict[str, Any] = extra_args(_PREFIX)
    weights: dict[str, int] = field(init=False, default_factory=dict)
    notes: tuple[str, ...] = notes_field()

    def __post_init__(self) -> None:
        negative_weights(self, "weight")
        weights = listed_weights(self, prefix=_PREFIX, list_key="binpack.resources",
                                 resources=self.resources, weights=self.resource_weights,
                                 negative=self._non_negative)
        # binpack.cpu / binpack.memory win over the same names listed in binpack.resources.
        weights[CPU] = self._non_negative("binpack.cpu", self.cpu)
        weights[MEMORY] = self._non_negative("binpack.memory", self.memory)
        object.__setattr__(self, "weights", weights)

    def _non_negative(self, key: str, value: int) -> int:
        """A negative resource weight counts as 1, as in Volcano's ``calculateWeight``."""
        if value >= 0:
            return value
        note(self, f"argument {key!r} is {value}: a negative resource weight counts as 1, as "
                   f"in Volcano")
        return 1


class Binpack(PluginBase[BinpackArgs]):
    NAME = "binpack"
    Args = BinpackArgs

    def __init__(self, args: BinpackArgs) -> None:
        super().__init__(args)
        self._table: NodeTable | None = None
        self._kept: dict[tuple[tuple[int, ...], tuple[float, ...]], _Kept] = {}

    def score_nodes(self, task: TaskInfo, table: NodeTable, candidates: IntArray) -> FloatArray:
        if self.args.weight == 0:
            return np.zeros(len(candidates))
        cols, weights, requests, weight_sum = self.request_columns(task, table)
        if not cols:  # also when weight_sum is 0
            return np.zeros(len(candidates))
        return self._every_row(table, cols, weights, requests, weight_sum)[candidates]

    def request_columns(self, task: TaskInfo, table: NodeTable
                        ) -> tuple[list[int], list[float], list[float], float]:
        """The table columns ``task`` asks for with a weight, their weights and requests, and
        the weight sum (which counts a weighted resource no node has: it scores 0 there)."""
        cols: list[int] = []
        weights: list[float] = []
        requests: list[float] = []
        weight_sum = 0.0
        for name, weight in self.args.weights.items():
            request = task.resreq.get(name)
            if request < MIN_RESOURCE or weight <= 0:
                continue
            weight_sum += weight
            col = table.dim_index.get(name)
            if col is None:
                continue  # no node has it: contributes 0, weight still counts
            cols.append(col)
            weights.append(weight)
            requests.append(request)
        return cols, weights, requests, weight_sum

    def _every_row(self, table: NodeTable, cols: list[int], weights: list[float],
                   requests: list[float], weight_sum: float) -> FloatArray:
        """The scores of every row for one request, kept per request value and recomputed
        only on the rows the table synced since (a placement changes one node's ``used``),
        so a pod costs its candidates' lookup, not their arithmetic. The weights and the
        weight sum follow from the request columns and this plugin's arguments."""
        if self._table is not table:
            self._table, self._kept = table, {}
        key = (tuple(cols), tuple(requests))
        changed = table.changed_rows
        kept = self._kept.get(key)
        if kept is None:
            if len(self._kept) >= _MAX_KEPT:
                del self._kept[next(iter(self._kept))]
            rows = np.arange(len(table), dtype=np.intp)
            kept = self._kept[key] = _Kept(
                self._scores(table, rows, cols, weights, requests, weight_sum), len(changed))
        elif kept.position < len(changed):
            stale = set(changed[kept.position:])
            if len(stale) <= _FEW_ROWS and len(cols) < _SEQUENTIAL_SUM:
                for row in stale:
                    kept.scores[row] = self._scalar(table, row, cols, weights, requests,
                                                    weight_sum)
            else:
                rows = np.array(sorted(stale), dtype=np.intp)
                kept.scores[rows] = self._scores(table, rows, cols, weights, requests,
                                                 weight_sum)
            kept.position = len(changed)
        return kept.scores

    def _scalar(self, table: NodeTable, row: int, cols: list[int], weights: list[float],
                requests: list[float], weight_sum: float) -> float:
        """:meth:`_scores` of one row, operation for operation (so the very same bits: numpy
        sums fewer than ``_SEQUENTIAL_SUM`` terms left to right, as here)."""
        used_row, allocatable_row = table.used[row].tolist(), table.allocatable[row].tolist()
        total = 0.0
        for i, (col, weight, request) in enumerate(zip(cols, weights, requests, strict=True)):
            used, allocatable = used_row[col] + request, allocatable_row[col]
            if allocatable > 0 and used > allocatable:
                return 0.0
            term = (used / allocatable if allocatable > 0 else 0.0) * float(weight)
            total = term if i == 0 else total + term
        return total / weight_sum * 100.0 * float(self.args.weight)

    def _scores(self, table: NodeTable, candidates: IntArray, cols: list[int],
                weights: list[float], requests: list[float], weight_sum: float) -> FloatArray:
        """The scores of the rows ``candidates``; each row's score depends on its row alone."""
        used = table.used[np.ix_(candidates, np.array(cols, dtype=np.intp))] + np.array(requests)
        allocatable = table.allocatable[np.ix_(candidates, np.array(cols, dtype=np.intp))]
        overflow = np.any((allocatable > 0) & (used > allocatable), axis=1)
        ratio = np.where(allocatable > 0, used / np.where(allocatable > 0, allocatable, 1.0), 0.0)
        score = (ratio * np.array(weights)).sum(axis=1) / weight_sum * 100.0 * self.args.weight
        return np.where(overflow, 0.0, score)


_FEW_ROWS = 16
"""Up to this many changed rows are rescored one by one; beyond, as one vector operation."""
_SEQUENTIAL_SUM = 8
"""numpy sums fewer terms than this one after the other (more go pairwise)."""
_MAX_KEPT = 64
"""Request values whose scores a session keeps (one float per node each); the oldest goes
first."""


@dataclass(slots=True)
class _Kept:
    scores: FloatArray
    position: int
    """How far into the table's changed rows ``scores`` is up to date."""
