#!/usr/bin/env python3
"""Plain pods through ``lahar run`` and through kube-scheduler, side by side on one API server.

    python hack/bench_peer.py --kubeconfig K --peer kube-scheduler PATH
                              [--nodes 200] [--pods 2000] [--order lahar,kube-scheduler]
                              [--arrival-rate 200 --arrival-seconds 30]

The fake Nodes are created once (labelled and tainted for this run only). Then, for each
scheduler in ``--order``: a fresh namespace, ``--pods`` plain pods in it (no PodGroup, as a
Deployment or a Job makes them) naming that scheduler, the scheduler started, and a watch
timing each bind. ``*_first_bind_s`` and ``*_all_bound_s`` count from the process start;
``*_pods_per_second`` = pods / (last bind − first bind). ``lahar_sync_s`` is when ``lahar run``
logged that its caches had synced and the loop began; ``lahar_first_bind_after_sync_s`` the
first bind after that. kube-scheduler runs with client QPS and burst 5,000 so that the API
server, not its client's rate limit, is the bound. With ``--arrival-rate``, a second phase per
scheduler: pods created at that steady rate for ``--arrival-seconds`` while it runs, and the
p50/p99 of create → bound (``*_arrival_p50_s``, ``*_arrival_p99_s``). Eight threads send the
creates over the project's own kept-alive client; ``*_arrival_sent_per_second`` is the rate
they actually left at (below ``--arrival-rate`` when this machine could not create faster);
``*_arrival_cpu_s`` the scheduler's CPU seconds over that phase. ``*_arrival_watch_p50_s`` and
``*_arrival_watch_p99_s`` are create → first seen by the bench's watch for the same pods: the
API server's part of the latency, which neither scheduler can go below, measured in that
scheduler's phase (the server's load differs between phases). ``*_arrival_server_writes``
counts the write requests the API server served in that phase by verb and resource, from its
``apiserver_request_total``, scraped ``SETTLE_SECONDS`` after the first phase's last bind (the
phase starts then, so that writes trailing the burst do not count in it) and as long after the
phase's last bind (so that status written a cycle later counts in it); and
``*_arrival_writes_per_pod`` is that total less the bench's own creates, per pod created: what
each scheduler, with whatever controller it brings, had the server write per pod while the pods
came. ``lahar run`` holds its PodGroup, status and event writes back while binds wait, so in a
stream the server cannot absorb, part of them is written after the phase and not counted. Both
are absent where the server's ``/metrics`` cannot be read.

The project is byte-compiled before the first start, as an installed wheel is.

``--gangs 8-64``: Lahar alone (kube-scheduler has no gangs), its pods in PodGroups of a random
size in that range (``minMember`` = size) under the default conf; ``raw_bind_8_threads`` is
measured first on the same server (``--baseline-binds`` direct binds from eight threads) and
``lahar_ratio_to_8_threads`` = Lahar's pods/s over it. ``--private`` starts a control plane of
its own for the run (``privk8s.py``: etcd and kube-apiserver on other ports, data in a
temporary folder) instead of ``--kubeconfig``, so that thousands of Nodes load no shared
server. ``--peer-qps``/``--peer-burst`` set kube-scheduler's ``clientConnection``.

Prints one JSON object with those keys, ``all_bound_ratio`` and ``pods_per_second_ratio``
(lahar / kube-scheduler), Lahar's peak RSS, the CPU model and the order of the run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import random
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from apiwrites import server_writes  # noqa: E402
from bench_e2e import (  # noqa: E402
    ROOT,
    RUN_LABEL,
    TAINT,
    Cluster,
    KubeClient,
    api_server,
    bound_at,
    cpu_seconds,
    in_parallel,
    pod_manifest,
    precompile,
    raw_bind_rate,
    undecoded,
    watch_binds,
)
from privk8s import private_server  # noqa: E402
from unwind import unwind_on_sigterm  # noqa: E402

SCHEDULERS = ("lahar", "kube-scheduler")
ARRIVAL_WORKERS = 8
SETTLE_SECONDS = 3.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default="",
                        help="API server to use (default: start the in-repo double)")
    parser.add_argument("--peer", nargs=2, metavar=("NAME", "PATH"),
                        help="the peer to compare with: kube-scheduler and its binary")
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--order", default="lahar,kube-scheduler",
                        help="which scheduler runs first (comma-separated)")
    parser.add_argument("--schedule-period", default="1s", help="lahar run's period")
    parser.add_argument("--arrival-rate", type=float, default=0.0,
                        help="pods per second created while the scheduler runs (0: no phase)")
    parser.add_argument("--arrival-seconds", type=float, default=30.0)
    parser.add_argument("--warmup-binds", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--private", action="store_true",
                        help="start a private etcd + kube-apiserver for the run")
    parser.add_argument("--gangs", default="",
                        help="MIN-MAX: Lahar alone, pods in PodGroups of MIN..MAX members")
    parser.add_argument("--baseline-binds", type=int, default=1000)
    parser.add_argument("--peer-qps", type=int, default=5000)
    parser.add_argument("--peer-burst", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("extra", nargs="*", help="more `lahar run` flags (after --)")
    parser.add_argument("--lahar-wrap", default="",
                        help="a command to run `lahar run` under, e.g. "
                             "'py-spy record --format raw -o lahar.txt --'")
    parser.add_argument("--logs", default="",
                        help="keep each scheduler's log in this folder (default: discarded)")
    args = parser.parse_args(argv)
    order = [name.strip() for name in args.order.split(",") if name.strip()]
    if any(name not in SCHEDULERS for name in order):
        parser.error(f"--order names {order}; known: {', '.join(SCHEDULERS)}")
    if "kube-scheduler" in order and (args.peer is None or args.peer[0] != "kube-scheduler"):
        parser.error("kube-scheduler in --order needs --peer kube-scheduler PATH")
    args.order = order
    if args.gangs:
        low, _, high = args.gangs.partition("-")
        args.gang_range = (int(low), int(high or low))
        if args.order != ["lahar"]:
            parser.error("--gangs runs Lahar alone: give --order lahar")
    return args


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


class Poster:
    """Creates objects from threads, each with its own kept-alive light client (the official
    client's per-request CPU would make populating thousands of objects the longest step)."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self._local = threading.local()

    def post(self, path: str, body: dict[str, Any]) -> None:
        client = getattr(self._local, "client", None)
        if client is None:
            client = KubeClient.from_flags(kubeconfig=self.kubeconfig, qps=0)
            self._local.client = client
        client.request_json("POST", path, body=body)


def plain_pod(poster: Poster, namespace: str, name: str, scheduler: str, run_id: str) -> None:
    poster.post(f"/api/v1/namespaces/{namespace}/pods",
                pod_manifest(namespace, name, scheduler=scheduler, group="", run_id=run_id))


def gang_pods(cluster: Cluster, namespace: str, scheduler: str, run_id: str,
              args: argparse.Namespace) -> list[str]:
    """``args.pods`` pods in PodGroups of ``args.gang_range`` members (minMember = size)."""
    rng = random.Random(args.seed)
    low, high = args.gang_range
    pods: list[str] = []
    calls: list[Callable[[], None]] = []
    group = 0
    while len(pods) < args.pods:
        size = min(rng.randint(low, high), args.pods - len(pods))
        name = f"pg-{group:05d}"
        calls.append(partial(cluster.create_podgroup, namespace, name, size))
        for member in range(size):
            pod = f"{name}-{member:02d}"
            pods.append(pod)
            calls.append(partial(cluster.create_pod, namespace, pod, scheduler=scheduler,
                                 group=name, run_id=run_id))
        group += 1
    in_parallel(8, calls)
    return pods


def node_body(name: str, run_id: str) -> dict[str, Any]:
    """A fake Node of 64 CPU / 256Gi / 110 pods, labelled and tainted for this run."""
    resources = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {RUN_LABEL: run_id,
                                                  "kubernetes.io/hostname": name}},
            "spec": {"taints": [TAINT]},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Fake"}]}}


