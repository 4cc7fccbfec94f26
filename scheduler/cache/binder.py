"""A bounded pool of bind workers, so binds go out at the speed of the API server.

The session commits a gang and the cache marks its tasks Binding at once (Volcano's
``AddBindTask``); the Binding POSTs then run here, on ``workers`` threads, while the session goes
on scheduling. One POST per pod is what both Volcano (a goroutine per bind batch) and
kube-scheduler (a goroutine per pod) do; a serial write path caps a cycle at one round trip per
pod.

Queued binds leave oldest pod first when the pool is given an ``order`` (``lahar run`` passes
the order in which the cache first saw each pod): a session places pods in its job order, not in
order of arrival, and under a steady stream of pods a burst of a few hundred binds can take the
API server a second to drain; the pod that has waited longest for its cycle is then sent first
instead of behind the whole burst. This changes no placement, only the order of the writes.

The queue is bounded (Volcano's ``BindFlowChannel`` holds 5,000): a full queue makes
:meth:`BindPool.submit` wait, which slows the session down instead of piling up memory. Every
bind passes ``gate`` right before it is sent; once the gate says no (the leader Lease is lost) a
queued bind is handed to ``dropped`` instead of being sent, so no bind leaves after the loss.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import structlog

__all__ = ["BindPool"]

log = structlog.get_logger("lahar.binder")

T = TypeVar("T")


def _always() -> bool:
    return True


@dataclass(slots=True)
class BindPool(Generic[T]):
    """Runs ``send(item)`` for every submitted item on ``workers`` daemon threads.

    ``dropped(item)`` gets the items that were never sent because the gate closed or the pool
    was stopped without draining. ``send`` must not raise; an exception is logged and counted.
    ``order(item)`` ranks queued items (lowest first, ties in submit order); without it the
    queue is first in, first out.
    """

    send: Callable[[T], None]
    workers: int = 16
    capacity: int = 5000
    gate: Callable[[], bool] = _always
    dropped: Callable[[T], None] | None = None
    name: str = "bind"
    order: Callable[[T], int] | None = None
    _queue: list[tuple[int, int, T]] = field(default_factory=list)
    """A heap of ``(rank, submit number, item)``."""
    _submitted: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _items: threading.Condition = field(init=False)
    """Workers wait here for a bind (one is woken per bind, not all of them)."""
    _room: threading.Condition = field(init=False)
    """A submit waits here while the queue is full."""
    _idle: threading.Condition = field(init=False)
    """Drain and stop wait here for the queue and the workers to be done."""
    _active: int = 0
    _threads: list[threading.Thread] = field(default_factory=list)
    _closed: bool = False
    _last_done: float = float("-inf")
    sent: int = 0
    failed: int = 0
    discarded: int = 0

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"a bind pool needs at least one worker, got {self.workers}")
        if self.capacity < 1:
            raise ValueError(f"a bind pool needs a capacity of at least 1, got {self.capacity}")
        self._items = threading.Condition(self._lock)
        self._room = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)

    def start(self) -> BindPool[T]:
        for number in range(self.workers):
            thread = threading.Thread(target=self._work, daemon=True,
                                      name=f"{self.name}-{number}")
            thread.start()
            self._threads.append(thread)
        return self

    def submit(self, item: T) -> bool:
        """Queue ``item``, waiting while the queue is full; False once the pool is closed."""
        number = next(self._submitted)
        entry = (number if self.order is None else self.order(item), number, item)
        with self._lock:
            while len(self._queue) >= self.capacity and not self._closed:
                self._room.wait(0.1)
            if self._closed:
                closed = True
            else:
                closed = False
                heapq.heappush(self._queue, entry)
                self._items.notify()
        if closed:
            self._drop(item)
        return not closed

    @property
    def backlog(self) -> int:
        """Binds queued or being sent."""
        with self._lock:
            return len(self._queue) + self._active

    def busy(self) -> bool:
        return self.backlog > 0

    def recently_busy(self, within: float = 0.5) -> bool:
        """Busy now, or a bind finished less than ``within`` seconds ago: a burst's binds come
        commit by commit, and the queue may be empty for a moment between two of them."""
        return self.busy() or time.monotonic() - self._last_done < within

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued bind was sent (or dropped); False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._queue and not self._active, timeout)

    def stop(self, *, drain: bool, timeout: float = 30.0) -> None:
        """Stop taking binds; send what is queued first when ``drain``, else drop it.

        Waits at most ``timeout`` for the binds in flight; what is still queued after that is
        dropped.
        """
        if drain:
            self.drain(timeout)
        with self._lock:
            self._closed = True
            left = [item for _, _, item in sorted(self._queue)]
            self._queue.clear()
            self._items.notify_all()
            self._room.notify_all()
            self._idle.notify_all()
        for item in left:
            self._drop(item)
        with self._lock:
            self._idle.wait_for(lambda: not self._active, timeout)
        for thread in self._threads:
            thread.join(1.0)

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._items.wait()
                if not self._queue:
                    return
                item = heapq.heappop(self._queue)[2]
                self._active += 1
                self._room.notify()  # room for a waiting submit
            outcome = "dropped"
            try:
                if self.gate():
                    outcome = self._send(item)
                else:
                    self._drop(item)
            finally:
                with self._lock:
                    self._active -= 1
                    self._last_done = time.monotonic()
                    if outcome == "sent":
                        self.sent += 1
                    elif outcome == "failed":
                        self.failed += 1
                    if not self._queue and not self._active:
                        self._idle.notify_all()

    def _send(self, item: T) -> str:
        try:
            self.send(item)
        except Exception:
            log.exception("bind worker failed", pool=self.name)
            return "failed"
        return "sent"

    def _drop(self, item: T) -> None:
        with self._lock:
            self.discarded += 1
        if self.dropped is not None:
            try:
                self.dropped(item)
            except Exception:
                log.exception("rolling back an unsent bind failed", pool=self.name)
