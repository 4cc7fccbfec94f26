#!/usr/bin/env python3
"""Scheduling throughput on a synthetic cluster, in one process with the simulated binder.

    python hack/bench_throughput.py --nodes 5000 --pods 10000 [--seed 1] [--json]

The cluster: nodes of 32–96 cpu / 128–384 GiB spread over four zones; gang jobs of 1–16 tasks
with cpu/memory requests, about a fifth of the jobs pinned to a zone by node selector. The conf
is Lahar's default plus binpack. Reported: pods bound per second of scheduling time (cycles
plus their writes), cycles, seconds per cycle and peak RSS.
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


def run(nodes: int, pods: int, seed: int) -> dict[str, float | int]:
    manifests = synthetic_cluster(nodes, pods, seed)
    conf = load_conf(CONF)
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
    args = parser.parse_args()
    result = run(args.nodes, args.pods, args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>18}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
