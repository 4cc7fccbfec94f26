"""kube-scheduler's resource scores on cpu and memory, for every node, kept current per request.

``NodeResourcesLeastAllocated`` / ``MostAllocated`` (each dimension's score is
``floor((allocatable - requested) * 100 / allocatable)`` or ``floor(requested * 100 /
allocatable)``, averaged and floored) and ``NodeResourcesBalancedAllocation`` (``floor((1 -
std of the requested fractions) * 100)``) depend only on a node's requested and allocatable
cpu and memory and on the pod's request. Pods of one job ask for the same request, and
placing a pod changes one node; so :class:`ResourceScores` keeps one weighted score per node
for each request value seen in a session and, when asked again, recomputes only the rows the
table synced since (:attr:`NodeTable.changed_rows`). A few rows are recomputed in plain Python,
with the same IEEE operations in the same order as the vector form, so both give the very
same bits; many rows at once go through the vector form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scheduler.framework.hooks import FloatArray, IntArray
from scheduler.framework.nodetable import NodeTable

__all__ = ["ResourceScores", "balanced_scores", "requested_scores"]

MAX_SCORE = 100.0
_FEW_ROWS = 16
"""Up to this many changed rows are recomputed one by one; beyond, as one vector operation."""
_MAX_REQUESTS = 256
"""Request values kept per session (each holds one float per node); the oldest goes first."""


def requested_scores(
    requested: FloatArray, allocatable: FloatArray, *, least: int, most: int
) -> FloatArray:
    """Weighted least- plus most-requested score per row of ``requested`` (rows × dims)."""
    total = np.zeros(len(requested))
    safe = np.where(allocatable > 0, allocatable, 1.0)
    if least:
        per = np.where(
            (allocatable > 0) & (requested <= allocatable),
            np.floor((allocatable - requested) * MAX_SCORE / safe),
            0.0,
        )
        total += np.floor(per.mean(axis=1)) * least
    if most:
        per = np.where(
            allocatable > 0,
            np.floor(np.minimum(requested, allocatable) * MAX_SCORE / safe),
            0.0,
        )
        total += np.floor(per.mean(axis=1)) * most
    return total


def balanced_scores(requested: FloatArray, allocatable: FloatArray) -> FloatArray:
    """Unweighted balanced-allocation score per row of ``requested`` (rows × dims)."""
    safe = np.where(allocatable > 0, allocatable, 1.0)
    fraction = np.where(allocatable > 0, np.minimum(requested / safe, 1.0), 0.0)
    return np.floor((1.0 - _row_std(fraction)) * MAX_SCORE)


def _row_std(values: FloatArray) -> FloatArray:
    """``values.std(axis=1)`` by the same ufunc steps (so the very same bits) without the
    generic wrapper's per-call cost, which showed on every scored pod."""
    count = values.shape[1]
    mean = np.add.reduce(values, axis=1, keepdims=True)
    np.true_divide(mean, count, out=mean)
    deviation = np.subtract(values, mean)
    np.square(deviation, out=deviation)
    spread = np.add.reduce(deviation, axis=1)
    np.true_divide(spread, count, out=spread)
    return np.sqrt(spread, out=spread)


@dataclass(slots=True)
class _Entry:
    scores: FloatArray
    position: int
    """How far into the table's changed rows ``scores`` is up to date."""


class ResourceScores:
    """Weighted cpu/memory scores of every row of one session's table, per request value."""

    def __init__(self, table: NodeTable, *, least: int, most: int, balanced: int) -> None:
        self.table = table
        self.least, self.most, self.balanced = least, most, balanced
        self._entries: dict[tuple[float, float], _Entry] = {}

    def scores(self, milli_cpu: float, memory: float) -> FloatArray:
        """The weighted score of every row for a pod requesting ``milli_cpu`` and ``memory``
        (shared between calls: read it, never write it)."""
        key = (milli_cpu, memory)
        changed = self.table.changed_rows
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= _MAX_REQUESTS:
                del self._entries[next(iter(self._entries))]
            rows = np.arange(len(self.table), dtype=np.intp)
            entry = _Entry(self._vector(rows, key), len(changed))
            self._entries[key] = entry
        elif entry.position < len(changed):
            stale = changed[entry.position:]
            if len(stale) > _FEW_ROWS:
                rows = np.unique(np.array(stale, dtype=np.intp))
                entry.scores[rows] = self._vector(rows, key)
            else:
                for row in set(stale):
                    entry.scores[row] = self._scalar(row, key)
            entry.position = len(changed)
        return entry.scores

    def _vector(self, rows: IntArray, request: tuple[float, float]) -> FloatArray:
        table = self.table
        requested = table.used[rows, :2]
        requested += np.array(request)
        allocatable = table.allocatable[rows, :2]
        total = requested_scores(requested, allocatable, least=self.least, most=self.most)
        if self.balanced:
            total += balanced_scores(requested, allocatable) * self.balanced
        return total

    def _scalar(self, row: int, request: tuple[float, float]) -> float:
        """:meth:`_vector` for one row, operation for operation."""
        used_cpu, used_memory = self.table.used[row, :2].tolist()
        alloc_cpu, alloc_memory = self.table.allocatable[row, :2].tolist()
        req_cpu, req_memory = used_cpu + request[0], used_memory + request[1]
        total = 0.0
        if self.least:
            per_cpu = _least(req_cpu, alloc_cpu)
            per_memory = _least(req_memory, alloc_memory)
            total += math.floor((per_cpu + per_memory) / 2) * float(self.least)
        if self.most:
            per_cpu = _most(req_cpu, alloc_cpu)
            per_memory = _most(req_memory, alloc_memory)
            total += math.floor((per_cpu + per_memory) / 2) * float(self.most)
        if self.balanced:
            f_cpu = min(req_cpu / alloc_cpu, 1.0) if alloc_cpu > 0 else 0.0
            f_memory = min(req_memory / alloc_memory, 1.0) if alloc_memory > 0 else 0.0
            mean = (f_cpu + f_memory) / 2
            d_cpu, d_memory = f_cpu - mean, f_memory - mean
            std = math.sqrt((d_cpu * d_cpu + d_memory * d_memory) / 2)
            total += math.floor((1.0 - std) * MAX_SCORE) * float(self.balanced)
        return total


def _least(requested: float, allocatable: float) -> float:
    if allocatable > 0 and requested <= allocatable:
        return float(math.floor((allocatable - requested) * MAX_SCORE / allocatable))
    return 0.0


def _most(requested: float, allocatable: float) -> float:
    if allocatable > 0:
        return float(math.floor(min(requested, allocatable) * MAX_SCORE / allocatable))
    return 0.0
