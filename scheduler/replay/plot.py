"""The replay figure: unallocated GPU % against arrived %, one panel per trace.

Our curves are the medians over seeds of the per-run CSVs; where the paper published the same
trace and policy, its median curve is drawn dashed in the same colour. The ideal curve,
max(0, 100 − arrived), is dotted; the clairvoyant bound (``lahar replay --bound``), where
given, is a black cross at each level it was computed for. ``pyplot`` is passed in so that
matplotlib stays optional.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from scheduler.replay.metrics import PaperCurves, RunCurve

__all__ = ["draw_panels", "median_curves"]

_COLOURS = {"random": "tab:gray", "dotprod": "tab:purple", "clustering": "tab:brown",
            "packing": "tab:orange", "bestfit": "tab:green", "fgd": "tab:blue"}


def median_curves(curves: list[RunCurve]) -> dict[tuple[str, str], dict[int, float]]:
    """(trace, policy) → arrived % → median unallocated % over the runs' seeds."""
    values: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for curve in curves:
        for level, row in curve.rows.items():
            values[(curve.trace, curve.policy)][level].append(row.unallocated_pct)
    return {key: {level: statistics.median(v) for level, v in sorted(levels.items())}
            for key, levels in values.items()}


def _paper_median(paper: PaperCurves, trace: str, policy: str) -> dict[int, float]:
    seeds = paper.get((trace, policy), {})
    levels: dict[int, list[float]] = defaultdict(list)
    for alloc in seeds.values():
        for level, value in alloc.items():
            levels[level].append(100.0 - value)
    return {level: statistics.median(v) for level, v in sorted(levels.items())}


def draw_panels(pyplot: Any, curves: list[RunCurve], paper: PaperCurves, *,
                bound: dict[str, dict[int, float]] | None = None) -> Any:
    """A figure with one panel per trace; returns the matplotlib Figure."""
    medians = median_curves(curves)
    traces = sorted({trace for trace, _ in medians})
    columns = min(3, len(traces)) or 1
    rows = (len(traces) + columns - 1) // columns or 1
    figure, axes = pyplot.subplots(rows, columns, figsize=(5.5 * columns, 4 * rows),
                                   squeeze=False)
    for index, trace in enumerate(traces):
        axis = axes[index // columns][index % columns]
        top = 0
        for (name, policy), curve in sorted(medians.items()):
            if name != trace:
                continue
            colour = _COLOURS.get(policy, "black")
            levels = list(curve)
            top = max(top, *levels)
            axis.plot(levels, list(curve.values()), color=colour, label=f"{policy} (Lahar)")
            published = _paper_median(paper, trace, policy)
            if published:
                axis.plot(list(published), list(published.values()), color=colour,
                          linestyle="--", linewidth=1, label=f"{policy} (paper)")
        ideal = list(range(0, top + 1))
        axis.plot(ideal, [max(0, 100 - x) for x in ideal], color="black", linestyle=":",
                  linewidth=1, label="ideal")
        marks = (bound or {}).get(trace, {})
        if marks:
            axis.plot(list(marks), list(marks.values()), color="black", marker="x",
                      linestyle="none", label="bound (no placement below)")
        axis.set_title(trace)
        axis.set_xlabel("arrived workload (% of GPU capacity)")
        axis.set_ylabel("unallocated GPU (%)")
        low = max(0, top - 50)
        shown = [v for (name, _), curve in medians.items() if name == trace
                 for level, v in curve.items() if level >= low]
        axis.set_xlim(low, max(top, low + 1))
        # Full runs end near 5-20 % unallocated; a short run (--limit) sits near 100 %.
        axis.set_ylim(0, min(100.0, max(10.0, max(shown, default=0.0) * 1.1)))
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    for index in range(len(traces), rows * columns):
        axes[index // columns][index % columns].axis("off")
    figure.tight_layout()
    return figure
