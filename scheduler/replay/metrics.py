"""Replay metrics as the FGD paper defines them, their arrival buckets, and the CSV files.

After every submitted pod (placed or failed) a run records the GPU milli that has arrived so
far, the milli allocated, the cluster's fragment (FGD measure against the trace's target
workload) and the idle milli. With C the cluster's GPU milli:

- arrived % = 100 · arrived / C, rounded to an integer bucket (Python's ``round``: halves to
  even, as the paper's analysis scripts);
- GPU allocation % = 100 · allocated / C, rounded to 2 decimals per event; unallocated % =
  100 − allocation %;
- fragment amount % = 100 · fragment / C; fragment ratio % = 100 · fragment / idle.

A bucket's value is the mean over its events; a bucket no event fell in takes the mean over
the events of the buckets next to it (k−1…k+1), and stays empty if those are empty too.

Output files: one CSV per run (``RUN_COLUMNS``) and a summary of medians over seeds at the
arrival levels of ``SUMMARY_LEVELS``. ``read_paper_allocation`` reads the paper's published
allocation curves (``analysis_allo_discrete.csv``) for comparison.
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "PAPER_POLICIES",
    "RUN_COLUMNS",
    "SUMMARY_COLUMNS",
    "SUMMARY_LEVELS",
    "BucketRow",
    "RunCurve",
    "RunRecorder",
    "SummaryRow",
    "paper_unallocated",
    "read_paper_allocation",
    "read_run_csv",
    "summarize",
    "write_run_csv",
    "write_summary_csv",
]

MAX_BUCKET = 130
SUMMARY_LEVELS = (95, 100, 110, 130)
RUN_COLUMNS = ("trace", "policy", "seed", "arrived_pct", "unallocated_pct", "frag_amount_pct",
               "frag_ratio_pct", "failed_pods")
SUMMARY_COLUMNS = ("trace", "policy", "arrived_pct", "seeds", "unallocated_pct_median",
                   "unallocated_pct_p25", "unallocated_pct_p75", "frag_amount_pct_median",
                   "frag_ratio_pct_median", "failed_pods_median")
PAPER_POLICIES = {
    "01-Random": "random",
    "02-DotProd": "dotprod",
    "03-GpuClustering": "clustering",
    "04-GpuPacking": "packing",
    "05-BestFit": "bestfit",
    "06-FGD": "fgd",
}
"""The paper's policy labels and our names for the same policies."""


@dataclass(frozen=True, slots=True)
class BucketRow:
    arrived_pct: int
    unallocated_pct: float
    frag_amount_pct: float
    frag_ratio_pct: float
    failed_pods: int


@dataclass(slots=True)
class RunRecorder:
    """Per-pod-event measurements of one run, for a cluster of ``capacity_milli`` GPU milli."""

    capacity_milli: int
    _arrived: list[int] = field(default_factory=list)
    _alloc_pct: list[float] = field(default_factory=list)
    _frag_milli: list[float] = field(default_factory=list)
    _frag_ratio: list[float] = field(default_factory=list)
    _failed: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.capacity_milli <= 0:
            raise ValueError("the cluster has no GPU capacity")

    def record(
        self, *, arrived_milli: int, allocated_milli: int, fragment_milli: float,
        idle_milli: int, failed_pods: int,
    ) -> None:
        """One pod event: the state right after the pod was placed or failed."""
        self._arrived.append(arrived_milli)
        self._alloc_pct.append(round(100.0 * allocated_milli / self.capacity_milli, 2))
        self._frag_milli.append(fragment_milli)
        self._frag_ratio.append(100.0 * fragment_milli / idle_milli if idle_milli else 0.0)
        self._failed.append(failed_pods)

    def __len__(self) -> int:
        return len(self._arrived)

    def buckets(self, *, last: int = MAX_BUCKET) -> list[BucketRow]:
        """One row per arrival bucket 0…``last`` that has (or borders) events."""
        events: dict[int, list[int]] = defaultdict(list)
        for i, arrived in enumerate(self._arrived):
            events[round(100.0 * arrived / self.capacity_milli)].append(i)
        rows: list[BucketRow] = []
        for bucket in range(last + 1):
            chosen = events.get(bucket) or [
                i for near in (bucket - 1, bucket, bucket + 1) for i in events.get(near, [])]
            if not chosen:
                continue
            alloc = round(statistics.fmean(self._alloc_pct[i] for i in chosen), 2)
            frag = statistics.fmean(self._frag_milli[i] for i in chosen)
            rows.append(BucketRow(
                arrived_pct=bucket,
                unallocated_pct=round(100.0 - alloc, 2),
                frag_amount_pct=round(100.0 * frag / self.capacity_milli, 2),
                frag_ratio_pct=round(statistics.fmean(self._frag_ratio[i] for i in chosen), 2),
                failed_pods=max(self._failed[i] for i in chosen),
            ))
        return rows


