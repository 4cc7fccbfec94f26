"""When a long-running scheduler lets Python's cyclic garbage collector walk its objects.

CPython's full collection walks every tracked object that is not frozen, holding the GIL, and
it runs whenever the objects that survived younger collections have grown by a quarter. A
scheduler that keeps receiving pods grows its cache steadily, so on a 2-core machine with a
few thousand pods arriving at 200/s a full collection ran every ~6 s and stopped every thread
(binds, watches, the cycle) for 0.1–0.5 s, each time finding nothing to free: the cache and
the cycle make no reference cycles (:meth:`Session.release` unlinks the one a session made).

:class:`Collector` freezes (:func:`gc.freeze`) whatever survives a cycle, so automatic
collections only walk what was made since; freezing is a constant-time move of lists.
Something that becomes cyclic garbage after it was frozen is not freed until the next full
collection, so one runs, unfrozen, whenever the heap has grown by ``growth`` (by default:
doubled) since the last one. That bounds what could leak to the size of the live heap and
makes full collections rare and amortised, as CPython's own rule is, but on the whole heap.
A full collection still stops every thread for a few tenths of a second, so while the scheduler
is busy (binds went out since the last cycle, or writes are waiting) it waits until the heap
has grown by ``busy_growth`` (by default: four times), and runs at the first quiet cycle after
``growth``.
The young generations are collected after ``young[0]`` new container objects instead of
CPython's 700: a cycle makes and drops many short-lived dicts, tuples and lists, and at 700 it
ran a young collection every few hundred placements, each walking what had just been made
(about 11% of a busy cycle's time in a 250-pods-a-cycle stream; 5% at 10,000). What survives
still goes to the frozen set after the cycle.

The heap is measured by :func:`sys.getallocatedblocks` (about 1 ms for 12 million blocks),
not by :func:`gc.get_freeze_count`, which walks the frozen list (90 ms for 4 million).
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import structlog

__all__ = ["Collector"]

log = structlog.get_logger("lahar.collector")


@dataclass(slots=True)
class Collector:
    growth: float = 1.0
    """A full collection runs once the heap exceeds ``(1 + growth)`` times what the last one
    left..."""
    busy_growth: float = 3.0
    """...or, after a busy cycle, ``(1 + busy_growth)`` times."""
    young: tuple[int, int, int] = (10_000, 10, 10)
    """Thresholds of the three generations (:func:`gc.set_threshold`), set by :meth:`settle`."""
    collector: ModuleType = gc
    heap: Callable[[], int] = sys.getallocatedblocks
    clock: Callable[[], float] = time.perf_counter
    baseline: int = 0
    full_collections: int = 0

    def settle(self) -> None:
        """Freeze what is alive now (after the first mirror has loaded: those objects live as
        long as the process) and take it as the baseline; set the young thresholds."""
        self.collector.set_threshold(*self.young)
        self.collector.freeze()
        self.baseline = self.heap()

    def after_cycle(self, *, busy: bool = False) -> None:
        """Freeze what survived this cycle; run a full collection when the heap has grown
        past the threshold (the higher one when ``busy``)."""
        self.collector.freeze()
        heap = self.heap()
        growth = self.busy_growth if busy else self.growth
        if heap <= max(self.baseline, 1) * (1.0 + growth):
            return
        started = self.clock()
        self.collector.unfreeze()
        freed = self.collector.collect()
        self.collector.freeze()
        self.baseline = self.heap()
        self.full_collections += 1
        log.info("full garbage collection", blocks_before=heap, blocks_after=self.baseline,
                 unreachable=freed, seconds=round(self.clock() - started, 3))