def start_lahar(kubeconfig: str, scheduler: str, run_id: str, period: str,
                log: int, extra: list[str], wrap: str = "") -> subprocess.Popen[bytes]:
    argv = [*shlex.split(wrap), sys.executable, "-m", "scheduler", "run",
            "--kubeconfig", kubeconfig, "--scheduler-name", scheduler, "--schedule-period", period,
            "--leader-elect=false", "--node-selector", f"{RUN_LABEL}:{run_id}",
            "--listen-address=127.0.0.1:0", "--healthz-address=127.0.0.1:0", "--log-format=json",
            *extra]
    # Its own process group, so that stopping it reaches `lahar run` under a wrapper too (a
    # profiler does not pass SIGTERM on, and a scheduler left running would load later runs).
    return subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), start_new_session=True)


def stop_group(process: subprocess.Popen[bytes], *, wrapped: bool) -> None:
    """Stop a process started in its own group, and whatever it started: SIGINT under a
    wrapper (a profiler writes its output on it; ``lahar run`` stops gracefully), SIGTERM
    otherwise, SIGKILL for what is left after 30 s."""
    try:
        os.killpg(process.pid, signal.SIGINT if wrapped else signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def start_kube_scheduler(binary: str, kubeconfig: str, scheduler: str, workdir: Path,
                         log: int, *, qps: int = 5000,
                         burst: int = 5000) -> subprocess.Popen[bytes]:
    config = workdir / f"{scheduler}.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"clientConnection: {{kubeconfig: {kubeconfig}, qps: {qps}, burst: {burst}}}\n"
        "leaderElection: {leaderElect: false}\n"
        f"profiles:\n- schedulerName: {scheduler}\n")
    return subprocess.Popen([binary, "--config", str(config), "--secure-port", "0"],
                            stdout=log, stderr=subprocess.STDOUT)


