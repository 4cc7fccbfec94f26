#!/usr/bin/env python3
"""Scheduling throughput on a synthetic cluster, in one process with the simulated binder.

    python hack/bench_throughput.py --nodes 5000 --pods 10000 [--seed 1] [--json]
    python hack/bench_throughput.py --scenario preempt --nodes 5000 --pods 1000
    python hack/bench_throughput.py --scenario gpu --nodes 1000 --pods 2000
    python hack/bench_throughput.py --scenario topology --nodes 5000 --pods 10000
    python hack/bench_throughput.py --idle-cycle --nodes 10000 --pods 100000 [--pending 100]

The cluster: nodes of 32–96 cpu / 128–384 GiB spread over four zones; gang jobs of 1–16 tasks
with cpu/memory requests, about a fifth of the jobs pinned to a zone by node selector. The conf
is Lahar's default plus binpack. The objects of the loaded cluster are kept out of full
garbage collections (``build_simulation(freeze_loaded=True)``), as a long-running scheduler
would. Reported: pods bound per second of scheduling time (cycles plus their writes) in
wall-clock time and per CPU second of this process (steadier on a shared machine), cycles,
seconds per cycle and peak RSS.

``--scenario preempt``: every node is full of running low-priority pods and ``--pods``
high-priority pods wait; the conf is Volcano's Helm default plus the preempt action. Reported
besides: ``preemptions_per_second``, the preemptors pipelined (victims evicted for them) per
second of the preempt action, and ``first_cycle_seconds``, the whole cycle that preempts
(snapshot, the allocate attempt that fails, close and writes included).

``--scenario gpu``: fine-grained devices (``conf/finegrained.conf``). Every node has a Device
object with 8 GPUs on 4 PCIe roots over 2 NUMA nodes and 4 RDMA NICs (one per root, 4 VFs
each); gang jobs of 1–8 pods mix fractional GPUs (by ratio and by bytes), whole GPUs, joint
GPU + RDMA (SamePCIe) and hinted VF requests.

``--scenario topology``: network-topology-aware scheduling. The nodes (32 cpu / 128 GiB) sit
in a 3-tier HyperNode tree: 8 nodes per tier-1 HyperNode (a leaf switch), 8 of those per tier-2
HyperNode, 8 of those per tier-3 HyperNode. Gang jobs of 8–64 pods, half of them
``networkTopology: {mode: hard, highestTierAllowed: 1}`` (1–4 cpu pods) and half tier 2 (4–8
cpu pods); the conf is binpack.conf plus ``network-topology-aware``. The same pods without the
constraint run next, in the same process, and ``ratio`` is the constrained pods/s over the
unconstrained; ``spans_ok`` checks that every constrained job that ran stayed in one HyperNode
of its tier.

``--scenario dra``: Dynamic Resource Allocation, 8 GPUs per node published as DRA devices,
one-GPU claims (some with a CEL selector, some sharing a GPU by memory), against the same pods
with ``nvidia.com/gpu`` requests in the same process (``ratio``); see ``hack/bench_dra.py``.
``--profile FILE`` writes a cProfile of the DRA run; ``--collector`` manages the garbage
collector in both runs as ``lahar run`` does (``scheduler/collector.py``: what survives a cycle
is frozen), instead of CPython's default.

``--idle-cycle``: ``--pods`` pods already run on the ``--nodes`` nodes (PodGroups of 1–4,
Running); ``--warmup`` cycles with nothing pending (the first writes every PodGroup's status,
the second finds the running jobs steady, the third settles them, as a scheduler that has run
for a few seconds has), then ``--pending`` new pods (gangs of 1–4) arrive through the watch
and the cycle that schedules them is timed (snapshot, actions, close and writes).
With ``--collector`` the garbage collector is managed as ``lahar run`` manages it (what
survives each cycle is frozen), not left to CPython's default, whose full collections walk
every object made since the load.
Reported: ``idle_cycle_seconds`` (median of ``--repeat`` such cycles, writes included), each
warm-up cycle (``warmup_cycle_seconds``), the jobs settled in the last cycle
(``settled_jobs``), the part spent taking the snapshot and opening the session
(``open_seconds``), the cycle's CPU time (``idle_cycle_cpu_seconds``) and peak RSS.

``--restart-snapshot``: the cluster of ``--idle-cycle``, then a restart: a new cache synced from
every object and its first, full snapshot cycle timed (``hack/bench_restart_snapshot.py``);
with ``--collector``, the collector is off during the sync and what it loaded frozen after it,
as ``lahar run`` does (``--profile FILE``: a cProfile of the sync and the first cycle).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.conf import load_conf, parse_conf

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


PREEMPT_CONF = """
actions: "enqueue, allocate, backfill, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
"""Volcano's Helm-chart default conf with the preempt action added."""
PREEMPT_NODE_CPU = 8
PREEMPT_POD_CPU = 2


