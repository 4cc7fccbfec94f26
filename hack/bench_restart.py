#!/usr/bin/env python3
"""Restart of ``lahar run`` under a large running load, on a real kube-apiserver.

    python hack/bench_restart.py --private [--nodes 5000 --running 100000 --groups 40000
                                 --pending 10000] [--profile OUT.prof] [-- EXTRA FLAGS...]

Steps, on one API server (``--private``: a control plane of its own, see ``privk8s.py``):

1. ``--nodes`` fake Nodes; ``--running`` pods created already bound (``spec.nodeName`` set,
   spread round-robin) in ``--groups`` PodGroups (sizes as even as the counts allow,
   ``minMember`` = size).
2. ``lahar run`` is started and left until the API server has served no write for
   ``--quiet`` seconds: it has written each running PodGroup's status once, as it does for
   a job it meets for the first time. That is the steady state before the restart.
3. It is killed with SIGKILL (no graceful stop). ``--pending`` pods are created in PodGroups
   of ``--pending-group`` while no scheduler runs.
4. ``lahar run`` is started again: ``sync_s`` (process start to the log line that its caches
   synced and the loop began), ``first_bind_s`` and ``all_bound_s`` (process start to the
   first and the last of the pending pods seen bound by a watch), and the writes the API
   server served from the start until ``--quiet`` seconds without a write after the last
   bind (``restart_writes``, by verb and resource, from ``apiserver_request_total``).
   ``running_podgroups_rewritten`` counts the running PodGroups, among those whose status the
   first start wrote, whose resourceVersion moved over the second start: a steady job's
   status re-written after a restart shows there. Those the first start never wrote (it
   was killed at ``--settle-timeout``: ``first_start_settle_timed_out``) are counted apart,
   ``running_podgroups_unwritten_before_restart``.

``--wait-for FILE`` holds the second start (after the kill, before the pending pods) until FILE
exists, so that the checkout can be moved to another build first and that build measured
against the same populated server.

``--profile OUT`` runs the second start under cProfile (``python -m cProfile -o OUT``), stopped
with SIGINT after the last bind so that the profile is written.

Prints one JSON object with those figures, the peak RSS of each start and the CPU model.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from apiwrites import server_writes  # noqa: E402
from bench_e2e import (  # noqa: E402
    ROOT,
    RUN_LABEL,
    VOLCANO,
    Cluster,
    KubeClient,
    api_server,
    in_parallel,
    pod_manifest,
    precompile,
    watch_binds,
)
from bench_peer import Poster, cpu_model, lahar_sync_seconds, node_body, peak_rss_mb  # noqa: E402
from privk8s import private_server  # noqa: E402
from unwind import unwind_on_sigterm  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default="")
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--running", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=40_000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--pending-group", type=int, default=4)
    parser.add_argument("--quiet", type=float, default=5.0,
                        help="seconds without a server write that count as settled")
    parser.add_argument("--settle-timeout", type=float, default=900.0,
                        help="seconds the first start may take to write every running "
                             "PodGroup's status (first_start_settle_timed_out says it did not)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--profile", default="", help="cProfile output of the second start")
    parser.add_argument("--logs", default="")
    parser.add_argument("--wait-for", default="",
                        help="hold the second start until this file exists")
    parser.add_argument("extra", nargs="*", help="more `lahar run` flags (after --)")
    return parser.parse_args(argv)


def group_body(namespace: str, name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": "/".join(VOLCANO), "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"minMember": size}}


def populate(poster: Poster, *, namespace: str, scheduler: str, run_id: str,
             nodes: list[str], running: int, groups: int) -> None:
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    groups_path = f"/apis/{'/'.join(VOLCANO)}/namespaces/{namespace}/podgroups"
    in_parallel(8, [partial(poster.post, "/api/v1/nodes", node_body(n, run_id)) for n in nodes])
    calls: list[Callable[[], None]] = []
    index = 0
    for g in range(groups):
        size = running // groups + (1 if g < running % groups else 0)
        name = f"run-{g:06d}"
        calls.append(partial(poster.post, groups_path, group_body(namespace, name, size)))
        for member in range(size):
            body = pod_manifest(namespace, f"{name}-{member}", scheduler=scheduler, group=name,
                                run_id=run_id)
            body["spec"]["nodeName"] = nodes[index % len(nodes)]
            index += 1
            calls.append(partial(poster.post, pods_path, body))
    in_parallel(8, calls)


def pending_pods(poster: Poster, *, namespace: str, scheduler: str, run_id: str,
                 count: int, size: int) -> list[str]:
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    groups_path = f"/apis/{'/'.join(VOLCANO)}/namespaces/{namespace}/podgroups"
    names: list[str] = []
    calls: list[Callable[[], None]] = []
    group = 0
    while len(names) < count:
        members = min(size, count - len(names))
        name = f"new-{group:05d}"
        calls.append(partial(poster.post, groups_path, group_body(namespace, name, members)))
        for member in range(members):
            pod = f"{name}-{member}"
            names.append(pod)
            calls.append(partial(poster.post, pods_path, pod_manifest(
                namespace, pod, scheduler=scheduler, group=name, run_id=run_id)))
        group += 1
    in_parallel(8, calls)
    return names


def group_versions(kubeconfig: str, namespace: str) -> dict[str, tuple[str, bool]]:
    """Each PodGroup's resourceVersion (one that moved was written) and whether its status
    was written at all (it has a phase)."""
    light = KubeClient.from_flags(kubeconfig=kubeconfig, qps=0)
    try:
        listing = light.request_json(
            "GET", f"/apis/{'/'.join(VOLCANO)}/namespaces/{namespace}/podgroups")
    finally:
        light.close()
    return {g["metadata"]["name"]: (g["metadata"]["resourceVersion"],
                                    bool((g.get("status") or {}).get("phase")))
            for g in listing.get("items") or []}


def settle(kubeconfig: str, *, quiet: float, timeout: float) -> float:
    """Wait until the server served no write for ``quiet`` seconds, or ``timeout``; the
    seconds waited (``timeout`` or more: it did not settle)."""
    start = time.monotonic()
    last = server_writes(kubeconfig)
    still = time.monotonic()
    while time.monotonic() - start < timeout:
        time.sleep(1.0)
        now = server_writes(kubeconfig)
        if now != last:
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= quiet:
            break
    return time.monotonic() - start


def start(kubeconfig: str, scheduler: str, run_id: str, log_path: str, extra: list[str],
          profile: str = "") -> subprocess.Popen[bytes]:
    wrap = ["-m", "cProfile", "-o", profile] if profile else []
    argv = [sys.executable, *wrap, "-m", "scheduler", "run", "--kubeconfig", kubeconfig,
            "--scheduler-name", scheduler, "--leader-elect=false",
            "--node-selector", f"{RUN_LABEL}:{run_id}", "--listen-address=127.0.0.1:0",
            "--healthz-address=127.0.0.1:0", "--log-format=json", *extra]
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        return subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
    finally:
        os.close(log)


def run(args: argparse.Namespace) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    namespace = f"lahar-restart-{run_id}"
    scheduler = f"lahar-restart-{run_id}"
    nodes = [f"lahar-restart-{run_id}-{i:05d}" for i in range(args.nodes)]
    result: dict[str, Any] = {"nodes": args.nodes, "running": args.running,
                              "groups": args.groups, "pending": args.pending,
                              "pending_group": args.pending_group, "cpu": cpu_model(),
                              "lahar_run_flags": args.extra}
    precompile()
    server = private_server() if args.private else api_server(args.kubeconfig)
    with server as kubeconfig, tempfile.TemporaryDirectory(prefix="lahar-restart-") as work:
        logs = Path(args.logs or work)
        logs.mkdir(parents=True, exist_ok=True)
        cluster = Cluster(kubeconfig)
        cluster.ensure_crds()
        poster = Poster(kubeconfig)
        poster.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": namespace}})
        process: subprocess.Popen[bytes] | None = None
        try:
            made = time.perf_counter()
            populate(poster, namespace=namespace, scheduler=scheduler, run_id=run_id,
                     nodes=nodes, running=args.running, groups=args.groups)
            result["populate_s"] = round(time.perf_counter() - made, 1)
            began = time.perf_counter()
            first_log = str(logs / "first.log")
            process = start(kubeconfig, scheduler, run_id, first_log, args.extra)
            while lahar_sync_seconds(first_log, 0.0) is None:
                if process.poll() is not None or time.perf_counter() - began > args.timeout:
                    raise SystemExit(f"the first start did not sync; log: {first_log}")
                time.sleep(0.5)
            waited = settle(kubeconfig, quiet=args.quiet, timeout=args.settle_timeout)
            result["first_start_settled_s"] = round(time.perf_counter() - began - args.quiet, 1)
            result["first_start_settle_timed_out"] = waited >= args.settle_timeout
            result["first_start_peak_rss_mb"] = peak_rss_mb(process.pid)
            process.send_signal(signal.SIGKILL)
            process.wait(30)
            process = None
            if args.wait_for:
                print(f"first start killed; waiting for {args.wait_for}", file=sys.stderr,
                      flush=True)
                while not Path(args.wait_for).exists():
                    time.sleep(2.0)
                result["second_start_commit"] = subprocess.run(
                    ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                    text=True, check=False).stdout.strip()
            names = pending_pods(poster, namespace=namespace, scheduler=scheduler,
                                 run_id=run_id, count=args.pending, size=args.pending_group)
            settle(kubeconfig, quiet=2.0, timeout=60.0)
            versions = group_versions(kubeconfig, namespace)
            before = server_writes(kubeconfig)
            log_path = str(logs / "second.log")
            started_wall = time.time()
            started = time.perf_counter()
            process = start(kubeconfig, scheduler, run_id, log_path, args.extra, args.profile)
            times = watch_binds(cluster, namespace=namespace, pods=set(names), started=started,
                                timeout=args.timeout,
                                alive=lambda: process is not None and process.poll() is None)
            if len(times) < len(names):
                raise SystemExit(f"only {len(times)} of {len(names)} pending pods bound; "
                                 f"log: {log_path}")
            sync = lahar_sync_seconds(log_path, started_wall)
            result["sync_s"] = None if sync is None else round(sync, 2)
            result["first_bind_s"] = round(times[0], 2)
            result["all_bound_s"] = round(times[-1], 2)
            result["pods_per_second"] = round(len(times) / max(times[-1] - times[0], 1e-9), 1)
            settle(kubeconfig, quiet=args.quiet, timeout=args.settle_timeout)
            result["peak_rss_mb"] = peak_rss_mb(process.pid)
            after = server_writes(kubeconfig)
            if before is not None and after is not None:
                served = after - before
                result["restart_writes"] = dict(sorted(served.items()))
                result["podgroup_writes"] = sum(
                    v for k, v in served.items() if k.split(" ", 1)[1].startswith("podgroups"))
            now = group_versions(kubeconfig, namespace)
            steady = {name: version for name, (version, written) in versions.items()
                      if name.startswith("run-") and written}
            # a group the first start never got to write is written now: that is not a
            # re-write, and counted apart
            result["running_podgroups_unwritten_before_restart"] = sum(
                1 for name, (_, written) in versions.items()
                if name.startswith("run-") and not written)
            result["running_podgroups_rewritten"] = sum(
                1 for name, version in steady.items() if now.get(name, ("", False))[0] != version)
        finally:
            if process is not None:
                process.send_signal(signal.SIGINT if args.profile else signal.SIGTERM)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
            if not args.private:
                cluster.remove(namespace, nodes)
    return result


def main(argv: list[str] | None = None) -> int:
    unwind_on_sigterm()
    print(json.dumps(run(parse_args(argv))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
