"""``lahar replay``: the FGD paper's trace experiment through Lahar's scheduler.

Runs every (trace, policy, seed) of the command line with :func:`scheduler.replay.run.run_replay`
(``--jobs`` processes side by side) and writes to ``--out``:

- ``<trace>-<policy>-<seed>.csv`` per run (the paper's metrics by integer arrived %);
- ``summary.csv``: medians over seeds at 95/100/110/130 % arrived;
- ``replay.png``: unallocated GPU % against arrived %, one panel per trace, our median curves
  and, where published, the paper's (``fgd-results/analysis_allo_discrete.csv``) dashed.
  matplotlib is an optional extra (``pip install -e '.[replay]'`` in the clone); without it
  the PNG is skipped with a message;
- with ``--bound``, ``bound.csv``: per trace and seed, the unallocated GPU % that no placement
  of the same pods can go below at 95/100/110/130 % arrived
  (:mod:`scheduler.replay.bound`; needs scipy, in the same extra), drawn as black crosses.

Traces come from the sample shipped with Lahar (``--trace sample``) or a traces folder
(:mod:`scheduler.replay.sources`). Progress goes to stderr: a bar redrawn in place when stderr
is a terminal, otherwise one line per finished run. Ctrl-C ends the worker processes and exits
with 130, saying that the files in ``--out`` are partial.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.cluster.kube.flags import positive_int
from scheduler.commands.tables import table_lines
from scheduler.devices.finegrained.placement import (
    LEARNING_POLICIES,
    PLACEMENT_POLICIES,
    TIE_BREAKS,
    parse_policy_arguments,
)
from scheduler.replay.batch import Progress, ReplayJob, bound_all, run_all
from scheduler.replay.bound import (
    BoundError,
    bound_medians,
    require_solver,
    write_bound_csv,
)
from scheduler.replay.metrics import (
    PaperCurves,
    RunCurve,
    SummaryRow,
    read_paper_allocation,
    read_run_csv,
    summarize,
    write_summary_csv,
)
from scheduler.replay.sources import (
    NODE_LIST,
    PAPER_RESULTS,
    SAMPLE,
    TRACES_ENV,
    TraceSources,
    find_sources,
)
from scheduler.replay.trace import load_nodes, load_pods, trace_name

__all__ = ["add_replay_arguments", "parse_seeds"]

INTERRUPTED = 128 + signal.SIGINT
"""The exit status after Ctrl-C, as a shell reports a command ended by SIGINT."""


def parse_policy_args(items: Sequence[str], policies: Sequence[str]
                      ) -> tuple[tuple[str, Any], ...]:
    """``--policy-arg NAME=VALUE`` items as (name, value), numbers as numbers; checked
    against every listed policy that takes arguments. Raises ``ValueError``."""
    parsed: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--policy-arg: expected NAME=VALUE, got {item!r}")
        value: Any = text.strip()
        for convert in (int, float):
            try:
                value = convert(text)
                break
            except ValueError:
                continue
        parsed[name.strip()] = value
    if not parsed:
        return ()
    learning = [p for p in policies if p in LEARNING_POLICIES]
    if not learning:
        raise ValueError(f"--policy-arg: none of the policies {', '.join(policies)} takes "
                         f"arguments (only {', '.join(LEARNING_POLICIES)})")
    for policy in learning:
        try:
            parse_policy_arguments(policy, parsed)
        except ValueError as exc:
            raise ValueError(f"--policy-arg: {exc}") from None
    return tuple(sorted(parsed.items()))


def summary_table(rows: Sequence[SummaryRow]) -> list[str]:
    """summary.csv's medians as a table for the terminal."""
    if not rows:
        return []
    lines = [["TRACE", "POLICY", "ARRIVED %", "SEEDS", "UNALLOCATED GPU % (P25-P75)",
              "FRAG %", "FAILED PODS"]]
    lines += [[row.trace, row.policy, str(row.arrived_pct), str(row.seeds),
               f"{row.unallocated_pct_median:.2f} ({row.unallocated_pct_p25:.2f}-"
               f"{row.unallocated_pct_p75:.2f})", f"{row.frag_amount_pct_median:.2f}",
               f"{row.failed_pods_median:g}"] for row in rows]
    return table_lines(lines)


