"""Many replays side by side: worker processes, their progress, and Ctrl-C.

``lahar replay`` runs every (trace, policy, seed) as a :class:`ReplayJob`, in this process or
in ``--jobs`` worker processes. The workers ignore Ctrl-C: the parent handles it, ends them at
once (a run cannot be resumed, so there is nothing to wait for) and says what it left; a
worker never prints a traceback of its own. Progress goes to stderr, a bar redrawn in place
only when stderr is a terminal and otherwise one line per finished run, so logs stay short.
"""

from __future__ import annotations

import multiprocessing
import queue as queues
import signal
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from scheduler.replay.bound import BoundRow, run_bound
from scheduler.replay.metrics import write_run_csv
from scheduler.replay.trace import load_nodes, load_pods, trace_name

__all__ = ["Progress", "ReplayJob", "bound_all", "execute", "run_all", "submit", "worker_pool"]


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """One (trace, policy, seed) of a command line; paths as text, so that it pickles."""

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


_worker_queue: Any = None
"""In a worker process: where :func:`execute` reports progress (set by :func:`_init_worker`)."""


def execute(run: ReplayJob, queue: Any = None) -> tuple[str, float]:
    """One replay; reports (run id, pods done, pods total) to ``queue`` (in a worker, the
    queue the pool was started with)."""
    from scheduler.replay.run import run_replay

    run_id = run.csv_path.name
    sink = queue if queue is not None else _worker_queue

    def progress(done: int, total: int) -> None:
        if sink is not None and (done % 50 == 0 or done == total):
            sink.put((run_id, done, total))

    result = run_replay(nodes=load_nodes(Path(run.nodes_csv)), pods=load_pods(Path(run.pods_csv)),
                        policy=run.policy, seed=run.seed, tune=run.tune, limit=run.limit,
                        tie_break=run.tie_break, progress=progress,
                        policy_args=dict(run.policy_args))
    last = max((r.arrived_pct for r in result.recorder.buckets()), default=0)
    write_run_csv(run.csv_path, result.recorder.buckets(last=max(last, 0)), trace=run.trace,
                  policy=run.policy, seed=run.seed)
    return str(run.csv_path), result.seconds_per_pod


class Progress:
    """Progress over all pods of all runs on ``stream``. On a terminal, a one-line bar redrawn
    in place; elsewhere (a log file, CI, a pipe) no bar, only a line per finished run."""

    def __init__(self, runs: int, *, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runs = runs
        self.finished = 0
        self.counts: dict[str, tuple[int, int]] = {}
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._drawn = False

    def update(self, run_id: str, done: int, total: int) -> None:
        self.counts[run_id] = (done, total)
        if self.tty:
            self._draw()

    def run_done(self, run_id: str) -> None:
        self.finished += 1
        if self.tty:
            self._draw()
        else:
            self.stream.write(f"replay: {self.finished}/{self.runs} runs done ({run_id}), "
                              f"{self.clock() - self.started:.0f}s\n")
            self.stream.flush()

    def _draw(self) -> None:
        done = sum(d for d, _ in self.counts.values())
        known = [t for _, t in self.counts.values()]
        # Runs not started yet are assumed as long as the average started one.
        total = sum(known) + (self.runs - len(known)) * (sum(known) // max(len(known), 1))
        share = min(done / total, 1.0) if total else 0.0
        status = (f"{100 * share:5.1f}% {self.finished}/{self.runs} runs, "
                  f"{self.clock() - self.started:6.0f}s")
        self.stream.write(f"\rreplay [{'#' * int(30 * share):<30}] {status}")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Ends the bar's line, so that what follows starts on a line of its own."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


class _Direct:
    """The progress queue of a run in this process."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def put(self, item: tuple[str, int, int]) -> None:
        self.progress.update(*item)


def _init_worker(queue: Any) -> None:
    """In each worker process: Ctrl-C is the parent's to handle (it ends the workers), so a
    worker never prints a traceback of its own."""
    global _worker_queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_queue = queue


@contextmanager
def worker_pool(jobs: int, queue: Any = None) -> Iterator[ProcessPoolExecutor]:
    """Worker processes that leave Ctrl-C to this one. When the block ends by an exception
    (Ctrl-C above all), the workers are ended at once instead of finishing their runs."""
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker, initargs=(queue,))
    try:
        yield pool
    except BaseException:
        _end_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _end_workers(pool: ProcessPoolExecutor) -> None:
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=10)


def submit(pool: ProcessPoolExecutor, call: Callable[..., Any], *args: Any) -> Future[Any]:
    """``pool.submit`` with Ctrl-C ignored meanwhile: workers forked by it start ignoring it,
    before their initializer runs."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return pool.submit(call, *args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _drain(queue: Any, progress: Progress) -> None:
    while True:
        try:
            item = queue.get_nowait()
        except queues.Empty:
            return
        progress.update(*item)


def run_all(runs: list[ReplayJob], jobs: int, progress: Progress) -> list[tuple[str, float]]:
    results: list[tuple[str, float]] = []
    if jobs <= 1:
        for run in runs:
            results.append(execute(run, _Direct(progress)))
            progress.run_done(run.csv_path.name)
        return results
    reports: Any = multiprocessing.Queue()
    with worker_pool(jobs, reports) as pool:
        pending = {submit(pool, execute, run) for run in runs}
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            _drain(reports, progress)
            for future in finished:
                path, seconds = future.result()
                results.append((path, seconds))
                progress.run_done(Path(path).name)
    return results


def _bound_one(pods_csv: str, nodes_csv: str, trace: str, seed: int, tune: float,
               limit: int | None) -> list[tuple[str, int, BoundRow]]:
    rows = run_bound(nodes=load_nodes(Path(nodes_csv)), pods=load_pods(Path(pods_csv)),
                     seed=seed, tune=tune, limit=limit)
    return [(trace, seed, row) for row in rows]


def bound_all(traces: dict[Path, Path], seeds: list[int], *, tune: float, limit: int | None,
              jobs: int) -> list[tuple[str, int, BoundRow]]:
    """The clairvoyant bound of every (trace, seed), ``jobs`` processes side by side;
    ``traces`` maps each pod list to its node list."""
    work = [(str(path), str(nodes_csv), trace_name(path), seed, tune, limit)
            for path, nodes_csv in traces.items() for seed in seeds]
    rows: list[tuple[str, int, BoundRow]] = []
    if jobs <= 1:
        for item in work:
            rows.extend(_bound_one(*item))
    else:
        with worker_pool(jobs) as pool:
            for future in [submit(pool, _bound_one, *item) for item in work]:
                rows.extend(future.result())
    return sorted(rows, key=lambda r: (r[0], r[1], r[2].arrived_pct))
