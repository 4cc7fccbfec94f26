#!/usr/bin/env python3
"""Scheduling throughput on a synthetic cluster, in one process with the simulated binder.

    python hack/bench_throughput.py --nodes 5000 --pods 10000 [--seed 1] [--json]
    python hack/bench_throughput.py --scenario gpu --nodes 1000 --pods 2000

The cluster: nodes of 32–96 cpu / 128–384 GiB spread over four zones; gang jobs of 1–16 tasks
with cpu/memory requests, about a fifth of the jobs pinned to a zone by node selector. The conf
is Lahar's default plus binpack. Reported: pods bound per second of scheduling time (cycles
plus their writes), cycles, seconds per cycle and peak RSS.

``--scenario gpu``: fine-grained devices (``conf/finegrained.conf``). Every node has a Device
object with 8 GPUs on 4 PCIe roots over 2 NUMA nodes and 4 RDMA NICs (one per root, 4 VFs
each); gang jobs of 1–8 pods mix fractional GPUs (by ratio and by bytes), whole GPUs, joint
GPU + RDMA (SamePCIe) and hinted VF requests.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.cluster.manifests import Manifest
from scheduler.conf import load_conf
from scheduler.simulate import build_simulation

ZONES = ("zone-a", "zone-b", "zone-c", "zone-d")
CONF = Path(__file__).resolve().parents[1] / "conf" / "binpack.conf"
GPU_CONF = Path(__file__).resolve().parents[1] / "conf" / "finegrained.conf"


def synthetic_cluster(nodes: int, pods: int, seed: int) -> list[Manifest]:
    rng = random.Random(seed)
    out: list[Manifest] = []
    for i in range(nodes):
        cpu = rng.choice((32, 64, 96))
        out.append(
            Manifest(
                "bench",
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": f"node-{i:05d}",
                        "labels": {"zone": ZONES[i % len(ZONES)]},
                    },
                    "status": {
                        "allocatable": {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"}
                    },
                },
            )
        )
    created, job = 0, 0
    while created < pods:
        size = min(rng.randint(1, 16), pods - created)
        name = f"job-{job:05d}"
        cpu = rng.choice(("500m", "1", "2", "4"))
        memory = rng.choice(("1Gi", "2Gi", "4Gi", "8Gi"))
        selector = {"zone": rng.choice(ZONES)} if rng.random() < 0.2 else None
        out.append(
            Manifest(
                "bench",
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "bench"},
                    "spec": {"minMember": size, "queue": "default"},
                },
            )
        )
        for t in range(size):
            spec: dict[str, object] = {
                "schedulerName": "volcano",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}},
                    }
                ],
            }
            if selector:
                spec["nodeSelector"] = selector
            out.append(
                Manifest(
                    "bench",
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"{name}-task-{t}",
                            "namespace": "bench",
                            "annotations": {"scheduling.k8s.io/group-name": name},
                        },
                        "spec": spec,
                    },
                )
            )
        created += size
        job += 1
    return out


def _gpu_device(node: str) -> dict[str, object]:
    devices: list[dict[str, object]] = []
    for minor in range(8):
        root = minor // 2
        devices.append({
            "type": "gpu", "minor": minor, "id": f"GPU-{node}-{minor}", "health": True,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi",
                          "koordinator.sh/gpu-memory-ratio": "100"},
            "topology": {"socketID": root // 2, "nodeID": root // 2, "pcieID": f"pci{root}",
                         "busID": f"0000:{minor:02x}:00.0"}})
    for minor in range(4):
        bus = f"0000:{0x50 + minor:02x}:00"
        devices.append({
            "type": "rdma", "minor": minor, "id": f"{bus}.0", "health": True,
            "resources": {"koordinator.sh/rdma": "100"},
            "topology": {"socketID": minor // 2, "nodeID": minor // 2, "pcieID": f"pci{minor}",
                         "busID": f"{bus}.0"},
            "vfGroups": [{"vfs": [{"minor": -1, "busID": f"{bus}.{v}"} for v in range(1, 5)]}]})
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
            "metadata": {"name": node}, "spec": {"devices": devices}}


def gpu_cluster(nodes: int, pods: int, seed: int) -> list[Manifest]:
    """Nodes with a Device object each; gang jobs of 1–8 pods, each job of one of the
    fine-grained kinds."""
    rng = random.Random(seed)
    out: list[Manifest] = []
    for i in range(nodes):
        name = f"gpu-{i:05d}"
        out.append(Manifest("bench", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {
                "cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8",
                "koordinator.sh/gpu-core": "800", "koordinator.sh/gpu-memory-ratio": "800",
                "koordinator.sh/gpu-memory": "640Gi", "koordinator.sh/rdma": "400"}}}))
        out.append(Manifest("bench", _gpu_device(name)))
    kinds = (
        ({"koordinator.sh/gpu-core": "25", "koordinator.sh/gpu-memory-ratio": "25"}, {}),
        ({"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory": "20Gi"}, {}),
        ({"nvidia.com/gpu": "1"}, {}),
        ({"nvidia.com/gpu": "2"}, {}),
        ({"nvidia.com/gpu": "4", "koordinator.sh/rdma": "1"},
         {"scheduling.koordinator.sh/device-joint-allocate":
          '{"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}'}),
        ({"koordinator.sh/rdma": "2"},
         {"scheduling.koordinator.sh/device-allocate-hint":
          '{"rdma": {"vfSelector": {}, "allocateStrategy": "RequestsAsCount"}}'}),
    )
    created, job = 0, 0
    while created < pods:
        size = min(rng.randint(1, 8), pods - created)
        limits, annotations = rng.choice(kinds)
        name = f"job-{job:05d}"
        out.append(Manifest("bench", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"minMember": size, "queue": "default"}}))
        for t in range(size):
            out.append(Manifest("bench", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-task-{t}", "namespace": "bench",
                             "annotations": {"scheduling.k8s.io/group-name": name,
                                             **annotations}},
                "spec": {"schedulerName": "volcano", "containers": [{
                    "name": "main", "image": "busybox",
                    "resources": {"limits": {"cpu": "1", **limits}}}]}}))
        created += size
        job += 1
    return out


SCENARIOS = {"default": (synthetic_cluster, CONF), "gpu": (gpu_cluster, GPU_CONF)}


def run(nodes: int, pods: int, seed: int, scenario: str = "default") -> dict[str, float | int]:
    build, conf_path = SCENARIOS[scenario]
    manifests = build(nodes, pods, seed)
    conf = load_conf(conf_path)
    cluster, cache, scheduler = build_simulation(manifests, conf=conf, seed=seed)
    cluster.take_changes()
    cycles = 0
    started = time.perf_counter()
    while cycles < 50:
        scheduler.run_once()
        cache.flush()
        cycles += 1
        cluster.clock.advance(1.0)
        if cluster.take_changes() == 0:
            break
    elapsed = time.perf_counter() - started
    bound = sum(1 for pod in cluster.objects.get("Pod", {}).values() if pod["spec"].get("nodeName"))
    return {
        "nodes": nodes,
        "pods": pods,
        "bound": bound,
        "pods_per_second": round(bound / elapsed, 1),
        "cycles": cycles,
        "seconds_per_cycle": round(elapsed / cycles, 3),
        "seconds": round(elapsed, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="default")
    args = parser.parse_args()
    result = run(args.nodes, args.pods, args.seed, args.scenario)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>18}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