def parse_seeds(text: str) -> list[int]:
    """``42-51``, ``42,45`` or a mix; raises ``ValueError`` with the offending part."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            first, last = (int(low), int(high)) if dash else (int(part), int(part))
        except ValueError:
            raise ValueError(f"--seeds: {part!r} is not a seed or a range like 42-51") from None
        if first > last:
            raise ValueError(f"--seeds: range {part!r} is empty (its start is above its end; "
                             f"write {last}-{first})")
        seeds.extend(range(first, last + 1))
    if not seeds:
        raise ValueError("--seeds: no seed given")
    return seeds


def _plot(curves: list[RunCurve], *, sources: TraceSources, path: Path,
          bound: dict[str, dict[int, float]] | None = None) -> list[str]:
    """Draws ``replay.png``; returns the lines to print (what was written or left out)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["matplotlib is not installed (pip install -e '.[replay]' in the clone): "
                "replay.png skipped"]
    from scheduler.replay.plot import draw_panels

    lines: list[str] = []
    paper_csv = sources.paper_results
    paper: PaperCurves = {}
    if paper_csv is None:
        lines.append(f"note: replay.png has no curves of the paper: {sources.root / PAPER_RESULTS} "
                     f"not found (docs/replay.md, section Data, says where it comes from)")
    else:
        try:
            paper = read_paper_allocation(paper_csv)
        except (OSError, ValueError) as exc:
            lines.append(f"note: replay.png has no curves of the paper: {exc}")
    if paper:
        unpublished = sorted({c.trace for c in curves} - {trace for trace, _ in paper})
        if unpublished:
            lines.append(f"note: the paper published no curves for {', '.join(unpublished)}; "
                         f"replay.png shows Lahar's alone there")
    figure = draw_panels(plt, curves, paper, bound=bound)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [*lines, f"wrote {path}"]


@dataclass(frozen=True, slots=True)
class _Plan:
    """A checked command line: the files exist and load, the numbers are in range."""

    traces: dict[Path, Path]
    """Pod list → the node list it is replayed on."""
    sources: TraceSources
    policies: list[str]
    policy_args: tuple[tuple[str, Any], ...]
    seeds: list[int]
    out: Path


def _check_numbers(args: argparse.Namespace) -> None:
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit: must be at least 1 pod, got {args.limit}")
    if not math.isfinite(args.tune) or args.tune <= 0:
        raise ValueError(f"--tune: must be above 0 (1.3 submits pods up to 130 % of the "
                         f"cluster's GPU), got {args.tune:g}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: a file is there; name a folder (it is created if "
                         f"absent)")


def _plan(args: argparse.Namespace) -> _Plan:
    """Raises ``ValueError`` (``TraceError``, ``MissingTraceData``) or ``BoundError``."""
    seeds = parse_seeds(args.seeds)
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    for policy in policies:
        if policy not in PLACEMENT_POLICIES:
            raise ValueError(f"--policy: unknown policy {policy!r}; known: "
                             f"{', '.join(PLACEMENT_POLICIES)}")
    policy_args = parse_policy_args(args.policy_arg, policies)
    _check_numbers(args)
    sources = find_sources(args.traces_dir)
    pod_lists = [sources.pod_list(t.strip()) for t in args.trace.split(",") if t.strip()]
    if not pod_lists:
        raise ValueError("--trace: no trace given")
    traces = {path: Path(args.nodes) if args.nodes else sources.node_list(path)
              for path in pod_lists}
    for nodes_csv in sorted(set(traces.values())):
        load_nodes(nodes_csv)  # fail early on a bad node list
    for path in traces:
        load_pods(path)
    if args.bound:
        require_solver()
    return _Plan(traces, sources, policies, policy_args, seeds, Path(args.out))


