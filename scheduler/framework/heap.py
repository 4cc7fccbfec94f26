"""A priority queue ordered by a session comparator (negative = first)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Generic, TypeVar

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
    """Items pop in comparator order, insertion order on ties. Re-push to re-prioritise.

    With ``key`` (``cmp(a, b)`` being the sign of comparing ``key(a)`` with ``key(b)``),
    each item's key is taken when it is pushed and the heap compares ``(key, seq)`` tuples
    natively: the same comparisons with the same outcomes, hence the same pops, for a caller
    whose queued items keep their keys while queued (an item that changes is popped first
    and pushed again, as the actions do with the job they work on)."""

    def __init__(self, cmp: Callable[[T, T], int], items: list[T] | None = None,
                 *, key: Callable[[T], Any] | None = None) -> None:
        self._cmp = cmp
        self._key = key
        self._seq = 0
        self._heap: list[Any] = []
        for item in items or []:
            self.push(item)

    def push(self, item: T) -> None:
        self._seq += 1
        if self._key is not None:
            heapq.heappush(self._heap, (self._key(item), self._seq, item))
        else:
            heapq.heappush(self._heap, _Entry(item, self._seq, self._cmp))

    def pop(self) -> T:
        if self._key is not None:
            item: T = heapq.heappop(self._heap)[2]
            return item
        return heapq.heappop(self._heap).item

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
