"""``lahar replay``: the FGD paper's trace experiment through Lahar's scheduler.

Runs every (trace, policy, seed) of the command line with :func:`scheduler.replay.run.run_replay`
(``--jobs`` processes side by side), shows a progress bar on stderr, and writes to ``--out``:

- ``<trace>-<policy>-<seed>.csv`` per run (the paper's metrics by integer arrived %);
- ``summary.csv``: medians over seeds at 95/100/110/130 % arrived;
- ``replay.png``: unallocated GPU % against arrived %, one panel per trace, our median curves
  and, where published, the paper's (``fgd-results/analysis_allo_discrete.csv``) dashed.
  matplotlib is an optional extra (``pip install 'lahar[replay]'``); without it the PNG is
  skipped with a message;
- with ``--bound``, ``bound.csv``: per trace and seed, the unallocated GPU % that no placement
  of the same pods can go below at 95/100/110/130 % arrived
  (:mod:`scheduler.replay.bound`; needs scipy, in the same extra), drawn as black crosses.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import Manager
from pathlib import Path
from typing import Any, TextIO

from scheduler.devices.finegrained.placement import (
    LEARNING_POLICIES,
    PLACEMENT_POLICIES,
    TIE_BREAKS,
    parse_policy_arguments,
)
from scheduler.replay.bound import (
    BoundError,
    BoundRow,
    bound_medians,
    require_solver,
    run_bound,
    write_bound_csv,
)
from scheduler.replay.metrics import (
    RunCurve,
    read_paper_allocation,
    read_run_csv,
    summarize,
    write_run_csv,
    write_summary_csv,
)
from scheduler.replay.trace import TraceError, load_nodes, load_pods, resolve_trace, trace_name

__all__ = ["add_replay_arguments", "parse_seeds"]

DEFAULT_TRACES = Path("..") / "shared" / "traces"
NODE_LIST = "openb_node_list_gpu_node.csv"


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


def parse_seeds(text: str) -> list[int]:
    """``42-51``, ``42,45`` or a mix; raises ``ValueError`` with the offending part."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            if dash:
                seeds.extend(range(int(low), int(high) + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"--seeds: {part!r} is not a seed or a range like 42-51") from None
    if not seeds:
        raise ValueError("--seeds: no seed given")
    return seeds


@dataclass(frozen=True, slots=True)
class _Run:
    pods_csv: str
    nodes_csv: str
    trace: str
    policy: str
    seed: int
    tune: float
    limit: int | None
    tie_break: str
    out: str
    policy_args: tuple[tuple[str, Any], ...] = ()

    @property
    def csv_path(self) -> Path:
        return Path(self.out) / f"{self.trace}-{self.policy}-{self.seed}.csv"


def _execute(run: _Run, queue: Any = None) -> tuple[str, float]:
    """One replay in a worker; reports (run id, pods done, pods total) to ``queue``."""
    from scheduler.replay.run import run_replay

    run_id = run.csv_path.name

    def progress(done: int, total: int) -> None:
        if queue is not None and (done % 50 == 0 or done == total):
            queue.put((run_id, done, total))

    result = run_replay(nodes=load_nodes(Path(run.nodes_csv)), pods=load_pods(Path(run.pods_csv)),
                        policy=run.policy, seed=run.seed, tune=run.tune, limit=run.limit,
                        tie_break=run.tie_break, progress=progress,
                        policy_args=dict(run.policy_args))
    last = max((r.arrived_pct for r in result.recorder.buckets()), default=0)
    write_run_csv(run.csv_path, result.recorder.buckets(last=max(last, 0)), trace=run.trace,
                  policy=run.policy, seed=run.seed)
    return str(run.csv_path), result.seconds_per_pod


class _Progress:
    """Progress over all pods of all runs on ``stream``: a one-line bar redrawn in place on a
    terminal; elsewhere (a log file, CI) a plain line when a run finishes and at most one
    every ``quiet_seconds`` in between, so a long grid does not flood its log."""

    def __init__(self, runs: int, *, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, quiet_seconds: float = 60.0) -> None:
        self.runs = runs
        self.finished = 0
        self.counts: dict[str, tuple[int, int]] = {}
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.quiet_seconds = quiet_seconds
        self._logged: tuple[int, float] = (-1, self.started)

    def update(self, run_id: str, done: int, total: int) -> None:
        self.counts[run_id] = (done, total)
        self.draw()

    def draw(self) -> None:
        done = sum(d for d, _ in self.counts.values())
        known = [t for _, t in self.counts.values()]
        # Runs not started yet are assumed as long as the average started one.
        total = sum(known) + (self.runs - len(known)) * (sum(known) // max(len(known), 1))
        share = done / total if total else 0.0
        now = self.clock()
        status = f"{100 * share:5.1f}% {self.finished}/{self.runs} runs, {now - self.started:6.0f}s"
        if self.tty:
            self.stream.write(f"\rreplay [{'#' * int(30 * share):<30}] {status}")
        else:
            finished, last = self._logged
            if self.finished == finished and now - last < self.quiet_seconds:
                return
            self._logged = (self.finished, now)
            self.stream.write(f"replay {status}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def _run_all(runs: list[_Run], jobs: int) -> list[tuple[str, float]]:
    progress = _Progress(len(runs))
    results: list[tuple[str, float]] = []
    if jobs <= 1:
        class _Direct:
            def put(self, item: tuple[str, int, int]) -> None:
                progress.update(*item)
        for run in runs:
            results.append(_execute(run, _Direct()))
            progress.finished += 1
            progress.draw()
        progress.close()
        return results
    with Manager() as manager, ProcessPoolExecutor(max_workers=jobs) as pool:
        queue = manager.Queue()
        pending: set[Future[tuple[str, float]]] = {pool.submit(_execute, r, queue) for r in runs}
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            while not queue.empty():
                progress.update(*queue.get())
            for future in finished:
                results.append(future.result())
                progress.finished += 1
            progress.draw()
    progress.close()
    return results


def _bound_one(pods_csv: str, nodes_csv: str, trace: str, seed: int, tune: float,
               limit: int | None) -> list[tuple[str, int, BoundRow]]:
    rows = run_bound(nodes=load_nodes(Path(nodes_csv)), pods=load_pods(Path(pods_csv)),
                     seed=seed, tune=tune, limit=limit)
    return [(trace, seed, row) for row in rows]


def _bound_all(traces: list[Path], nodes_csv: Path, seeds: list[int], args: argparse.Namespace,
               jobs: int) -> list[tuple[str, int, BoundRow]]:
    """The clairvoyant bound of every (trace, seed), ``jobs`` processes side by side."""
    work = [(str(path), str(nodes_csv), trace_name(path), seed, args.tune, args.limit)
            for path in traces for seed in seeds]
    rows: list[tuple[str, int, BoundRow]] = []
    if jobs <= 1:
        for item in work:
            rows.extend(_bound_one(*item))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for part in pool.map(_bound_one, *zip(*work, strict=True)):
                rows.extend(part)
    return sorted(rows, key=lambda r: (r[0], r[1], r[2].arrived_pct))


def _plot(curves: list[RunCurve], *, paper_csv: Path | None, path: Path,
          bound: dict[str, dict[int, float]] | None = None) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'lahar[replay]'): replay.png skipped"
    from scheduler.replay.plot import draw_panels

    paper = read_paper_allocation(paper_csv) if paper_csv is not None else {}
    figure = draw_panels(plt, curves, paper, bound=bound)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"wrote {path}"


def _replay(args: argparse.Namespace) -> int:
    traces_dir = Path(args.traces_dir)
    alibaba = traces_dir / "alibaba-gpu-v2023"
    try:
        seeds = parse_seeds(args.seeds)
        policies = [p.strip() for p in args.policy.split(",") if p.strip()]
        for policy in policies:
            if policy not in PLACEMENT_POLICIES:
                raise ValueError(f"--policy: unknown policy {policy!r}; known: "
                                 f"{', '.join(PLACEMENT_POLICIES)}")
        policy_args = parse_policy_args(args.policy_arg, policies)
        traces = [resolve_trace(t, traces_dir=alibaba) for t in args.trace.split(",")]
        nodes_csv = Path(args.nodes) if args.nodes else alibaba / NODE_LIST
        load_nodes(nodes_csv)  # fail early on a bad node list
        for path in traces:
            load_pods(path)
        if args.bound:
            require_solver()
    except BoundError as exc:
        print(f"error: --bound: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TraceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = [_Run(str(path), str(nodes_csv), trace_name(path), policy, seed, args.tune,
                 args.limit, args.tie_break, str(out),
                 policy_args if policy in LEARNING_POLICIES else ())
            for path in traces for policy in policies for seed in seeds]
    results = _run_all(runs, max(1, min(args.jobs, len(runs))))
    curves = [read_run_csv(Path(path)) for path, _ in sorted(results)]
    write_summary_csv(out / "summary.csv", summarize(curves))
    per_pod = sum(s for _, s in results) / len(results)
    print(f"{len(runs)} run(s); {1000 * per_pod:.1f} ms per pod; wrote {out / 'summary.csv'}")
    bound: dict[str, dict[int, float]] | None = None
    if args.bound:
        try:
            rows = _bound_all(traces, nodes_csv, seeds, args, max(1, min(args.jobs, len(runs))))
        except BoundError as exc:
            print(f"error: --bound: {exc}", file=sys.stderr)
            return 2
        write_bound_csv(out / "bound.csv", rows)
        bound = bound_medians(rows)
        for trace, levels in sorted(bound.items()):
            shown = ", ".join(f"{level} % {value:.2f}" for level, value in levels.items())
            print(f"bound {trace} (median over seeds): {shown}")
        print(f"wrote {out / 'bound.csv'}")
    paper_csv = traces_dir / "fgd-results" / "analysis_allo_discrete.csv"
    print(_plot(curves, paper_csv=paper_csv if paper_csv.is_file() else None,
                path=out / "replay.png", bound=bound))
    return 0


def add_replay_arguments(sub: Any) -> None:
    replay = sub.add_parser(
        "replay", help="replay an Alibaba GPU trace through the scheduler (FGD paper method)")
    replay.add_argument("--trace", required=True,
                        help="trace name(s) (default, cpu050, ...) or pod-list CSVs, "
                             "comma-separated")
    replay.add_argument("--nodes", help=f"node-list CSV (default: <traces>/{NODE_LIST})")
    replay.add_argument("--policy", default="fgd",
                        help=f"comma-separated of {', '.join(PLACEMENT_POLICIES)} (default fgd)")
    replay.add_argument("--policy-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="an argument of fgd-learned (scale, cards, popularity, starved, "
                             "reserve), repeatable; see docs/replay.md")
    replay.add_argument("--seeds", default="42", help="seeds, e.g. 42-51 or 42,43 (default 42)")
    replay.add_argument("--tune", type=float, default=1.3,
                        help="submit pods up to this × the GPU capacity (default 1.3)")
    replay.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="runs side by side in processes (default: the machine's cores)")
    replay.add_argument("--out", default="replay-out", help="output folder (default replay-out)")
    replay.add_argument("--limit", type=int, help="only the first N pods of each run")
    replay.add_argument("--tie-break", choices=TIE_BREAKS, default="first",
                        help="equal scores: first node in the run's node order (the paper's "
                             "simulator, default) or uniformly drawn (Volcano)")
    replay.add_argument("--bound", action="store_true",
                        help="also compute the unallocated GPU %% no placement of the same pods "
                             "goes below (bound.csv; needs scipy); see docs/replay.md")
    replay.add_argument("--traces-dir", default=str(DEFAULT_TRACES),
                        help="folder holding alibaba-gpu-v2023/ and fgd-results/ "
                             "(default ../shared/traces)")
    replay.set_defaults(func=_replay)


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - via scheduler.commands.cli
    parser = argparse.ArgumentParser(prog="lahar")
    add_replay_arguments(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))