def lahar_sync_seconds(log_path: str, started_wall: float) -> float | None:
    """When ``lahar run`` logged its loop's start (caches synced), from the process start."""
    try:
        lines = Path(log_path).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "scheduling" and entry.get("timestamp"):
            stamp = datetime.datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
            return stamp.timestamp() - started_wall
    return None


def arrivals(cluster: Cluster, namespace: str, scheduler: str, run_id: str, *, rate: float,
             seconds: float, timeout: float) -> tuple[list[float], list[float], float]:
    """Create pods at ``rate`` for ``seconds``; each one's create → bound latency, sorted, the
    same pods' create → first seen by the bench's watch, sorted, and the rate at which the
    creates were actually sent.

    Creates go to one pool of workers kept for the whole phase (each with its own kept-alive
    client), each submitted at its due time; a pod's clock starts when its create is sent.
    """
    names = [f"arrive-{i:06d}" for i in range(int(rate * seconds))]
    created: dict[str, float] = {}
    seen: dict[str, float] = {}
    appeared: dict[str, float] = {}

    def watcher() -> None:
        seen.update(bound_at(cluster, namespace=namespace, pods=set(names), started=0.0,
                             timeout=timeout, first_seen=appeared))

    # The project's own light client: the official one costs a few ms of CPU a create, which on
    # a small machine caps the rate below what is asked and takes CPU from the scheduler.
    light = KubeClient.from_flags(kubeconfig=cluster.kubeconfig, qps=0)
    path = f"/api/v1/namespaces/{namespace}/pods"

    def create(name: str) -> None:
        body = pod_manifest(namespace, name, scheduler=scheduler, group="", run_id=run_id)
        created[name] = time.perf_counter()
        light.request_json("POST", path, body=body)

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    with ThreadPoolExecutor(max_workers=ARRIVAL_WORKERS) as pool:
        light.request_json("GET", "/version")  # connect before the clock starts
        time.sleep(1.0)  # the watch is open before the first pod
        start = time.perf_counter()
        futures = []
        for i, name in enumerate(names):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(create, name))
        for future in futures:
            future.result()
    light.close()
    sent = sorted(created.values())
    span = sent[-1] - sent[0] if len(sent) > 1 else 0.0
    thread.join(timeout)
    latencies = sorted(max(seen[n] - created[n], 0.0) for n in names if n in seen)
    watched = sorted(max(appeared[n] - created[n], 0.0) for n in names if n in appeared)
    return latencies, watched, (len(sent) - 1) / span if span > 0 else 0.0


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(share) - 1]
                 if len(values) > 1 else values[0], 3)


