"""The bind pool's queue: first in, first out, or by a rank the caller gives."""

from __future__ import annotations

import threading

from scheduler.cache.binder import BindPool


def _held_pool(order: dict[str, int] | None) -> tuple[BindPool[str], list[str], threading.Event]:
    sent: list[str] = []
    release = threading.Event()

    def send(item: str) -> None:
        release.wait(5.0)
        sent.append(item)

    pool: BindPool[str] = BindPool(send=send, workers=1,
                                   order=None if order is None else order.__getitem__).start()
    return pool, sent, release


def test_without_an_order_binds_leave_first_in_first_out() -> None:
    pool, sent, release = _held_pool(None)
    for item in ("held", "c", "a", "b"):
        pool.submit(item)
    release.set()
    assert pool.drain(5.0)
    pool.stop(drain=True)
    assert sent == ["held", "c", "a", "b"]


def test_with_an_order_queued_binds_leave_lowest_rank_first_ties_in_submit_order() -> None:
    rank = {"held": 9, "c": 3, "a": 1, "b": 2, "b2": 2}
    pool, sent, release = _held_pool(rank)
    pool.submit("held")
    threading.Event().wait(0.1)  # the worker has taken it
    for item in ("c", "b", "a", "b2"):
        pool.submit(item)
    release.set()
    assert pool.drain(5.0)
    pool.stop(drain=True)
    assert sent == ["held", "a", "b", "b2", "c"]


def test_binds_left_at_a_stop_without_drain_are_dropped_in_rank_order() -> None:
    dropped: list[str] = []
    rank = {"held": 0, "z": 5, "y": 4, "x": 3}
    release = threading.Event()
    pool: BindPool[str] = BindPool(send=lambda item: release.wait(5.0), workers=1,
                                   order=rank.__getitem__, dropped=dropped.append).start()
    pool.submit("held")
    threading.Event().wait(0.1)
    for item in ("z", "y", "x"):
        pool.submit(item)
    release.set()
    pool.stop(drain=False, timeout=5.0)
    assert dropped == ["x", "y", "z"]
