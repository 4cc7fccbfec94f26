#!/usr/bin/env python3
"""A burst of plain pods through ``lahar run`` while etcd stops answering for a while.

    python hack/bench_outage.py --kubeconfig K --etcd-pid PID [--nodes 200] [--pods 1000]
                                [--outage-after 2] [--outage 20]

Creates the fake Nodes and ``--pods`` plain pods, starts ``lahar run``, and ``--outage-after``
seconds later (synced, in the middle of the burst) freezes etcd with SIGSTOP for ``--outage``
seconds, then lets it go on (SIGCONT). The API server stays up but cannot read or write, as in
an etcd outage. Prints one JSON object: binds before and after the outage, the longest gap
without a bind after etcd returned (``max_gap_after_return_s``), and when every pod was bound.
Only for a throw-away local API server (``../shared/tools/realk8s``): etcd is frozen for real.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_e2e import ROOT, RUN_LABEL, Cluster, bound_at, plain_burst  # noqa: E402
from unwind import unwind_on_sigterm  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    unwind_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--etcd-pid", type=int, required=True)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--outage-after", type=float, default=5.0,
                        help="seconds after lahar run starts (default 5: synced, mid-burst)")
    parser.add_argument("--outage", type=float, default=20.0)
    parser.add_argument("--schedule-period", default="1s")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    run_id = uuid.uuid4().hex[:6]
    scheduler = f"lahar-outage-{run_id}"
    cluster = Cluster(args.kubeconfig)
    cluster.ensure_crds()
    namespace, nodes, pods = plain_burst(cluster, prefix="lahar-outage", run_id=run_id,
                                         nodes=args.nodes, pods=args.pods, scheduler=scheduler)
    seen: dict[str, float] = {}
    started = time.perf_counter()
    watcher = threading.Thread(target=lambda: seen.update(bound_at(
        cluster, namespace=namespace, pods=set(pods), started=started, timeout=args.timeout)),
        daemon=True)
    watcher.start()
    log = open(f"/tmp/{scheduler}.log", "wb")  # noqa: SIM115 - the child writes it
    process = subprocess.Popen(
        [sys.executable, "-m", "scheduler", "run", "--kubeconfig", args.kubeconfig,
         "--scheduler-name", scheduler, "--schedule-period", args.schedule_period,
         "--leader-elect=false", "--node-selector", f"{RUN_LABEL}:{run_id}",
         "--listen-address=127.0.0.1:0", "--healthz-address=127.0.0.1:0", "--log-format=json"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    outage = (0.0, 0.0)
    try:
        time.sleep(args.outage_after)
        os.kill(args.etcd_pid, signal.SIGSTOP)
        stopped = time.perf_counter() - started
        time.sleep(args.outage)
        os.kill(args.etcd_pid, signal.SIGCONT)
        outage = (stopped, time.perf_counter() - started)
        watcher.join(args.timeout)
    finally:
        os.kill(args.etcd_pid, signal.SIGCONT)
        process.terminate()
        process.wait(30)
        cluster.remove(namespace, nodes)
    times = sorted(seen.values())
    after = [t for t in times if t >= outage[1]]
    marks = [outage[1], *after]
    gaps = [b - a for a, b in itertools.pairwise(marks)]
    print(json.dumps({
        "nodes": args.nodes, "pods": args.pods, "outage_s": args.outage,
        "outage_from_s": round(outage[0], 2), "outage_to_s": round(outage[1], 2),
        "bound": len(times), "bound_before_outage": sum(t < outage[0] for t in times),
        "bound_after_return": len(after),
        "first_bind_after_return_s": round(after[0] - outage[1], 2) if after else None,
        "max_gap_after_return_s": round(max(gaps), 2) if gaps else None,
        "all_bound_s": round(times[-1], 2) if len(times) == len(pods) else None,
        "schedule_period": args.schedule_period, "log": log.name}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
