#!/usr/bin/env python3
"""End-to-end time and memory of ``lahar simulate`` on a generated manifest file.

    python hack/bench_simulate.py --nodes 2000 --pods 20000 [--output table|json|yaml]

Writes one multi-document YAML file the way a user would (block style): nodes of 32–96 cpu with
zone and instance-type labels, a few queues, gang jobs of 1–16 pods in PodGroups with
cpu/memory requests and limits, labels and an occasional zone selector. It then runs
``python -m scheduler simulate`` on it in a child process (output to /dev/null) and prints one
JSON object: ``seconds`` (wall time of the child, reading to output), ``cpu_seconds`` (its CPU
time, steadier on a shared machine), ``peak_rss_mb`` (its peak resident memory), the file size
and the sizes asked for. Generating the file is not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
ZONES = ("zone-a", "zone-b", "zone-c", "zone-d")
QUEUES = (("research", 3), ("batch", 2), ("interactive", 1))
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _node(i: int, rng: random.Random) -> dict[str, Any]:
    cpu = rng.choice((32, 64, 96))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{i:05d}",
            "labels": {
                "kubernetes.io/hostname": f"node-{i:05d}",
                "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
                "node.kubernetes.io/instance-type": f"c{cpu}",
            },
        },
        "status": {
            "capacity": {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"},
            "allocatable": {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _job(job: int, size: int, rng: random.Random) -> list[dict[str, Any]]:
    name = f"job-{job:05d}"
    queue = rng.choice(QUEUES)[0]
    cpu = rng.choice(("500m", "1", "2", "4"))
    memory = rng.choice(("1Gi", "2Gi", "4Gi", "8Gi"))
    selector = {"topology.kubernetes.io/zone": rng.choice(ZONES)} if rng.random() < 0.2 else None
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"minMember": size, "queue": queue},
        }
    ]
    for t in range(size):
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/train:1.0",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        }
        if selector:
            spec["nodeSelector"] = selector
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-task-{t}",
                    "namespace": "bench",
                    "labels": {"app": name, "role": "worker"},
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": spec,
            }
        )
    return docs


def write_manifest(path: Path, *, nodes: int, pods: int, seed: int) -> None:
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": weight, "reclaimable": True},
        }
        for name, weight in QUEUES
    ]
    docs += [_node(i, rng) for i in range(nodes)]
    created = job = 0
    while created < pods:
        size = min(rng.randint(1, 16), pods - created)
        docs += _job(job, size, rng)
        created += size
        job += 1
    with path.open("w") as out:
        yaml.dump_all(docs, out, Dumper=_DUMPER, sort_keys=False, default_flow_style=False)


def measure(path: Path, *, output: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "scheduler", "simulate", str(path), "-o", output]
    started = time.perf_counter()
    with open(os.devnull, "w") as sink:
        subprocess.run(command, check=True, stdout=sink, env=env, cwd=ROOT)
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "seconds": round(seconds, 2),
        # CPU time is what to compare on a shared machine: wall time includes waiting for a core
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", choices=("table", "json", "yaml"), default="table")
    parser.add_argument("--keep", metavar="FILE", help="write the manifest here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "cluster.yaml"
        write_manifest(path, nodes=args.nodes, pods=args.pods, seed=args.seed)
        result: dict[str, Any] = {
            "nodes": args.nodes,
            "pods": args.pods,
            "file_mb": round(path.stat().st_size / 2**20, 1),
            "output": args.output,
        }
        result.update(measure(path, output=args.output))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