def write_run_csv(
    path: Path, rows: Iterable[BucketRow], *, trace: str, policy: str, seed: int
) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(RUN_COLUMNS)
        for row in rows:
            writer.writerow([trace, policy, seed, row.arrived_pct, f"{row.unallocated_pct:.2f}",
                             f"{row.frag_amount_pct:.2f}", f"{row.frag_ratio_pct:.2f}",
                             row.failed_pods])


@dataclass(frozen=True, slots=True)
class RunCurve:
    trace: str
    policy: str
    seed: int
    rows: dict[int, BucketRow]


def read_run_csv(path: Path) -> RunCurve:
    """A per-run CSV written by ``write_run_csv``."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != RUN_COLUMNS:
            raise ValueError(f"{path}: not a replay run CSV (columns {reader.fieldnames})")
        records = list(reader)
    if not records:
        raise ValueError(f"{path}: no rows")
    first = records[0]
    rows = {
        int(r["arrived_pct"]): BucketRow(
            arrived_pct=int(r["arrived_pct"]),
            unallocated_pct=float(r["unallocated_pct"]),
            frag_amount_pct=float(r["frag_amount_pct"]),
            frag_ratio_pct=float(r["frag_ratio_pct"]),
            failed_pods=int(r["failed_pods"]),
        )
        for r in records
    }
    return RunCurve(first["trace"], first["policy"], int(first["seed"]), rows)


@dataclass(frozen=True, slots=True)
class SummaryRow:
    trace: str
    policy: str
    arrived_pct: int
    seeds: int
    unallocated_pct_median: float
    unallocated_pct_p25: float
    unallocated_pct_p75: float
    frag_amount_pct_median: float
    frag_ratio_pct_median: float
    failed_pods_median: float


def _quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default), for the 25th/75th percentile band."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(
    runs: Iterable[RunCurve], *, levels: Sequence[int] = SUMMARY_LEVELS
) -> list[SummaryRow]:
    """Medians over seeds per (trace, policy) at each arrival level the runs reached."""
    grouped: dict[tuple[str, str], list[RunCurve]] = defaultdict(list)
    for run in runs:
        grouped[(run.trace, run.policy)].append(run)
    summary: list[SummaryRow] = []
    for (trace, policy), curves in sorted(grouped.items()):
        for level in levels:
            rows = [c.rows[level] for c in curves if level in c.rows]
            if not rows:
                continue
            unallocated = [r.unallocated_pct for r in rows]
            summary.append(SummaryRow(
                trace=trace,
                policy=policy,
                arrived_pct=level,
                seeds=len(rows),
                unallocated_pct_median=round(statistics.median(unallocated), 2),
                unallocated_pct_p25=round(_quantile(unallocated, 0.25), 2),
                unallocated_pct_p75=round(_quantile(unallocated, 0.75), 2),
                frag_amount_pct_median=round(statistics.median(r.frag_amount_pct for r in rows), 2),
                frag_ratio_pct_median=round(statistics.median(r.frag_ratio_pct for r in rows), 2),
                failed_pods_median=statistics.median(r.failed_pods for r in rows),
            ))
    return summary


def write_summary_csv(path: Path, rows: Iterable[SummaryRow]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(SUMMARY_COLUMNS)
        for row in rows:
            writer.writerow([getattr(row, column) for column in SUMMARY_COLUMNS])


PaperCurves = dict[tuple[str, str], dict[int, dict[int, float]]]
"""(trace, policy) → seed → arrived % → GPU allocation %."""


def read_paper_allocation(path: Path) -> PaperCurves:
    """The paper's allocation curves, keyed by our trace and policy names."""
    curves: PaperCurves = defaultdict(dict)
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        for column in ("workload", "sc_policy", "seed"):
            if column not in header:
                raise ValueError(f"{path}: header lacks column {column!r}")
        levels = [c for c in header if c.isdigit()]
        for line, row in enumerate(reader, start=2):
            policy = PAPER_POLICIES.get(row["sc_policy"])
            if policy is None:
                raise ValueError(f"{path}:{line}: unknown policy {row['sc_policy']!r}")
            trace = row["workload"].removeprefix("openb_pod_list_")
            curves[(trace, policy)][int(row["seed"])] = {
                int(level): float(row[level]) for level in levels if row[level] not in ("", None)
            }
    return dict(curves)


def paper_unallocated(curves: PaperCurves, *, trace: str, policy: str, level: int) -> float | None:
    """The paper's median unallocated GPU % over seeds at ``level`` % arrived, if published."""
    seeds = curves.get((trace, policy), {})
    values = [100.0 - alloc[level] for alloc in seeds.values() if level in alloc]
    return round(statistics.median(values), 2) if values else None