def one_scheduler(name: str, args: argparse.Namespace, cluster: Cluster, kubeconfig: str,
                  run_id: str, workdir: Path) -> dict[str, Any]:
    namespace = f"lahar-peer-{run_id}-{name}"
    scheduler = f"{name}-{run_id}"
    undecoded(cluster.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": namespace}})
    if args.gangs:
        pods = gang_pods(cluster, namespace, scheduler, run_id, args)
    else:
        pods = [f"p-{i:06d}" for i in range(args.pods)]
        poster = Poster(kubeconfig)
        in_parallel(8, [partial(plain_pod, poster, namespace, p, scheduler, run_id)
                        for p in pods])
    log_path = str(workdir / f"{name}.log")
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    started_wall = time.time()
    started = time.perf_counter()
    if name == "lahar":
        process = start_lahar(kubeconfig, scheduler, run_id, args.schedule_period, log,
                              args.extra, args.lahar_wrap)
    else:
        process = start_kube_scheduler(args.peer[1], kubeconfig, scheduler, workdir, log,
                                       qps=args.peer_qps, burst=args.peer_burst)
    os.close(log)
    result: dict[str, Any] = {}
    key = name.replace("-", "_")
    try:
        times = watch_binds(cluster, namespace=namespace, pods=set(pods), started=started,
                            timeout=args.timeout, alive=lambda: process.poll() is None)
        if len(times) < len(pods):
            ended = process.poll()
            why = f"exited with {ended}" if ended is not None else f"in {args.timeout:.0f}s"
            raise SystemExit(f"{name}: only {len(times)} of {len(pods)} pods bound, {why}; "
                             f"log: {log_path}")
        cpu = cpu_seconds(process.pid)
        result[f"{key}_cpu_s"] = None if cpu is None else round(cpu, 2)
        span = times[-1] - times[0]
        result[f"{key}_first_bind_s"] = round(times[0], 3)
        result[f"{key}_all_bound_s"] = round(times[-1], 3)
        result[f"{key}_pods_per_second"] = round(len(times) / span, 1) if span > 0 else None
        if args.arrival_rate > 0:
            time.sleep(SETTLE_SECONDS)
            writes_before = server_writes(kubeconfig)
            cpu = cpu_seconds(process.pid)
            latencies, watched, sent_rate = arrivals(cluster, namespace, scheduler, run_id,
                                                     rate=args.arrival_rate,
                                                     seconds=args.arrival_seconds,
                                                     timeout=args.timeout)
            after = cpu_seconds(process.pid)
            result[f"{key}_arrival_cpu_s"] = (None if after is None or cpu is None
                                             else round(after - cpu, 2))
            result[f"{key}_arrival_sent_per_second"] = round(sent_rate, 1)
            result[f"{key}_arrival_p50_s"] = percentile(latencies, 50)
            result[f"{key}_arrival_p99_s"] = percentile(latencies, 99)
            result[f"{key}_arrival_bound"] = len(latencies)
            result[f"{key}_arrival_watch_p50_s"] = percentile(watched, 50)
            result[f"{key}_arrival_watch_p99_s"] = percentile(watched, 99)
            time.sleep(SETTLE_SECONDS)
            writes_after = server_writes(kubeconfig)
            created = int(args.arrival_rate * args.arrival_seconds)
            if writes_before is not None and writes_after is not None and created:
                served = writes_after - writes_before
                result[f"{key}_arrival_server_writes"] = dict(sorted(served.items()))
                result[f"{key}_arrival_writes_per_pod"] = round(
                    (served.total() - created) / created, 2)
        result[f"{key}_peak_rss_mb"] = peak_rss_mb(process.pid)
        if name == "lahar":
            sync = lahar_sync_seconds(log_path, started_wall)
            result["lahar_sync_s"] = None if sync is None else round(sync, 3)
            if sync is not None:
                result["lahar_first_bind_after_sync_s"] = round(times[0] - sync, 3)
    finally:
        if name == "lahar":
            stop_group(process, wrapped=bool(args.lahar_wrap))
        else:
            process.terminate()
            process.wait(30)
        if not args.private:  # a private server is thrown away whole
            cluster.remove(namespace, [])
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    nodes = [f"lahar-peer-{run_id}-{i:05d}" for i in range(args.nodes)]
    result: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "order": args.order,
                              "cpu": cpu_model(), "schedule_period": args.schedule_period,
                              "lahar_run_flags": args.extra}
    precompile()
    server = private_server() if args.private else api_server(args.kubeconfig)
    with server as kubeconfig, \
            tempfile.TemporaryDirectory(prefix="lahar-peer-") as work:
        cluster = Cluster(kubeconfig)
        cluster.ensure_crds()
        warm = f"lahar-peer-{run_id}-warmup"
        undecoded(cluster.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": warm}})
        try:
            poster = Poster(kubeconfig)
            in_parallel(8, [partial(poster.post, "/api/v1/nodes", node_body(n, run_id))
                            for n in nodes])
            if args.warmup_binds > 0:
                raw_bind_rate(cluster, namespace=warm, nodes=nodes, count=args.warmup_binds,
                              threads=8, run_id=run_id, tag="w")
            if args.gangs:
                result["raw_bind_8_threads"] = round(raw_bind_rate(
                    cluster, namespace=warm, nodes=nodes, count=args.baseline_binds,
                    threads=8, run_id=run_id, tag="b"), 1)
            if not args.private:
                cluster.remove(warm, [])
            logs = Path(args.logs or work)
            logs.mkdir(parents=True, exist_ok=True)
            for name in args.order:
                result.update(one_scheduler(name, args, cluster, kubeconfig, run_id, logs))
        finally:
            if not args.private:
                cluster.remove(warm, nodes)
    lahar, peer = result.get("lahar_all_bound_s"), result.get("kube_scheduler_all_bound_s")
    if lahar and peer:
        result["all_bound_ratio"] = round(lahar / peer, 3)
    lahar, peer = (result.get("lahar_pods_per_second"),
                   result.get("kube_scheduler_pods_per_second"))
    if lahar and peer:
        result["pods_per_second_ratio"] = round(lahar / peer, 3)
    if lahar and result.get("raw_bind_8_threads"):
        result["lahar_ratio_to_8_threads"] = round(lahar / result["raw_bind_8_threads"], 3)
    return result


def main(argv: list[str] | None = None) -> int:
    unwind_on_sigterm()
    print(json.dumps(run(parse_args(argv))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
