"""A lower bound on the unallocated GPU any placement can reach in a replay.

Given the pods that have arrived by some point of a run, no placement — online or with full
knowledge of the future, one that fails pods on purpose included — can allocate more GPU milli
than the best packing of those pods into the cluster's cards. This module computes that best
packing for a relaxation of the cluster, so the result is a bound, never an estimate:

- every card is a bin of 1000 milli, wherever it sits: node boundaries, CPU, memory and card
  models (``gpu_spec``) are ignored;
- a pod asking for part of one card is an item of its ``gpu_milli``;
- a pod asking for k whole cards takes k empty cards or none (they need not share a node).

The packing is an integer program in the arc-flow form (a card is a path 0 → 1000 in steps of
the items it holds, 10 milli apart as the trace's requests are; items along a path in
non-increasing size, which removes symmetric copies), solved exactly by HiGHS through scipy
(``pip install -e '.[replay]'`` in the clone). Should the solver stop short of optimality,
the bound uses its proven upper limit, so it stays a bound.

:func:`bound_rows` turns the packing into the replay's metric: per arrival bucket, the mean
over the bucket's events of the unallocated % a clairvoyant placement could not go below,
rounded the way :class:`scheduler.replay.metrics.RunRecorder` rounds, so a policy's
``unallocated_pct`` is never below it at the same seed.
"""

from __future__ import annotations

import csv
import math
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.replay.metrics import SUMMARY_LEVELS
from scheduler.replay.trace import TraceNode, TracePod, generate_workload

__all__ = [
    "BOUND_COLUMNS",
    "BoundError",
    "BoundRow",
    "bound_medians",
    "bound_rows",
    "max_packed_milli",
    "read_bound_csv",
    "require_solver",
    "run_bound",
    "write_bound_csv",
]

UNIT = 10
"""Milli per step of the arc-flow graph: every trace request is a multiple of it."""
STEPS = 1000 // UNIT
SOLVER_SECONDS = 120.0
"""Time one packing may take before the solver's proven limit is used instead."""


class BoundError(ValueError):
    """The bound cannot be computed (scipy missing, or a request off the 10-milli grid)."""


@dataclass(frozen=True, slots=True)
class BoundRow:
    arrived_pct: int
    unallocated_pct: float
    """No placement of the same pods leaves less unallocated at this arrival bucket."""


def require_solver() -> None:
    """Raises :class:`BoundError` when scipy (the packing solver) is not installed."""
    _solver()


def _solver() -> Any:
    try:
        from scipy import optimize, sparse
    except ImportError:
        raise BoundError(
            "the bound needs scipy (pip install -e '.[replay]' in the clone)") from None
    return optimize, sparse