def _pod(name: str, group: str, *, priority: str, node: str | None) -> Manifest:
    pod: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "volcano",
            "priorityClassName": priority,
            "priority": 1000 if priority == "high" else 10,
            "containers": [{
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": str(PREEMPT_POD_CPU), "memory": "4Gi"}},
            }],
        },
    }
    if node is not None:
        pod["spec"]["nodeName"] = node  # type: ignore[index]
        pod["status"] = {"phase": "Running"}
    return Manifest("bench", pod)


def _group(name: str, *, priority: str, size: int, running: bool) -> Manifest:
    group: dict[str, object] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"minMember": size, "queue": "default", "priorityClassName": priority},
    }
    if running:
        group["status"] = {"phase": "Running"}
    return Manifest("bench", group)


def preempt_cluster(nodes: int, pods: int) -> list[Manifest]:
    """``nodes`` nodes, each full with low-priority pods (jobs of one node's pods, minMember
    1), and ``pods`` high-priority pods in gangs of four."""
    out = [
        Manifest("bench", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                           "metadata": {"name": name}, "value": value})
        for name, value in (("low", 10), ("high", 1000))
    ]
    per_node = PREEMPT_NODE_CPU // PREEMPT_POD_CPU
    for i in range(nodes):
        node = f"node-{i:05d}"
        out.append(Manifest("bench", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": {"zone": ZONES[i % len(ZONES)]}},
            "status": {"allocatable": {"cpu": str(PREEMPT_NODE_CPU), "memory": "64Gi",
                                       "pods": "110"}},
        }))
        out.append(_group(f"low-{i:05d}", priority="low", size=1, running=True))
        out += [_pod(f"low-{i:05d}-{t}", f"low-{i:05d}", priority="low", node=node)
                for t in range(per_node)]
    for j in range(0, pods, 4):
        size = min(4, pods - j)
        out.append(_group(f"high-{j:05d}", priority="high", size=size, running=False))
        out += [_pod(f"high-{j:05d}-{t}", f"high-{j:05d}", priority="high", node=None)
                for t in range(size)]
    return out


def run_preempt(nodes: int, pods: int, seed: int) -> dict[str, float | int]:
    cluster, cache, scheduler = build_simulation(
        preempt_cluster(nodes, pods), conf=parse_conf(PREEMPT_CONF), seed=seed,
        freeze_loaded=True)
    cluster.take_changes()
    started, cpu_started = time.perf_counter(), time.process_time()
    stats = scheduler.run_once()
    cache.flush()
    first = time.perf_counter() - started
    first_cpu = time.process_time() - cpu_started
    pipelined = sum(
        1 for pod in cluster.objects.get("Pod", {}).values()
        if "once resource is released" in str(
            next((c.get("message") for c in (pod.get("status") or {}).get("conditions") or []
                  if c.get("type") == "PodScheduled"), ""))
    )
    evicted = sum(1 for e in cluster.events if e.get("reason") == "Evict"
                  and e["involvedObject"]["kind"] == "Pod")
    preempt_seconds = stats.action_seconds.get("preempt", 0.0)
    cycles = 1
    cluster.clock.advance(1.0)
    while cycles < 20 and cluster.take_changes():
        scheduler.run_once()
        cache.flush()
        cycles += 1
        cluster.clock.advance(1.0)
    elapsed = time.perf_counter() - started
    bound = sum(1 for pod in cluster.objects.get("Pod", {}).values()
                if pod["metadata"]["name"].startswith("high-") and pod["spec"].get("nodeName"))
    return {
        "nodes": nodes,
        "pods": pods,
        "preemptors_pipelined": pipelined,
        "victims_evicted": evicted,
        "preemptions_per_second": round(pipelined / max(preempt_seconds, 1e-9), 1),
        "preempt_action_seconds": round(preempt_seconds, 3),
        "first_cycle_seconds": round(first, 3),
        "first_cycle_cpu_seconds": round(first_cpu, 3),
        "preemptors_bound": bound,
        "pods_per_second": round(bound / elapsed, 1),
        "cycles": cycles,
        "seconds_per_cycle": round(elapsed / cycles, 3),
        "seconds": round(elapsed, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


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


IDLE_NODE_CPU = 64
IDLE_POD_CPU = "500m"


def _running_group(name: str, size: int, node_of: list[str]) -> list[Manifest]:
    out = [_group(name, priority="", size=size, running=True)]
    for t, node in enumerate(node_of):
        out.append(Manifest("bench", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{t}", "namespace": "bench",
                         "annotations": {"scheduling.k8s.io/group-name": name}},
            "spec": {"schedulerName": "volcano", "nodeName": node, "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": IDLE_POD_CPU, "memory": "1Gi"}}}]},
            "status": {"phase": "Running"},
        }))
    return out[: size + 1]


