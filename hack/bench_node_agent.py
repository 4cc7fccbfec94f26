#!/usr/bin/env python3
"""Benchmark ``lahar node-agent``: Allocate latency with a full node, registration time, RSS.

Starts the API server double (or uses ``--kubeconfig``), creates a node, starts
``lahar node-agent --vgpu --fake-gpus 8`` as a subprocess against the test suite's fake
kubelet, then admits ``--pods`` vGPU pods one after another as the node lock lets them
through: each pod is created bound, in bind phase ``allocating`` with the node lock taken,
exactly as the scheduler leaves it, and the fake kubelet calls ``Allocate`` (timed); the pod is
then marked Running and stays on the node, so later calls list a fuller node. Prints one
JSON line::

    {"allocate_p50_ms": …, "allocate_p99_ms": …, "register_seconds": …, "rss_mb": …, …}

``register_seconds`` runs from the process start to the last endpoint's first
``ListAndWatch`` answer; ``rss_mb`` is the agent's peak resident memory (VmHWM).

    python hack/bench_node_agent.py [--pods 110] [--kubeconfig FILE] [--dra]

``--dra`` measures the DRA driver instead (``hack/bench_dra_plugin.py``): prepare latency,
slice publication after start, RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from unwind import unwind_on_sigterm  # noqa: E402

from scheduler.devices.names import VOLCANO  # noqa: E402
from scheduler.devices.node.nodelock import format_lock  # noqa: E402
from tests.devices.nodeagent.fakekubelet import FakeKubelet  # noqa: E402
from tests.e2e.kube import Kube, raw, short_id  # noqa: E402


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu() -> str:
    return next((line.split(":", 1)[1].strip() for line in
                 Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), "")


def main() -> int:
    unwind_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--kubeconfig", default=None, help="a real API server (default: the "
                                                           "API server double)")
    parser.add_argument("--dra", action="store_true", help="the DRA driver: prepare latency, "
                                                           "slice publication, RSS")
    args = parser.parse_args()
    double = None
    workdir = tempfile.mkdtemp(prefix="la-", dir="/tmp")
    kubeconfig = args.kubeconfig
    if kubeconfig is None:
        from tests.apiserver import start_standalone

        kubeconfig = os.path.join(workdir, "kubeconfig")
        double = start_standalone(kubeconfig)
    kube = Kube(kubeconfig)
    node = f"bench-{short_id()}"
    namespace = f"bench-{short_id()}"
    resources = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    raw(kube.core.create_node, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                                "status": {"capacity": resources, "allocatable": resources}})
    raw(kube.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": namespace}})
    if args.dra:
        sys.path.insert(0, str(ROOT / "hack"))
        from bench_dra_plugin import bench_dra

        try:
            figures = bench_dra(kube=kube, kubeconfig=kubeconfig, workdir=workdir, node=node,
                                namespace=namespace, pods=args.pods, root=ROOT, rss=_peak_rss_mb)
            print(json.dumps({**figures, "api_server": "double" if double else "kubeconfig",
                              "cpu": _cpu()}))
        finally:
            raw(kube.core.delete_node, node)
            if double is not None:
                double.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        return 0
    kubelet = FakeKubelet(workdir)
    kubelet.start()
    log = open(os.path.join(workdir, "agent.log"), "wb")  # noqa: SIM115
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    began = time.monotonic()
    agent = subprocess.Popen(
        [sys.executable, "-m", "scheduler", "node-agent", "--kubeconfig", kubeconfig,
         "--node-name", node, "--kubelet-dir", workdir, "--vgpu", "--fake-gpus", "8",
         "--split-count", "16", "--report-period", "3600"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    resource = VOLCANO.count
    try:
        if not kubelet.wait_registered({resource}, timeout=60):
            raise SystemExit(Path(log.name).read_text())
        register_seconds = time.monotonic() - began  # registered and first list received
        uuids = sorted({i.rsplit("-", 1)[0] for i in kubelet.healthy(resource)})
        latencies = []
        for i in range(args.pods):
            name = f"p{i:03d}"
            uuid = uuids[i % len(uuids)]
            raw(kube.core.patch_node, node, {"metadata": {"annotations": {
                VOLCANO.lock: format_lock(time.time())}}})
            text = f"{uuid},NVIDIA,1024,5:"
            raw(kube.core.create_namespaced_pod, namespace, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "annotations": {
                    VOLCANO.assigned_node: node, VOLCANO.assigned_time: str(i),
                    VOLCANO.allocated: text, VOLCANO.to_allocate: text,
                    VOLCANO.bind_phase: "allocating", VOLCANO.bind_time: str(i)}},
                "spec": {"nodeName": node, "containers": [{"name": "main", "image": "cuda",
                                                           "resources": {"limits": {
                                                               resource: "1"}}}]}})
            start = time.perf_counter()
            answer = kubelet.allocate(resource, 1, preferred=False)
            latencies.append((time.perf_counter() - start) * 1000)
            assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == uuid
            raw(kube.core.patch_namespaced_pod_status, name, namespace,
                {"status": {"phase": "Running"}})
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, round(0.99 * len(latencies)) - 1)]
        print(json.dumps({
            "allocate_p50_ms": round(statistics.median(latencies), 2),
            "allocate_p99_ms": round(p99, 2),
            "register_seconds": round(register_seconds, 3),
            "rss_mb": round(_peak_rss_mb(agent.pid), 1),
            "pods": args.pods, "api_server": "double" if double else "kubeconfig",
            "cpu": _cpu()}))
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(10)
        except subprocess.TimeoutExpired:
            agent.kill()
        kubelet.stop()
        log.close()
        for pod in kube.pods(namespace):
            raw(kube.core.delete_namespaced_pod, pod["metadata"]["name"], namespace,
                grace_period_seconds=0)
        raw(kube.core.delete_node, node)
        if double is not None:
            double.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
