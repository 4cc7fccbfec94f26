"""``hack/bench_node_agent.py --dra``: NodePrepareResources latency, slice publication time
and RSS of ``lahar node-agent --dra --dra-mode shared --fake-gpus 8``.

On the API server given (the double by default) with a node created: the agent is started as a
subprocess; ``publish_seconds`` runs from the process start until its ResourceSlices are listed
on the server. Then ``--pods`` claims, each allocated a 1 GiB / 5 % share of a card (as the
scheduler writes ``status.allocation``), are prepared one at a time through the fake DRA
kubelet (timed: the call reads the claim, writes the CDI spec and the checkpoint) and left
prepared, so later calls run against a fuller checkpoint. Prints one JSON line.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.devices.nodeagent.drakubelet import FakeDraKubelet
from tests.e2e.kube import Kube

DRIVER = "gpu.lahar.dev"
GROUP, VERSION = "resource.k8s.io", "v1"


def _slices(kube: Kube, node: str) -> list[dict[str, Any]]:
    found = kube.custom.list_cluster_custom_object(GROUP, VERSION, "resourceslices")
    return [s for s in found.get("items") or [] if s["spec"].get("nodeName") == node]


def bench_dra(*, kube: Kube, kubeconfig: str, workdir: str, node: str, namespace: str,
              pods: int, root: Path, rss: Any) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(root))
    registry, plugins = os.path.join(workdir, "registry"), os.path.join(workdir, "plugins")
    log = open(os.path.join(workdir, "agent.log"), "wb")  # noqa: SIM115
    began = time.monotonic()
    agent = subprocess.Popen(
        [sys.executable, "-m", "scheduler", "node-agent", "--kubeconfig", kubeconfig,
         "--node-name", node, "--dra", "--dra-mode", "shared", "--fake-gpus", "8",
         "--kubelet-plugins-registry-dir", registry, "--kubelet-plugins-dir", plugins,
         "--cdi-root", os.path.join(workdir, "cdi"), "--dra-delete-slices"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    kubelet = FakeDraKubelet(registry)
    try:
        while not _slices(kube, node):
            if agent.poll() is not None or time.monotonic() - began > 60:
                raise SystemExit(Path(log.name).read_text())
            time.sleep(0.01)
        publish_seconds = time.monotonic() - began
        devices = [d["name"] for s in _slices(kube, node) for d in s["spec"].get("devices", [])
                   if d["name"].startswith("gpu-")]
        kubelet.discover(timeout=30)
        latencies = []
        for i in range(pods):
            name = f"c{i:03d}"
            claim = kube.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, "resourceclaims", {
                    "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
                    "metadata": {"name": name},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": "gpu.lahar.dev"}}]}}})
            claim["status"] = {"allocation": {"devices": {"results": [{
                "request": "gpu", "driver": DRIVER, "pool": node,
                "device": devices[i % len(devices)], "shareID": f"s{i}",
                "consumedCapacity": {"memory": "1Gi", "cores": "5"}}]}}}
            kube.custom.replace_namespaced_custom_object_status(
                GROUP, VERSION, namespace, "resourceclaims", name, claim)
            start = time.perf_counter()
            answer = kubelet.prepare((namespace, name, claim["metadata"]["uid"]))
            latencies.append((time.perf_counter() - start) * 1000)
            error = answer[claim["metadata"]["uid"]].error
            if error:
                raise SystemExit(f"prepare failed: {error}")
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, round(0.99 * len(latencies)) - 1)]
        return {"prepare_p50_ms": round(statistics.median(latencies), 2),
                "prepare_p99_ms": round(p99, 2),
                "publish_seconds": round(publish_seconds, 3),
                "rss_mb": round(rss(agent.pid), 1), "claims": pods}
    finally:
        kubelet.close()
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(10)
        except subprocess.TimeoutExpired:
            agent.kill()
        log.close()
        for claim in kube.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, "resourceclaims").get("items") or []:
            kube.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, "resourceclaims", claim["metadata"]["name"])
