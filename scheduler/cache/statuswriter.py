"""The asynchronous writer of events, pod conditions and PodGroup / Queue status.

These writes report on decisions; none of them is a decision. They go out on their own worker
threads so they never delay a bind, and they are coalesced per object: a write is queued under
a key naming what it writes (``("pod", "ns/name")``, ``("podgroup", …)``, ``("queue", …)``), a
newer write under the same key replaces the queued one (latest state wins), and a key is never
written by two workers at once (at most one write in flight per object). N changes of one pod's
condition while the writer is busy thus become one write of the last.

While binds are queued (``yield_to``) the workers trickle: together they start at most one write
per ``trickle`` seconds, so status traffic takes the API server's spare capacity, not the
binds', and still makes progress during a long burst of binds.

Queued state is a dirty set: one entry per object, holding its latest write, so it can never
hold more than the objects the cache mirrors and it takes every write (a restart that has
40,000 new PodGroups to report queues 40,000 entries and loses none). Only the events are
bounded: an event that finds ``capacity`` writes queued is dropped, as kube-scheduler's event
broadcaster drops what its buffer cannot take. ``lost(key)`` is told of a drop, as it is of a
write that failed, so the cache can forget what it believed written and write it again in a
later cycle.

Writes are of two kinds. State (a pod's condition, a PodGroup's or Queue's status) is what a
user and the next scheduler read; events are history and best effort, as in kube-scheduler.
Queued state always goes out before queued events, and :meth:`CoalescingWriter.flush` (shutdown,
loss of the Lease) writes from ``flush_workers`` extra threads, so a stop within its grace
period writes every state change even at the end of a large burst; what is still left when the
grace ends is counted, state and events apart.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import structlog

from scheduler.cache.interface import WriteError

__all__ = ["CoalescingWriter", "Write", "is_event"]

log = structlog.get_logger("lahar.statuswriter")

Write = Callable[[], None]


def is_event(key: Hashable) -> bool:
    """Whether the write queued under ``key`` records an Event (best effort) rather than
    state: the keys ``("event", …)``, ``("event <reason>", …)`` and ``("podgroup-event", …)``."""
    return (isinstance(key, tuple) and bool(key) and isinstance(key[0], str)
            and (key[0].startswith("event") or key[0] == "podgroup-event"))


@dataclass(slots=True)
class CoalescingWriter:
    """Latest-wins, one-in-flight-per-key background writes (see the module docstring)."""

    workers: int = 2
    capacity: int = 20_000
    """Queued writes past which an event is dropped (state is never dropped)."""
    yield_to: Callable[[], bool] | None = None
    trickle: float = 0.1
    lost: Callable[[Hashable], None] | None = None
    flush_workers: int = 16
    _pending: OrderedDict[Hashable, Write] = field(default_factory=OrderedDict)
    _events: OrderedDict[Hashable, Write] = field(default_factory=OrderedDict)
    _inflight: set[Hashable] = field(default_factory=set)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _threads: list[threading.Thread] = field(default_factory=list)
    _closed: bool = False
    _flushing: int = 0
    _last_start: float = 0.0
    written: int = 0
    coalesced: int = 0
    dropped: int = 0
    failed: int = 0
    left_state: int = 0
    left_events: int = 0

    def start(self) -> CoalescingWriter:
        for number in range(self.workers):
            thread = threading.Thread(target=self._work, daemon=True,
                                      name=f"status-writer-{number}")
            thread.start()
            self._threads.append(thread)
        return self

    def put(self, key: Hashable, write: Write) -> bool:
        """Queue ``write`` for ``key``, replacing a queued one; never blocks.

        False when the write was dropped (an event finding ``capacity`` writes queued, or the
        writer stopped); state is always taken while the writer runs.
        """
        event = is_event(key)
        queue = self._events if event else self._pending
        with self._cond:
            accepted = not self._closed and (
                not event or key in queue
                or len(self._pending) + len(self._events) < self.capacity)
            if accepted:
                if key in queue:
                    self.coalesced += 1
                queue[key] = write
                self._cond.notify()
            else:
                self.dropped += 1
        if not accepted:
            if self.dropped % 1000 == 1:  # the first, then every thousandth: no log flood
                log.warning("events dropped: queue full",
                            dropped=self.dropped, capacity=self.capacity, key=repr(key))
            self._lose(key)
        return accepted

    @property
    def backlog(self) -> int:
        with self._cond:
            return len(self._pending) + len(self._events) + len(self._inflight)

    def flush(self, timeout: float | None = None) -> bool:
        """Write everything queued now, without holding back for binds and from
        ``flush_workers`` extra threads while anything is left; False on timeout."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
        helpers = [threading.Thread(target=self._work, kwargs={"while_flushing": True},
                                    daemon=True, name=f"status-flush-{number}")
                   for number in range(min(self.flush_workers, self.backlog))]
        for thread in helpers:
            thread.start()
        try:
            with self._cond:
                return self._cond.wait_for(self._drained, timeout)
        finally:
            with self._cond:
                self._flushing -= 1
                self._cond.notify_all()

    def stop(self, *, timeout: float = 10.0) -> bool:
        """Flush for at most ``timeout`` seconds, then stop the workers; False if writes were
        left unwritten (counted in :attr:`left_state` and :attr:`left_events`)."""
        started = time.monotonic()
        queued = self.backlog
        written = self.written
        flushed = self.flush(timeout)
        with self._cond:
            self._closed = True
            self.left_state = len(self._pending)
            self.left_events = len(self._events)
            self._pending.clear()
            self._events.clear()
            self._cond.notify_all()
        log.info("status writes flushed at stop", queued=queued, written=self.written - written,
                 seconds=round(time.monotonic() - started, 3), left_state=self.left_state,
                 left_events=self.left_events)
        if self.left_state or self.left_events:
            log.warning("status writes left unwritten at stop", count=self.left_state,
                        events=self.left_events, timeout=timeout)
        for thread in self._threads:
            thread.join(1.0)
        return flushed

    def _drained(self) -> bool:
        return not self._pending and not self._events and not self._inflight

    def _next(self) -> tuple[Hashable, Write] | None:
        """The oldest queued state write whose key is not in flight, else the oldest such
        event (under the lock)."""
        for queue in (self._pending, self._events):
            for key, write in queue.items():
                if key not in self._inflight:
                    del queue[key]
                    self._inflight.add(key)
                    return key, write
        return None

    def _hold_back(self) -> float:
        """Seconds to wait before the next write may start (0 = go), under the lock."""
        if self.yield_to is None or self._flushing or self._closed or not self.yield_to():
            return 0.0
        return max(0.0, self._last_start + self.trickle - time.monotonic())

    def _work(self, *, while_flushing: bool = False) -> None:
        while True:
            with self._cond:
                while True:
                    queued = bool(self._pending or self._events)
                    if (self._closed and not queued) or (while_flushing and not self._flushing):
                        return
                    if queued:
                        delay = self._hold_back()
                        if delay > 0:
                            self._cond.wait(delay)
                            continue
                        picked = self._next()
                        if picked is not None:
                            self._last_start = time.monotonic()
                            break
                    self._cond.wait()  # nothing queued, or every queued key in flight
                key, write = picked
            ok = self._write(key, write)
            with self._cond:
                self._inflight.discard(key)
                if ok:
                    self.written += 1
                else:
                    self.failed += 1
                self._cond.notify_all()
            if not ok:
                self._lose(key)

    def _write(self, key: Hashable, write: Write) -> bool:
        try:
            write()
        except WriteError as error:
            log.warning("status write failed", key=repr(key), status=error.status,
                        error=str(error))
            return False
        except Exception:
            log.exception("status write failed", key=repr(key))
            return False
        return True

    def _lose(self, key: Hashable) -> None:
        if self.lost is not None:
            try:
                self.lost(key)
            except Exception:
                log.exception("forgetting a lost status write failed", key=repr(key))
