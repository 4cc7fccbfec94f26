#!/usr/bin/env python3
"""SIGTERM to ``lahar run`` in the middle of a burst of plain pods: what its stop leaves unwritten.

    python hack/bench_stop.py --kubeconfig K [--nodes 200] [--pods 1000] [--stop-at 300]
                              [--leader-elect]

Creates the fake Nodes and ``--pods`` plain pods, starts ``lahar run`` and sends it SIGTERM once
``--stop-at`` pods are bound (mid-burst: binds and their status writes queued). Prints one JSON
object read from the scheduler's own log and from the API server afterwards: how many status
writes were queued at the stop and written, how many were left (state and events apart; the
target for state is 0), how long the stop took, and the phases the PodGroups carry afterwards
(fake nodes run no kubelet: a bound pod stays Pending, so its group shows ``Inqueue``, not
``Running``). For a throw-away local API server (``../shared/tools/realk8s``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_e2e import ROOT, RUN_LABEL, Cluster, bound_at, plain_burst, undecoded  # noqa: E402
from bench_peer import cpu_model  # noqa: E402
from unwind import unwind_on_sigterm  # noqa: E402


def stop_summary(log_path: Path) -> dict[str, Any]:
    """The ``status writes flushed at stop`` record of a JSON log (empty when absent)."""
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == "status writes flushed at stop":
            return record
    return {}


def main(argv: list[str] | None = None) -> int:
    unwind_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--stop-at", type=int, default=300, help="bound pods before SIGTERM")
    parser.add_argument("--leader-elect", action="store_true")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    run_id = uuid.uuid4().hex[:6]
    scheduler = f"lahar-stop-{run_id}"
    cluster = Cluster(args.kubeconfig)
    cluster.ensure_crds()
    namespace, nodes, pods = plain_burst(cluster, prefix="lahar-stop", run_id=run_id,
                                         nodes=args.nodes, pods=args.pods, scheduler=scheduler)
    seen: dict[str, float] = {}
    started = time.perf_counter()
    threading.Thread(target=lambda: seen.update(bound_at(
        cluster, namespace=namespace, pods=set(pods), started=started, timeout=args.timeout,
        into=seen)), daemon=True).start()
    log_path = Path(f"/tmp/{scheduler}.log")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "scheduler", "run", "--kubeconfig", args.kubeconfig,
             "--scheduler-name", scheduler, f"--leader-elect={str(args.leader_elect).lower()}",
             "--leader-elect-resource-name", scheduler,
             "--leader-elect-resource-namespace", namespace,
             "--node-selector", f"{RUN_LABEL}:{run_id}", "--listen-address=127.0.0.1:0",
             "--healthz-address=127.0.0.1:0", "--log-format=json"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        deadline = time.perf_counter() + args.timeout
        while len(seen) < args.stop_at and time.perf_counter() < deadline:
            time.sleep(0.01)
        bound_at_stop = len(seen)
        signalled = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
        stop_seconds = time.perf_counter() - signalled
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
    time.sleep(1.0)  # the watch catches up with the last binds
    groups = undecoded(cluster.custom.list_namespaced_custom_object, "scheduling.volcano.sh",
                       "v1beta1", namespace, "podgroups").get("items", [])
    phases = Counter((group.get("status") or {}).get("phase") or "none" for group in groups)
    summary = stop_summary(log_path)
    cluster.remove(namespace, nodes)
    print(json.dumps({
        "nodes": args.nodes, "pods": args.pods, "leader_elect": args.leader_elect,
        "bound_at_sigterm": bound_at_stop, "bound_after_stop": len(seen),
        "exit_code": code, "stop_seconds": round(stop_seconds, 2),
        "status_queued_at_stop": summary.get("queued"),
        "status_written_at_stop": summary.get("written"),
        "status_flush_seconds": summary.get("seconds"),
        "status_dropped_state": summary.get("left_state"),
        "status_dropped_events": summary.get("left_events"),
        "podgroups": len(groups), "podgroup_phases": dict(phases),
        "cpu": cpu_model(), "log": str(log_path)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
