"""Where the loop hands its closed session to the web view, once per cycle.

:class:`Publisher` is the loop's ``on_close`` hook. Every cycle it notes the cycle's time (a
few floats in a 15-minute ring); it builds a new :class:`~scheduler.web.view.View` only when a
reader asked for one within :attr:`Publisher.interest_seconds` (or when told to build always,
as ``simulate --html`` is), at most once per :attr:`Publisher.min_interval`, so a scheduler
nobody watches pays nothing for its web view and a watched one pays once a second. A build
also waits until the loop has run for its cost divided by :attr:`Publisher.budget` since the
last one, so on a large cluster, where a build takes longer, the view is refreshed less often
but never takes more than that share of the loop's time (2 %: a 40 ms build waits 2 s). The
view is swapped in with one reference assignment: readers on other threads take
:meth:`Publisher.current` and never see a half-built picture.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler import metrics
from scheduler.web.view import Memo, View, build_view

__all__ = ["HISTORY_SECONDS", "Point", "Publisher"]

_log = logging.getLogger(__name__)

HISTORY_SECONDS = 15 * 60.0
"""How far back the overview's cycle times and chart reach."""


@dataclass(frozen=True, slots=True)
class Point:
    at: float
    cycle_seconds: float
    pending: int | None
    bound: int | None


class Publisher:
    """Keeps the latest :class:`View` and the recent cycle history (thread-safe reads)."""

    def __init__(self, *, clock: Callable[[], float] = time.time, always: bool = False,
                 interest_seconds: float = 30.0, min_interval: float = 1.0,
                 budget: float = 0.02, timer: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.timer = timer
        """Measures a build's duration (the loop's time it took)."""
        self.budget = budget
        """The share of the loop's time the builds may take (not applied when ``always``)."""
        self.always = always
        self.interest_seconds = interest_seconds
        self.min_interval = min_interval
        """Seconds between two builds at most (every cycle when ``always``)."""
        self.cycles = 0
        self.last_build_seconds = 0.0
        self._asked = float("-inf")
        self._view: View | None = None
        self._history: deque[Point] = deque()
        self._lock = threading.Lock()
        self._memo = Memo()

    def ask(self) -> View | None:
        """A reader's request: note the interest, hand out the latest view (None before the
        first one is built)."""
        self._asked = self.clock()
        return self._view

    def current(self) -> View | None:
        return self._view

    def history(self) -> list[Point]:
        with self._lock:
            return list(self._history)

    def __call__(self, session: Any, stats: Any) -> None:
        """The loop's hook: ``session`` is closed and not yet released."""
        now = self.clock()
        self.cycles += 1
        view = None
        due = self._view is None or now - self._view.built_at >= max(
            self.min_interval, self.last_build_seconds / self.budget)
        if self.always or (due and now - self._asked <= self.interest_seconds):
            started = self.timer()
            try:
                data = build_view(session, now=now, memo=self._memo)
            except Exception:  # the web view never stops the scheduler
                _log.exception("building the web view failed")
                return
            self.last_build_seconds = self.timer() - started
            metrics.VIEW_BUILD.set(self.last_build_seconds)
            view = View(cycle=self.cycles, built_at=now, build_seconds=self.last_build_seconds,
                        data=data)
        point = Point(at=now, cycle_seconds=float(stats.seconds),
                      pending=view.data["overview"]["pods_pending"] if view else None,
                      bound=view.data["overview"]["pods_bound"] if view else None)
        with self._lock:
            self._history.append(point)
            while self._history and now - self._history[0].at > HISTORY_SECONDS:
                self._history.popleft()
        if view is not None:
            self._view = view

    def summary(self) -> dict[str, Any]:
        """Cycle time last/p50/p99 and binds per second over the history, and the chart's
        points."""
        points = self.history()
        times = sorted(p.cycle_seconds for p in points)

        def pick(q: float) -> float:
            return times[min(int(q * len(times)), len(times) - 1)] if times else 0.0

        bound = [p for p in points if p.bound is not None]
        window = bound[-1].at - bound[0].at if len(bound) > 1 else 0.0
        rate = (max(bound[-1].bound - bound[0].bound, 0) / window  # type: ignore[operator]
                if window > 0 else 0.0)
        return {
            "cycles": self.cycles,
            "cycle_seconds": {"last": points[-1].cycle_seconds if points else 0.0,
                              "p50": pick(0.5), "p99": pick(0.99)},
            "binds_per_second": rate, "window_seconds": window,
            "view_build_seconds": self.last_build_seconds,
            "history": [{"at": p.at, "cycle_seconds": p.cycle_seconds, "pending": p.pending}
                        for p in points],
        }
