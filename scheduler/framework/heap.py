"""A priority queue ordered by a session comparator (negative = first)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PriorityQueue"]

T = TypeVar("T")


class _Entry(Generic[T]):
    __slots__ = ("cmp", "item", "seq")

    def __init__(self, item: T, seq: int, cmp: Callable[[T, T], int]) -> None:
        self.item = item
        self.seq = seq
        self.cmp = cmp

    def __lt__(self, other: _Entry[T]) -> bool:
        result = self.cmp(self.item, other.item)
        return result < 0 if result else self.seq < other.seq


class PriorityQueue(Generic[T]):
    """Items pop in comparator order, insertion order on ties. Re-push to re-prioritise."""

    def __init__(self, cmp: Callable[[T, T], int], items: list[T] | None = None) -> None:
        self._cmp = cmp
        self._seq = 0
        self._heap: list[_Entry[T]] = []
        for item in items or []:
            self.push(item)

    def push(self, item: T) -> None:
        self._seq += 1
        heapq.heappush(self._heap, _Entry(item, self._seq, self._cmp))

    def pop(self) -> T:
        return heapq.heappop(self._heap).item

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
