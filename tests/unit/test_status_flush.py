"""The status writer at stop: state before events, a wide flush, and what was left counted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from scheduler.cache.statuswriter import CoalescingWriter, is_event


def test_event_keys_are_told_from_state_keys() -> None:
    assert is_event(("event", "7"))
    assert is_event(("event Scheduled", "Pod ns/p uid"))
    assert is_event(("podgroup-event", "ns/pg"))
    assert not is_event(("pod", "ns/p"))
    assert not is_event(("podgroup", "ns/pg"))
    assert not is_event(("queue", "default"))
    assert not is_event("event")


def test_queued_state_goes_out_before_queued_events() -> None:
    order: list[str] = []
    writer = CoalescingWriter(workers=1)  # started after queueing: the order is the writer's
    for number in range(3):
        writer.put(("event Scheduled", f"p{number}"), lambda n=number: order.append(f"e{n}"))
        writer.put(("pod", f"p{number}"), lambda n=number: order.append(f"s{n}"))
    writer.flush_workers = 0
    writer.start()
    assert writer.stop(timeout=5.0)
    assert order == ["s0", "s1", "s2", "e0", "e1", "e2"]


def test_flush_writes_from_many_threads_at_once() -> None:
    """A burst's backlog at stop is written by ``flush_workers`` threads, not the two that
    trickle beside binds: with 40 writes of 50 ms each, two workers would need a second."""
    active = 0
    most = 0
    lock = threading.Lock()

    def slow() -> None:
        nonlocal active, most
        with lock:
            active += 1
            most = max(most, active)
        time.sleep(0.05)
        with lock:
            active -= 1

    writer = CoalescingWriter(workers=2, flush_workers=16).start()
    hold = threading.Event()
    writer.yield_to = lambda: not hold.is_set()  # binds "busy": the workers trickle
    writer.trickle = 10.0
    for number in range(40):
        writer.put(("pod", f"p{number}"), slow)
    assert writer.stop(timeout=5.0)
    assert writer.written == 40
    assert most >= 8
    assert (writer.left_state, writer.left_events) == (0, 0)


def test_what_the_grace_period_leaves_is_counted_state_and_events_apart() -> None:
    gate = threading.Event()

    def blocked() -> None:
        gate.wait(5.0)

    writer = CoalescingWriter(workers=1, flush_workers=0)
    writer.put(("pod", "a"), blocked)
    writer.put(("pod", "b"), blocked)
    writer.put(("event", "1"), lambda: None)
    writer.start()
    time.sleep(0.05)  # "a" in flight
    assert not writer.stop(timeout=0.1)
    gate.set()
    assert (writer.left_state, writer.left_events) == (1, 1)


def test_flush_helpers_leave_when_the_flush_ends() -> None:
    writer = CoalescingWriter(workers=1, flush_workers=4).start()
    writes: list[Callable[[], None]] = [lambda: time.sleep(0.01) for _ in range(8)]
    for number, write in enumerate(writes):
        writer.put(("pod", str(number)), write)
    assert writer.flush(5.0)
    deadline = time.monotonic() + 2.0
    while (any(t.name.startswith("status-flush-") for t in threading.enumerate())
           and time.monotonic() < deadline):
        time.sleep(0.01)
    assert not any(t.name.startswith("status-flush-") for t in threading.enumerate())
    assert writer.stop(timeout=1.0)
