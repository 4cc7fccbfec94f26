"""``lahar run --schedule-on-arrival``: a pod that arrives starts the next cycle early.

Volcano's scheduler only runs ``runOnce`` under ``wait.Until`` (pkg/scheduler/scheduler.go,
``Scheduler.Run``): a pod created just after a cycle waits the whole period. The flag is
Lahar's opt-in; by default the wait is Volcano's (test_kube_run.py).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kube_helpers import (
    RunningScheduler,
    make_node,
    make_pod,
    parse_run_args,
    record_cycles,
    wait_until,
)

from tests.apiserver import ApiServerDouble


@contextmanager
def running(apiserver: ApiServerDouble, monkeypatch: pytest.MonkeyPatch,
            *flags: str) -> Iterator[list[tuple[float, float]]]:
    """``lahar run`` on the double, yielding the (start, end) of each cycle as it runs."""
    apiserver.create("v1/nodes", make_node("n1"))
    spans = record_cycles(monkeypatch)
    scheduler = RunningScheduler("--master", apiserver.url, "--leader-elect=false", *flags)
    try:
        wait_until(lambda: len(spans) >= 2, timeout=10.0, message="two cycles")
        yield spans
    finally:
        outcome = scheduler.stop()
    assert outcome == 0


def _bound(apiserver: ApiServerDouble, key: str) -> bool:
    return bool((apiserver.get("v1/pods", key) or {}).get("spec", {}).get("nodeName"))


@pytest.mark.parametrize(("flags", "at_least", "below"),
                         [((), 1.5, 3.0), (("--schedule-on-arrival=200ms",), 0.15, 1.2)])
def test_a_pod_created_just_after_a_cycle_waits_the_period_unless_its_arrival_wakes_the_loop(
        apiserver: ApiServerDouble, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...],
        at_least: float, below: float) -> None:
    """Created the moment a cycle ends, a plain pod waits the 2 s period for the next cycle
    (Volcano's ``wait.Until``); with ``--schedule-on-arrival=200ms`` its arrival starts that
    cycle once 200 ms have passed since the last one started."""
    with running(apiserver, monkeypatch, "--schedule-period=2s", *flags) as spans:
        seen = len(spans)
        wait_until(lambda: len(spans) > seen, timeout=5.0, message="a cycle ends")
        created = time.monotonic()
        apiserver.create("v1/pods", make_pod("p1", namespace="team"))
        wait_until(lambda: _bound(apiserver, "team/p1"), timeout=5.0, message="bind")
        waited = time.monotonic() - created
        # The bind can land before the cycle that placed it has returned and been recorded.
        wait_until(lambda: spans[-1][0] > created, timeout=5.0, message="the cycle recorded")
        woken = next(start for start, _ in spans if start > created)
    assert at_least <= waited < below, waited
    assert at_least <= woken - created + 0.05, woken - created


def test_arrivals_start_cycles_no_closer_than_the_gap_and_silence_keeps_the_period(
        apiserver: ApiServerDouble, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod every 20 ms: cycles start 300 ms apart, not back to back and not 2 s apart; with
    nothing arriving (no pod waits) the loop rests the whole period, as without the flag."""
    with running(apiserver, monkeypatch, "--schedule-period=2s",
                 "--schedule-on-arrival=300ms") as spans:
        first = len(spans)
        for number in range(60):
            apiserver.create("v1/pods", make_pod(f"p{number}", namespace="team"))
            time.sleep(0.02)
        streamed = spans[first:]
        wait_until(lambda: all(_bound(apiserver, f"team/p{number}") for number in range(60)),
                   timeout=10.0, message="all bound")
        quiet = len(spans)
        wait_until(lambda: len(spans) >= quiet + 2, timeout=8.0, message="two quiet cycles")
        rested = spans[quiet:quiet + 2]
    starts = [start for start, _ in streamed]
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert len(starts) >= 3 and all(0.28 <= gap < 1.0 for gap in gaps), gaps
    waits = [later[0] - earlier[1] for earlier, later in itertools.pairwise(rested)]
    assert len(waits) == 1 and 1.9 <= waits[0] < 2.6, waits


def test_schedule_on_arrival_is_off_by_default_and_not_negative(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_run_args().schedule_on_arrival == 0.0
    assert parse_run_args("--schedule-on-arrival=150ms").schedule_on_arrival == pytest.approx(0.15)
    with pytest.raises(SystemExit):
        parse_run_args("--schedule-on-arrival=-1s")
    assert "--schedule-on-arrival: must not be negative, got '-1s'" in capsys.readouterr().err
