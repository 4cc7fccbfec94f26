#!/usr/bin/env python3
"""Start-up of ``lahar run`` at scale: cache sync time and memory against the API server double.

    python hack/bench_startup.py --nodes 10000 --pods 100000 [-- EXTRA lahar run FLAGS...]

The in-repository API server double (``python -m tests.apiserver``) is started in a subprocess
holding ``--nodes`` Nodes and ``--pods`` running pods in PodGroups of 4 (10 pods a node at
10,000 × 100,000), all of them for ``lahar run``'s scheduler name. Then ``lahar run`` is started
with ``--leader-elect=false`` and ``/readyz`` is polled: it answers 200 once every collection was
listed into the cache. Its memory is read from ``/proc``.

Prints one JSON object: ``sync_seconds`` (process start to ``/readyz`` 200, imports and
connection included), ``rss_mb`` at that moment, ``peak_rss_mb`` (the high-water mark by then),
``rss_after_cycles_mb`` / ``peak_after_cycles_mb`` a few scheduling cycles later, and the run's
shape.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from unwind import unwind_on_sigterm

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for the cache to sync")
    parser.add_argument("--cycles-wait", type=float, default=5.0,
                        help="seconds to let it schedule after the sync before measuring again")
    parser.add_argument("extra", nargs="*", help="more `lahar run` flags (after --)")
    return parser.parse_args(argv)


def memory_mb(pid: int) -> tuple[float, float]:
    """(current, peak) resident memory of ``pid`` in MiB."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return round(fields["VmRSS"], 1), round(fields["VmHWM"], 1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as reply:
            return int(reply.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory(prefix="lahar-startup-") as workdir:
        kubeconfig = str(Path(workdir) / "kubeconfig")
        made = time.perf_counter()
        double = subprocess.Popen(
            [sys.executable, "-m", "tests.apiserver", "--kubeconfig", kubeconfig,
             "--fake-nodes", str(args.nodes), "--fake-pods", str(args.pods)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        process: subprocess.Popen[bytes] | None = None
        try:
            assert double.stdout is not None
            double.stdout.readline()  # "serving on ...": populated, kubeconfig written
            populated = time.perf_counter() - made
            port = free_port()
            log_fd, log_name = tempfile.mkstemp(prefix="lahar-startup-", suffix=".log")
            argv = [sys.executable, "-m", "scheduler", "run", "--kubeconfig", kubeconfig,
                    "--leader-elect=false", "--enable-healthz",
                    f"--healthz-address=127.0.0.1:{port}", "--log-format=json",
                    f"--resource-sync-timeout={int(args.timeout)}s", *args.extra]
            started = time.perf_counter()
            process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log_fd,
                                       stderr=subprocess.STDOUT)
            os.close(log_fd)
            deadline = started + args.timeout
            while not ready(port):
                if process.poll() is not None or time.perf_counter() > deadline:
                    raise SystemExit(f"lahar run did not sync; its log: {log_name}")
                time.sleep(0.1)
            synced = time.perf_counter() - started
            rss, peak = memory_mb(process.pid)
            time.sleep(args.cycles_wait)
            rss_later, peak_later = memory_mb(process.pid)
        finally:
            if process is not None:
                process.terminate()
                process.wait(30)
            double.terminate()
            double.wait(30)
    return {
        "server": "double", "nodes": args.nodes, "pods": args.pods,
        "sync_seconds": round(synced, 2),
        "rss_mb": rss, "peak_rss_mb": peak,
        "rss_after_cycles_mb": rss_later, "peak_after_cycles_mb": peak_later,
        "double_populate_seconds": round(populated, 2),
        "lahar_run_flags": args.extra,
    }


def main(argv: list[str] | None = None) -> int:
    unwind_on_sigterm()
    print(json.dumps(run(parse_args(argv))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
