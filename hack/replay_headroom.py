#!/usr/bin/env python
"""How far a replay's policies are from the best any placement could do, per trace.

For each trace and seed it draws the workload `lahar replay` draws and prints, at 100 %
arrived (median over the seeds, as docs/replay.md's tables):

- bound: the unallocated GPU % no placement of those pods goes below
  (scheduler.replay.bound; needs scipy);
- three online placements on the same idealised cluster the bound uses — every card a
  1000-milli bin, no CPU, memory, card models or node boundaries — that, like every policy of
  `lahar replay`, place each pod that fits the moment it arrives: best fit (the fullest card
  that fits), FGD's fragment change against the shapes seen so far, and the same against the
  exact multiset of the pods still to come (a clairvoyant target, not a clairvoyant order).

The gap between the bound and the online rows is what not knowing the order of arrivals costs
even without CPU and node limits.

    hack/replay_headroom.py [--traces default,cpu050] [--seeds 42-51] [--traces-dir DIR]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.commands.replay import parse_seeds  # noqa: E402
from scheduler.replay.bound import bound_rows  # noqa: E402
from scheduler.replay.metrics import RunRecorder  # noqa: E402
from scheduler.replay.trace import TracePod, generate_workload, load_nodes, load_pods  # noqa: E402

STEPS = 100  # a card in 10-milli steps
Choose = Callable[[list[int], int, Counter[int]], int | None]
"""(cards per free step count, pod's steps, target counts by steps) → free steps to use."""


def best_fit(free: list[int], size: int, target: Counter[int]) -> int | None:
    return next((g for g in range(size, STEPS + 1) if free[g]), None)


def fgd(free: list[int], size: int, target: Counter[int]) -> int | None:
    """The card whose fragment (FGD: free milli too small for a target shape) grows least."""
    total = sum(target.values()) or 1

    def fragment(gap: int) -> float:
        return gap * sum(c for m, c in target.items() if gap < m) / total

    best, low = None, 0.0
    for gap in range(size, STEPS + 1):
        if free[gap]:
            change = fragment(gap - size) - fragment(gap)
            if best is None or change < low - 1e-12:
                best, low = gap, change
    return best


def steps(pod: TracePod) -> int:
    """A part-card pod's 10-milli steps; STEPS per card for whole cards."""
    return pod.gpu_milli // 10 if pod.num_gpu == 1 and pod.gpu_milli < 1000 else STEPS


def online(pods: Sequence[TracePod], cards: int, choose: Choose, *, future: bool) -> float:
    """Unallocated GPU % at the 100 % bucket of an online placement on the card pool."""
    capacity = cards * 1000
    end = len(pods)
    arrived = 0
    for index, pod in enumerate(pods):
        arrived += pod.total_gpu_milli
        if round(100.0 * arrived / capacity) > 101:
            end = index + 1
            break
    pods = pods[:end]
    target: Counter[int] = Counter()
    if future:
        target.update(steps(p) for p in pods if p.num_gpu)
    free = [0] * (STEPS + 1)
    free[STEPS] = cards
    recorder = RunRecorder(capacity)
    arrived = allocated = 0
    for pod in pods:
        arrived += pod.total_gpu_milli
        if pod.num_gpu:
            size = steps(pod)
            if future:
                target[size] -= 1
                if target[size] == 0:
                    del target[size]
            else:
                target[size] += 1
            if size < STEPS:
                gap = choose(free, size, target)
                if gap is not None:
                    free[gap] -= 1
                    free[gap - size] += 1
                    allocated += pod.gpu_milli
            elif free[STEPS] >= pod.num_gpu:
                free[STEPS] -= pod.num_gpu
                free[0] += pod.num_gpu
                allocated += pod.total_gpu_milli
        recorder.record(arrived_milli=arrived, allocated_milli=allocated, fragment_milli=0.0,
                        idle_milli=capacity - allocated, failed_pods=0)
    rows = {r.arrived_pct: r.unallocated_pct for r in recorder.buckets(last=100)}
    return rows[100]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default="default,cpu050,cpu100,cpu200,gpushare20,"
                        "gpushare40,gpushare60,gpushare100,multigpu20,multigpu30,multigpu50")
    parser.add_argument("--seeds", default="42-51")
    parser.add_argument("--traces-dir", default=str(ROOT.parent / "shared" / "traces"))
    args = parser.parse_args()
    data = Path(args.traces_dir) / "alibaba-gpu-v2023"
    if not data.is_dir():
        print(f"error: {data} not found (--traces-dir)", file=sys.stderr)
        return 2
    nodes = load_nodes(data / "openb_node_list_gpu_node.csv")
    cards = sum(n.gpus for n in nodes)
    seeds = parse_seeds(args.seeds)
    print("| trace | bound | best fit (pool) | FGD, shapes seen (pool) | "
          "FGD, exact future shapes (pool) |")
    print("|---|---|---|---|---|")
    for trace in args.traces.split(","):
        pods = load_pods(data / f"openb_pod_list_{trace}.csv")
        cells: dict[str, list[float]] = {"bound": [], "bestfit": [], "seen": [], "future": []}
        for seed in seeds:
            work = generate_workload(pods, capacity_gpu_milli=cards * 1000, tune=1.3,
                                     rng=random.Random(seed)).pods
            cells["bound"].append(bound_rows(work, cards=cards,
                                             levels=(100,))[0].unallocated_pct)
            cells["bestfit"].append(online(work, cards, best_fit, future=False))
            cells["seen"].append(online(work, cards, fgd, future=False))
            cells["future"].append(online(work, cards, fgd, future=True))
        print(f"| {trace} | " + " | ".join(f"{statistics.median(v):.2f}"
                                           for v in cells.values()) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