def _replay(args: argparse.Namespace) -> int:
    try:
        plan = _plan(args)
    except BoundError as exc:
        print(f"error: --bound: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = plan.out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: --out {out}: cannot make the folder: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    runs = [ReplayJob(str(path), str(nodes_csv), trace_name(path), policy, seed, args.tune,
                      args.limit, args.tie_break, str(out),
                      plan.policy_args if policy in LEARNING_POLICIES else ())
            for path, nodes_csv in plan.traces.items() for policy in plan.policies
            for seed in plan.seeds]
    jobs = max(1, min(args.jobs, len(runs)))
    progress = Progress(len(runs))
    missing = "summary.csv and replay.png not written"
    try:
        results = run_all(runs, jobs, progress)
        progress.close()
        curves = [read_run_csv(Path(path)) for path, _ in sorted(results)]
        summary = summarize(curves)
        write_summary_csv(out / "summary.csv", summary)
        per_pod = sum(s for _, s in results) / len(results)
        for line in summary_table(summary):
            print(line)
        print(f"{len(runs)} run(s); {1000 * per_pod:.1f} ms per pod; "
              f"wrote {out / 'summary.csv'}")
        bound: dict[str, dict[int, float]] | None = None
        if args.bound:
            missing = "bound.csv and replay.png not written"
            rows = bound_all(plan.traces, plan.seeds, tune=args.tune, limit=args.limit,
                             jobs=jobs)
            write_bound_csv(out / "bound.csv", rows)
            bound = bound_medians(rows)
            for trace, levels in sorted(bound.items()):
                shown = ", ".join(f"{level} % {value:.2f}" for level, value in levels.items())
                print(f"bound {trace} (median over seeds): {shown}")
            print(f"wrote {out / 'bound.csv'}")
        missing = "replay.png not written"
        for line in _plot(curves, sources=plan.sources, path=out / "replay.png", bound=bound):
            print(line)
    except KeyboardInterrupt:
        progress.close()
        print(f"error: interrupted (Ctrl-C) after {progress.finished} of {len(runs)} runs; "
              f"the output in {out} is partial ({missing})", file=sys.stderr)
        return INTERRUPTED
    except BoundError as exc:
        print(f"error: --bound: {exc}", file=sys.stderr)
        return 2
    return 0


def add_replay_arguments(sub: Any) -> None:
    replay = sub.add_parser(
        "replay", help="replay an Alibaba GPU trace through the scheduler (FGD paper method)")
    replay.add_argument("--trace", required=True,
                        help=f"trace name(s) ({SAMPLE}: the sample shipped with Lahar; default, "
                             f"cpu050, ...: from the traces folder) or pod-list CSVs, "
                             f"comma-separated")
    replay.add_argument("--nodes", help=f"node-list CSV (default: the sample's for {SAMPLE}, "
                                        f"else <traces folder>/{NODE_LIST})")
    replay.add_argument("--policy", default="fgd",
                        help=f"comma-separated of {', '.join(PLACEMENT_POLICIES)} (default fgd)")
    replay.add_argument("--policy-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="an argument of fgd-learned (scale, cards, popularity, starved, "
                             "reserve), repeatable; see docs/replay.md")
    replay.add_argument("--seeds", default="42", help="seeds, e.g. 42-51 or 42,43 (default 42)")
    replay.add_argument("--tune", type=float, default=1.3,
                        help="submit pods up to this × the GPU capacity, above 0 (default 1.3)")
    replay.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1,
                        help="runs side by side in processes (default: the machine's cores)")
    replay.add_argument("--out", default="replay-out",
                        help="output folder, created if absent (default replay-out)")
    replay.add_argument("--limit", type=int, help="only the first N pods of each run (N >= 1)")
    replay.add_argument("--tie-break", choices=TIE_BREAKS, default="first",
                        help="equal scores: first node in the run's node order (the paper's "
                             "simulator, default) or uniformly drawn (Volcano)")
    replay.add_argument("--bound", action="store_true",
                        help="also compute the unallocated GPU %% no placement of the same pods "
                             "goes below (bound.csv; needs scipy); see docs/replay.md")
    replay.add_argument("--traces-dir",
                        help=f"folder with the trace (alibaba-gpu-v2023/, or a clone of "
                             f"alibaba/clusterdata) and fgd-results/ (default: "
                             f"${TRACES_ENV}, else ../shared/traces)")
    replay.set_defaults(func=_replay)


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - via scheduler.commands.cli
    parser = argparse.ArgumentParser(prog="lahar")
    add_replay_arguments(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))
