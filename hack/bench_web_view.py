#!/usr/bin/env python3
"""What the web view costs a cycle: build time of the published view against cycle time.

Schedules a synthetic cluster (``bench_throughput.synthetic_cluster``) on the embedded cluster
with the web view's publisher building every cycle, and prints, per cycle, the cycle's seconds
and the view's build seconds, then the median share.

    python hack/bench_web_view.py --nodes 1000 --pods 5000 --cycles 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_throughput import CONF, synthetic_cluster

from scheduler.cluster.simulation import build_simulation
from scheduler.conf import load_conf
from scheduler.web.publish import Publisher


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--cycles", type=int, default=4)
    args = parser.parse_args(argv)
    publisher = Publisher(always=True)
    cluster, cache, scheduler = build_simulation(
        synthetic_cluster(args.nodes, args.pods, 0), conf=load_conf(str(CONF)),
        on_close=publisher)
    rows = []
    for _ in range(args.cycles):
        started = time.perf_counter()
        stats = scheduler.run_once()
        cache.flush()
        cluster.clock.advance(1.0)
        cluster.take_changes()
        rows.append({"cycle_seconds": round(stats.seconds, 4),
                     "view_build_seconds": round(publisher.last_build_seconds, 4),
                     "wall_seconds": round(time.perf_counter() - started, 4)})
    share = statistics.median(r["view_build_seconds"] / max(r["cycle_seconds"], 1e-9)
                              for r in rows)
    print(json.dumps({"nodes": args.nodes, "pods": args.pods, "cycles": rows,
                      "median_build_share_of_cycle": round(share, 3)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
