"""Replay metrics (paper §B.2), their arrival buckets, the CSV files and the paper's curves.

Bucketing follows the paper's analysis scripts (``merge_alloc_discrete.py`` and
``merge_frag_discrete.py`` of hkust-adsl/kubernetes-scheduler-simulator).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.replay.metrics import (
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    BucketRow,
    RunCurve,
    RunRecorder,
    paper_unallocated,
    read_paper_allocation,
    read_run_csv,
    summarize,
    write_run_csv,
    write_summary_csv,
)
from tests.replay.data import paper_results

CAPACITY = 10_000  # ten cards


def test_buckets_average_events_and_fill_gaps_from_neighbours() -> None:
    rec = RunRecorder(CAPACITY)
    # arrived 0.4 % → bucket 0; 1.0 % and 1.4 % → bucket 1; 3.0 % → bucket 3; bucket 2 empty.
    rec.record(arrived_milli=40, allocated_milli=40, fragment_milli=100, idle_milli=9960, failed_pods=0)
    rec.record(arrived_milli=100, allocated_milli=100, fragment_milli=200, idle_milli=9900, failed_pods=0)
    rec.record(arrived_milli=140, allocated_milli=100, fragment_milli=400, idle_milli=9900, failed_pods=1)
    rec.record(arrived_milli=300, allocated_milli=250, fragment_milli=1000, idle_milli=9750, failed_pods=2)
    rows = {r.arrived_pct: r for r in rec.buckets(last=5)}
    assert sorted(rows) == [0, 1, 2, 3, 4]
    assert rows[0] == BucketRow(0, 99.6, 1.0, round(100 * 100 / 9960, 2), 0)
    assert rows[1].unallocated_pct == 99.0 and rows[1].frag_amount_pct == 3.0
    assert rows[1].failed_pods == 1
    # bucket 2 has no event of its own: the events of buckets 1 and 3 stand in for it.
    assert rows[2].unallocated_pct == pytest.approx(100 - round((1.0 + 1.0 + 2.5) / 3, 2))
    assert rows[2].failed_pods == 2
    assert rows[4] == BucketRow(4, 97.5, 10.0, round(100 * 1000 / 9750, 2), 2)


def test_arrival_rounding_sends_halves_to_even() -> None:
    rec = RunRecorder(CAPACITY)
    rec.record(arrived_milli=50, allocated_milli=0, fragment_milli=0, idle_milli=0, failed_pods=0)
    rec.record(arrived_milli=150, allocated_milli=0, fragment_milli=0, idle_milli=0, failed_pods=0)
    rows = rec.buckets(last=3)
    # 0.5 → 0 and 1.5 → 2 (Python's round), so bucket 1 borrows from 0 and 2.
    assert [r.arrived_pct for r in rows] == [0, 1, 2, 3]
    assert rows[0].frag_ratio_pct == 0.0  # no idle milli: ratio 0, not a division error


def test_run_csv_round_trip_and_summary(tmp_path: Path) -> None:
    curves = []
    for seed, unalloc in [(42, 5.0), (43, 4.0), (44, 6.0), (45, 4.5)]:
        rows = [BucketRow(level, unalloc + (level - 100) / 100, 3.0, 90.0, seed)
                for level in (95, 100, 110)]
        path = tmp_path / f"run-{seed}.csv"
        write_run_csv(path, rows, trace="default", policy="fgd", seed=seed)
        assert path.read_text().splitlines()[0] == ",".join(RUN_COLUMNS)
        curves.append(read_run_csv(path))
    assert curves[0] == RunCurve("default", "fgd", 42, {
        95: BucketRow(95, 4.95, 3.0, 90.0, 42), 100: BucketRow(100, 5.0, 3.0, 90.0, 42),
        110: BucketRow(110, 5.1, 3.0, 90.0, 42)})
    summary = summarize(curves)
    assert [r.arrived_pct for r in summary] == [95, 100, 110]  # 130 never reached
    at_100 = summary[1]
    assert (at_100.seeds, at_100.unallocated_pct_median) == (4, 4.75)
    assert (at_100.unallocated_pct_p25, at_100.unallocated_pct_p75) == (4.38, 5.25)
    assert at_100.failed_pods_median == 43.5
    out = tmp_path / "summary.csv"
    write_summary_csv(out, summary)
    lines = out.read_text().splitlines()
    assert lines[0] == ",".join(SUMMARY_COLUMNS)
    assert lines[2].startswith("default,fgd,100,4,4.75,")


def test_read_run_csv_rejects_other_files(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a replay run CSV"):
        read_run_csv(path)


def test_paper_curves_give_the_published_figures() -> None:
    curves = read_paper_allocation(paper_results())
    published_at_100 = {"random": 13.75, "dotprod": 9.45, "clustering": 8.42, "packing": 8.20,
                        "bestfit": 7.09, "fgd": 4.77}
    for policy, value in published_at_100.items():
        assert paper_unallocated(curves, trace="default", policy=policy, level=100) == value
    assert paper_unallocated(curves, trace="default", policy="fgd", level=130) == 4.60
    assert paper_unallocated(curves, trace="cpu200", policy="fgd", level=100) == 5.18
    assert len(curves[("default", "fgd")]) == 10
    assert paper_unallocated(curves, trace="nope", policy="fgd", level=100) is None