def _items(pods: Sequence[TracePod]) -> tuple[Counter[int], Counter[int]]:
    """(steps per part-card request → pods, cards per whole-card request → pods)."""
    parts: Counter[int] = Counter()
    whole: Counter[int] = Counter()
    for pod in pods:
        if pod.num_gpu == 0 or pod.gpu_milli == 0:
            continue
        if pod.num_gpu == 1 and pod.gpu_milli < 1000:
            if pod.gpu_milli % UNIT:
                raise BoundError(f"pod {pod.name}: gpu_milli {pod.gpu_milli} is not a "
                                 f"multiple of {UNIT}")
            parts[pod.gpu_milli // UNIT] += 1
        else:
            whole[pod.num_gpu] += 1
    return parts, whole


def _starts(sizes: Sequence[int]) -> dict[int, list[int]]:
    """Where an item of each size may start on a card's path: after items no smaller."""
    starts: dict[int, list[int]] = {}
    reach = {0}
    for size in sorted(sizes, reverse=True):
        # Sums of items of this size or larger, so the next (smaller) size starts after them.
        grown = set(reach)
        frontier = list(reach)
        while frontier:
            nxt = [u + size for u in frontier if u + size <= STEPS and u + size not in grown]
            grown.update(nxt)
            frontier = nxt
        starts[size] = sorted(u for u in grown if u + size <= STEPS)
        reach = grown
    return starts


def max_packed_milli(pods: Sequence[TracePod], *, cards: int) -> int:
    """The most GPU milli that ``cards`` cards can hold of ``pods`` (see the module's relaxation).

    Raises :class:`BoundError` without scipy or on a request off the 10-milli grid."""
    if cards < 0:
        raise BoundError(f"cards must be >= 0, got {cards}")
    parts, whole = _items(pods)
    if cards == 0 or (not parts and not whole):
        return 0
    optimize, sparse = _solver()
    starts = _starts(list(parts))
    columns: list[tuple[str, int, int]] = [
        ("part", size, u) for size in sorted(parts) for u in starts[size]]
    columns += [("loss", 1, u) for u in range(STEPS)]
    columns += [("whole", k, 0) for k in sorted(whole)]
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []

    def put(row: int, column: int, value: float) -> None:
        rows.append(row)
        cols.append(column)
        vals.append(value)

    item_row = {size: STEPS + i for i, size in enumerate(sorted(parts))}
    for j, (kind, size, u) in enumerate(columns):
        if kind == "whole":
            put(STEPS - 1, j, size)  # k whole cards of the cluster's
            continue
        if u == 0:
            put(STEPS - 1, j, 1.0)  # a card's path leaves 0
        else:
            put(u - 1, j, -1.0)  # flow out of u
        if u + size < STEPS:
            put(u + size - 1, j, 1.0)  # flow into u + size
        if kind == "part":
            put(item_row[size], j, 1.0)
    # Rows 0..STEPS-2: flow kept at inner vertices; row STEPS-1: every card used once (an empty
    # card is a path of loss arcs); then one row per part-card size: at most its pods.
    lower = [0.0] * (STEPS - 1) + [float(cards)] + [0.0] * len(parts)
    upper = [0.0] * (STEPS - 1) + [float(cards)] + [float(parts[s]) for s in sorted(parts)]
    matrix = sparse.csr_array((vals, (rows, cols)), shape=(STEPS + len(parts), len(columns)))
    gain = [-(size * UNIT if kind == "part" else size * 1000 if kind == "whole" else 0)
            for kind, size, _ in columns]
    high = [float(whole[size]) if kind == "whole" else math.inf for kind, size, _ in columns]
    result = optimize.milp(
        gain, integrality=[1] * len(columns), bounds=optimize.Bounds([0.0] * len(columns), high),
        constraints=optimize.LinearConstraint(matrix, lower, upper),
        options={"time_limit": SOLVER_SECONDS, "mip_rel_gap": 0.0})
    if result.x is None and getattr(result, "mip_dual_bound", None) is None:
        raise BoundError(f"the packing solver failed: {result.message}")
    if result.status == 0:
        return round(-result.fun)
    # Stopped early: the solver's proven limit on the best packing keeps this a bound.
    return math.floor(-result.mip_dual_bound + 1e-6)


def bound_rows(pods: Sequence[TracePod], *, cards: int, levels: Sequence[int],
               checkpoints: int = 8) -> list[BoundRow]:
    """Per arrival bucket in ``levels``, the unallocated % no placement of ``pods`` (in
    submission order, every pod one event) goes below, rounded as the run CSVs are.

    An event is bounded by the packing of the pods up to the next of ``checkpoints`` evenly
    spaced events of its bucket (more pods can only pack more), so each bucket costs at most
    ``checkpoints`` packings; a bucket without events borrows its neighbours', as the run
    metrics do."""
    capacity = cards * 1000
    if capacity <= 0:
        return []
    events: dict[int, list[int]] = defaultdict(list)
    arrived = 0
    for i, pod in enumerate(pods):
        arrived += pod.total_gpu_milli
        events[round(100.0 * arrived / capacity)].append(i)
    packed: dict[int, int] = {}
    out: list[BoundRow] = []
    for level in levels:
        chosen = events.get(level) or sorted(
            i for near in (level - 1, level, level + 1) for i in events.get(near, []))
        if not chosen:
            continue
        step = max(1, math.ceil(len(chosen) / max(1, checkpoints)))
        marks = chosen[step - 1::step]
        if not marks or marks[-1] != chosen[-1]:
            marks.append(chosen[-1])
        alloc: list[float] = []
        for i in chosen:
            mark = next(m for m in marks if m >= i)
            if mark not in packed:
                packed[mark] = max_packed_milli(pods[: mark + 1], cards=cards)
            alloc.append(round(100.0 * packed[mark] / capacity, 2))
        mean = round(statistics.fmean(alloc), 2)
        out.append(BoundRow(arrived_pct=level, unallocated_pct=round(100.0 - mean, 2)))
    return out


BOUND_COLUMNS = ("trace", "seed", "arrived_pct", "unallocated_pct_bound")


def run_bound(*, nodes: Sequence[TraceNode], pods: Sequence[TracePod], seed: int,
              tune: float = 1.3, limit: int | None = None,
              levels: Sequence[int] = SUMMARY_LEVELS) -> list[BoundRow]:
    """The bound for the pods a replay of (``pods``, ``seed``, ``tune``, ``limit``) submits:
    the same workload :func:`scheduler.replay.run.run_replay` draws from a fresh
    ``random.Random(seed)``."""
    cards = sum(n.gpus for n in nodes)
    work = generate_workload(pods, capacity_gpu_milli=cards * 1000, tune=tune,
                             rng=random.Random(seed))
    return bound_rows(work.pods[:limit], cards=cards, levels=levels)


def write_bound_csv(path: Path, rows: Iterable[tuple[str, int, BoundRow]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(BOUND_COLUMNS)
        for trace, seed, row in rows:
            writer.writerow([trace, seed, row.arrived_pct, f"{row.unallocated_pct:.2f}"])


def read_bound_csv(path: Path) -> list[tuple[str, int, BoundRow]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in BOUND_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: header lacks column(s) {', '.join(missing)}")
        return [(r["trace"], int(r["seed"]),
                 BoundRow(int(r["arrived_pct"]), float(r["unallocated_pct_bound"])))
                for r in reader]


def bound_medians(rows: Iterable[tuple[str, int, BoundRow]]) -> dict[str, dict[int, float]]:
    """trace → arrived % → median bound over the seeds."""
    values: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for trace, _, row in rows:
        values[trace][row.arrived_pct].append(row.unallocated_pct)
    return {trace: {level: round(statistics.median(v), 2) for level, v in sorted(levels.items())}
            for trace, levels in values.items()}