def idle_cluster(nodes: int, pods: int, seed: int) -> list[Manifest]:
    """``nodes`` nodes holding ``pods`` running pods in Running PodGroups of 1–4."""
    rng = random.Random(seed)
    out: list[Manifest] = []
    names = [f"node-{i:05d}" for i in range(nodes)]
    for i, node in enumerate(names):
        out.append(Manifest("bench", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": {"zone": ZONES[i % len(ZONES)]}},
            "status": {"allocatable": {"cpu": str(IDLE_NODE_CPU), "memory": "256Gi",
                                       "pods": "110"}},
        }))
    placed, job = 0, 0
    while placed < pods:
        size = min(rng.randint(1, 4), pods - placed)
        out += _running_group(f"run-{job:06d}", size,
                              [names[(placed + t) % nodes] for t in range(size)])
        placed += size
        job += 1
    return out


def _pending_objects(count: int, round_: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed * 1000 + round_)
    out: list[dict[str, object]] = []
    made, job = 0, 0
    while made < count:
        size = min(rng.randint(1, 4), count - made)
        name = f"new-{round_:03d}-{job:04d}"
        out.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "bench"},
                    "spec": {"minMember": size, "queue": "default"},
                    "status": {"phase": "Pending"}})
        for t in range(size):
            out.append({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{name}-{t}", "namespace": "bench",
                                     "annotations": {"scheduling.k8s.io/group-name": name}},
                        "spec": {"schedulerName": "volcano", "containers": [{
                            "name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}})
        made += size
        job += 1
    return out


def run_idle(nodes: int, pods: int, seed: int, *, pending: int = 100,
             repeat: int = 3, warmup: int = 3, collector: bool = False) -> dict[str, Any]:
    cluster, cache, scheduler = build_simulation(
        idle_cluster(nodes, pods, seed), conf=load_conf(CONF), seed=seed, freeze_loaded=True)
    cluster.take_changes()
    gc_owner = None
    if collector:  # what `lahar run` does (scheduler/collector.py)
        from scheduler.collector import Collector

        gc_owner = Collector()
        gc_owner.settle()
    warm: list[float] = []
    for _ in range(warmup):  # the first cycles write every PodGroup's status once
        warm_started = time.perf_counter()
        scheduler.run_once()
        cache.flush()
        if gc_owner is not None:
            gc_owner.after_cycle(busy=False)
        cluster.clock.advance(1.0)
        warm.append(round(time.perf_counter() - warm_started, 3))
    cycles: list[float] = []
    opens: list[float] = []
    cpu: list[float] = []
    bound = 0
    for round_ in range(repeat):
        cluster.clock.advance(1.0)
        for i, obj in enumerate(_pending_objects(pending, round_, seed)):
            meta = obj["metadata"]
            assert isinstance(meta, dict)
            meta["uid"] = f"bench-{round_}-{i}"
            meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
            cluster.objects.setdefault(str(obj["kind"]), {})
            cluster._store(obj)  # the watch delivers what the store holds
            cache.apply("ADDED", str(obj["kind"]), obj)
        started, cpu_started = time.perf_counter(), time.process_time()
        stats = scheduler.run_once()
        cache.flush()
        cycles.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        if gc_owner is not None:  # after the timed cycle, as the loop does after each
            gc_owner.after_cycle(busy=True)
        opens.append(stats.plugin_open_seconds)
        bound += sum(1 for key, pod in cluster.objects["Pod"].items()
                     if key.startswith(f"bench/new-{round_:03d}-") and pod["spec"].get("nodeName"))
    return {
        "nodes": nodes,
        "running_pods": pods,
        "pending_per_cycle": pending,
        "collector": collector,
        "bound": bound,
        "warmup_cycle_seconds": warm,
        "settled_jobs": len(cache.pool.last.settled) if cache.pool.last is not None else 0,
        "idle_cycle_seconds": round(statistics.median(cycles), 4),
        "idle_cycle_max_seconds": round(max(cycles), 4),
        "idle_cycle_cpu_seconds": round(statistics.median(cpu), 4),
        "open_seconds": round(statistics.median(opens), 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def run(nodes: int, pods: int, seed: int, *, build: Any = synthetic_cluster,
        conf_path: Path = CONF, conf_text: str | None = None,
        check: Any = None, profile: Any = None,
        collector: bool = False) -> dict[str, float | int]:
    manifests = build(nodes, pods, seed)
    conf = load_conf(conf_path) if conf_text is None else parse_conf(conf_text)
    cluster, cache, scheduler = build_simulation(manifests, conf=conf, seed=seed,
                                                 freeze_loaded=True)
    cluster.take_changes()
    cycles = 0
    gc_owner = None
    if collector:  # what `lahar run` does (scheduler/collector.py)
        from scheduler.collector import Collector

        gc_owner = Collector()
        gc_owner.settle()
    if profile is not None:
        profile.enable()
    started, cpu_started = time.perf_counter(), time.process_time()
    while cycles < 50:
        scheduler.run_once()
        cache.flush()
        if gc_owner is not None:
            gc_owner.after_cycle(busy=True)
        cycles += 1
        cluster.clock.advance(1.0)
        if cluster.take_changes() == 0:
            break
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    if profile is not None:
        profile.disable()
    bound = sum(1 for pod in cluster.objects.get("Pod", {}).values() if pod["spec"].get("nodeName"))
    extra = {} if check is None else check(cluster)
    return {
        **extra,
        "nodes": nodes,
        "pods": pods,
        "bound": bound,
        "pods_per_second": round(bound / elapsed, 1),
        "pods_per_cpu_second": round(bound / max(cpu, 1e-9), 1),
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
    parser.add_argument(
        "--scenario", choices=("allocate", "preempt", "gpu", "topology", "dra"),
        default="allocate",
        help="allocate: pending gangs on empty nodes; preempt: full nodes, pending "
        "high-priority pods (--pods of them); gpu: fine-grained devices; topology: gangs with "
        "hard network-topology constraints in a 3-tier HyperNode tree, against the same pods "
        "without them; dra: DRA claims against the same pods with nvidia.com/gpu")
    parser.add_argument("--profile", help="--scenario dra, --restart-snapshot: write a "
                        "cProfile of the DRA run / of the restart here")
    parser.add_argument("--collector", action="store_true",
                        help="--scenario dra, --idle-cycle, --restart-snapshot: manage the "
                        "garbage collector as `lahar run` does (off while the cache syncs, then "
                        "what survives each cycle is frozen)")
    parser.add_argument(
        "--idle-cycle", action="store_true",
        help="--pods running pods on --nodes nodes; time a cycle with --pending new pods")
    parser.add_argument(
        "--restart-snapshot", action="store_true",
        help="--pods running pods on --nodes nodes; time a restart's cache sync and first "
        "(full) snapshot cycle (hack/bench_restart_snapshot.py)")
    parser.add_argument("--pending", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3,
                        help="--idle-cycle: cycles run before the timed ones")
    args = parser.parse_args()
    if args.restart_snapshot:
        from hack.bench_restart_snapshot import run_restart

        result = run_restart(args.nodes, args.pods, args.seed, build=idle_cluster,
                             warmup=args.warmup, collector=args.collector,
                             profile=args.profile)
    elif args.idle_cycle:
        result = run_idle(args.nodes, args.pods, args.seed, pending=args.pending,
                          repeat=args.repeat, warmup=args.warmup, collector=args.collector)
    elif args.scenario == "dra":
        result = run_dra(args.nodes, args.pods, args.seed, profile=args.profile,
                         collector=args.collector)
    else:
        runner = {"preempt": run_preempt, "gpu": run_gpu, "topology": run_topology}.get(
            args.scenario, run)
        result = runner(args.nodes, args.pods, args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>22}: {value}")
    return 0


def run_gpu(nodes: int, pods: int, seed: int) -> dict[str, float | int]:
    return run(nodes, pods, seed, build=gpu_cluster, conf_path=GPU_CONF)


TOPOLOGY_FANOUT = 8
"""Nodes per tier-1 HyperNode, and HyperNodes per HyperNode of the tier above."""


def _hypernode(name: str, tier: int, kind: str, members: list[str]) -> Manifest:
    return Manifest("bench", {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": [
            {"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]},
    })


def topology_cluster(nodes: int, pods: int, seed: int, *,
                     constrained: bool = True) -> list[Manifest]:
    """``nodes`` nodes in a 3-tier tree, ``pods`` pods in gangs of 8–64 (see the module doc);
    the same objects for the same seed whether ``constrained`` or not."""
    rng = random.Random(seed)
    out: list[Manifest] = []
    names = [f"node-{i:05d}" for i in range(nodes)]
    for name in names:
        out.append(Manifest("bench", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
        }))
    members, kind = names, "Node"
    for tier in (1, 2, 3):
        groups = [members[i:i + TOPOLOGY_FANOUT] for i in range(0, len(members), TOPOLOGY_FANOUT)]
        level = [f"t{tier}-{i:04d}" for i in range(len(groups))]
        out += [_hypernode(n, tier, kind, g) for n, g in zip(level, groups, strict=True)]
        members, kind = level, "HyperNode"
    created, job = 0, 0
    while created < pods:
        size = min(rng.randint(8, 64), pods - created)
        tier = 1 if job % 2 == 0 else 2
        cpu = rng.choice(("1", "2", "4") if tier == 1 else ("4", "8"))
        if tier == 1 and size * int(cpu) > 32 * TOPOLOGY_FANOUT // 2:
            cpu = "1"  # a tier-1 gang fits half a leaf switch
        name = f"job-{job:05d}"
        spec: dict[str, object] = {"minMember": size, "queue": "default"}
        if constrained:
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
        out.append(Manifest("bench", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench"}, "spec": spec,
        }))
        for t in range(size):
            out.append(Manifest("bench", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-task-{t}", "namespace": "bench",
                             "annotations": {"scheduling.k8s.io/group-name": name}},
                "spec": {"schedulerName": "volcano", "containers": [{
                    "name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": "4Gi"}}}]},
            }))
        created += size
        job += 1
    return out


def _spans(cluster: Any) -> dict[str, float | int]:
    """Whether each constrained job that runs stays in one HyperNode of its tier."""
    index = {int(node.split("-")[1]): node for node in cluster.objects.get("Node", {})}
    nodes_of: dict[str, set[int]] = {}
    for pod in cluster.objects.get("Pod", {}).values():
        node = pod["spec"].get("nodeName")
        if node:
            group = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            nodes_of.setdefault(group, set()).add(int(node.split("-")[1]))
    ok = True
    for group, rows in nodes_of.items():
        spec = cluster.objects["PodGroup"][f"bench/{group}"]["spec"]
        tier = (spec.get("networkTopology") or {}).get("highestTierAllowed")
        if tier is not None:
            width = TOPOLOGY_FANOUT ** tier
            ok = ok and len({row // width for row in rows}) == 1
    return {"jobs_running": len(nodes_of), "spans_ok": int(ok)} if index else {}


TOPOLOGY_CONF = (CONF.read_text() + "  - name: network-topology-aware\n")


def run_topology(nodes: int, pods: int, seed: int) -> dict[str, float | int]:
    constrained = run(nodes, pods, seed, build=topology_cluster, conf_text=TOPOLOGY_CONF,
                      check=_spans)
    free = run(nodes, pods, seed, conf_text=TOPOLOGY_CONF, check=_spans,
               build=lambda n, p, s: topology_cluster(n, p, s, constrained=False))
    result: dict[str, float | int] = {f"constrained_{k}": v for k, v in constrained.items()}
    result.update({f"unconstrained_{k}": v for k, v in free.items()
                   if k not in ("nodes", "pods", "peak_rss_mb", "spans_ok")})
    result["ratio"] = round(float(constrained["pods_per_second"])
                            / max(float(free["pods_per_second"]), 1e-9), 2)
    return result


def run_dra(nodes: int, pods: int, seed: int, *, profile: str | None = None,
            collector: bool = False) -> dict[str, float | int]:
    from hack.bench_dra import device_check, dra_cluster, dra_conf_text
    from scheduler.devices.dra import cel

    conf = dra_conf_text(CONF.read_text())
    compiles = cel.compile_count()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    dra = run(nodes, pods, seed, build=dra_cluster, conf_text=conf, check=device_check,
              profile=profiler, collector=collector)
    compiles = cel.compile_count() - compiles
    if profiler is not None and profile:
        profiler.dump_stats(profile)
    plain = run(nodes, pods, seed, conf_text=conf, collector=collector,
                build=lambda n, p, s: dra_cluster(n, p, s, dra=False))
    result: dict[str, float | int] = {f"dra_{k}": v for k, v in dra.items()}
    result.update({f"gpu_{k}": v for k, v in plain.items()
                   if k not in ("nodes", "pods", "peak_rss_mb")})
    result["cel_compiles"] = compiles
    result["ratio"] = round(float(dra["pods_per_second"])
                            / max(float(plain["pods_per_second"]), 1e-9), 2)
    result["cpu_ratio"] = round(float(dra["pods_per_cpu_second"])
                                / max(float(plain["pods_per_cpu_second"]), 1e-9), 2)
    return result


if __name__ == "__main__":
    sys.exit(main())
