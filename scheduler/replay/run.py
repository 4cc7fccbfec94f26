"""One trace replay through the scheduler's own path, on the embedded cluster.

The trace's nodes become Nodes with a Koordinator ``Device`` object (one GPU per card, each
100 % ``gpu-core`` and ``gpu-memory-ratio``) and the ``node.koordinator.sh/gpu-model`` label;
node names carry a seeded random rank prefix (``0042-<sn>``), as the FGD paper's simulator
renames its nodes, so the node table's order is the run's shuffled order. Each pod of the
run's workload (:func:`scheduler.replay.trace.generate_workload`) becomes a Pod asking for
``koordinator.sh/gpu-core`` and ``gpu-memory-ratio`` (``gpu_milli`` / 10 per card, 100 per
whole card), CPU and memory, with a required node affinity on the card model when a GPU pod
names ``gpu_spec``. Pods arrive one at a time; each gets one scheduling cycle (snapshot →
session → allocate → deviceshare → statement → binder), and a pod the cycle did not bind is
deleted: failures are never retried and no pod ever leaves.

After every pod the run records the paper's metrics from a mirror of the cluster's free
resources kept from the binds (node and cards from the ``gpu-minors`` annotation), which also
checks that the scheduler never gives out more than a card has.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.conf import SchedulerConf, parse_conf
from scheduler.devices.finegrained.names import GPU_MINORS, LABEL_GPU_MODEL
from scheduler.devices.placement.frag import FragmentCache, ShapeKey, TargetWorkload, shape_key
from scheduler.devices.placement.state import MILLI, NodeStates
from scheduler.framework.session import NodeSampling
from scheduler.replay.metrics import RunRecorder
from scheduler.replay.trace import TraceNode, TracePod, generate_workload

__all__ = ["ReplayResult", "replay_conf", "run_replay", "target_entries"]

NAMESPACE = "replay"
GPU_MEMORY_PER_CARD = "32Gi"
"""The trace gives no card memory; pods ask for memory as a ratio, so any size works."""


@dataclass(slots=True)
class ReplayResult:
    recorder: RunRecorder
    placements: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    seconds_per_pod: float = 0.0


def target_entries(pods: Sequence[TracePod]) -> list[dict[str, Any]]:
    """The trace's pod shapes with their counts, as ``FineGrainedTargetWorkload`` entries."""
    counts: dict[ShapeKey, int] = {}
    for pod in pods:
        key = shape_key(pod.shape, pod.spec_text)
        counts[key] = counts.get(key, 0) + 1
    return [{"cpu": k.cpu_milli, "gpuMilli": k.gpu_milli, "gpus": k.num_gpu,
             "models": k.spec_text, "count": n} for k, n in sorted(counts.items())]


def replay_conf(policy: str, *, target: list[dict[str, Any]], tie_break: str = "first",
                policy_args: Mapping[str, Any] | None = None) -> SchedulerConf:
    """The paper's scheduler set-up: filters on, one policy score, nothing else scored.

    ``policy_args`` become ``deviceshare.FineGrainedPolicyArguments`` (``fgd-learned``)."""
    arguments: dict[str, Any] = {
        "deviceshare.FineGrainedDeviceEnable": True,
        "deviceshare.FineGrainedPolicy": policy,
        "deviceshare.FineGrainedTieBreak": tie_break,
        "deviceshare.ScheduleWeight": 1,
    }
    if policy == "fgd":
        arguments["deviceshare.FineGrainedTargetWorkload"] = target
    if policy_args:
        arguments["deviceshare.FineGrainedPolicyArguments"] = dict(policy_args)
    conf = {"actions": "allocate", "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}]},
        {"plugins": [{"name": "predicates"},
                     {"name": "deviceshare", "arguments": arguments}]}]}
    return parse_conf(yaml.safe_dump(conf), source=f"<replay {policy}>")


def _node_objects(rank: int, node: TraceNode) -> tuple[str, list[dict[str, Any]]]:
    name = f"{rank:04d}-{node.name}"
    allocatable = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi",
                   "pods": "100000"}
    labels = {}
    objects: list[dict[str, Any]] = []
    if node.gpus:
        labels[LABEL_GPU_MODEL] = node.model
        for resource in ("koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio"):
            allocatable[resource] = str(100 * node.gpus)
        devices = [{"type": "gpu", "minor": i, "id": f"{name}-gpu{i}", "health": True,
                    "resources": {"koordinator.sh/gpu-core": "100",
                                  "koordinator.sh/gpu-memory-ratio": "100",
                                  "koordinator.sh/gpu-memory": GPU_MEMORY_PER_CARD}}
                   for i in range(node.gpus)]
        objects.append({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
                        "metadata": {"name": name, "labels": {LABEL_GPU_MODEL: node.model}},
                        "spec": {"devices": devices}})
    objects.insert(0, {"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": name, "labels": labels},
                       "status": {"allocatable": allocatable, "capacity": dict(allocatable)}})
    return name, objects


def _pod_objects(index: int, pod: TracePod) -> list[dict[str, Any]]:
    name = f"p{index:05d}-{pod.name}".lower().replace("_", "-")
    group = f"pg-{name}"
    requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    if pod.num_gpu:
        percent = str(pod.gpu_milli // 10 * pod.num_gpu)
        requests["koordinator.sh/gpu-core"] = percent
        requests["koordinator.sh/gpu-memory-ratio"] = percent
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "main", "image": "trace",
                        "resources": {"requests": requests, "limits": dict(requests)}}]}
    if pod.gpu_spec and pod.num_gpu:  # a CPU-only pod takes no card, so any model will do
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": LABEL_GPU_MODEL, "operator": "In", "values": sorted(pod.gpu_spec)}]}]}}}
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"lahar:replay/{name}"))
    meta = {"name": name, "namespace": NAMESPACE, "uid": uid,
            "annotations": {"scheduling.k8s.io/group-name": group}}
    podgroup = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": group, "namespace": NAMESPACE,
                             "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"lahar:pg/{name}"))},
                "spec": {"minMember": 1, "queue": "default"}, "status": {"phase": "Pending"}}
    return [podgroup, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                       "status": {"phase": "Pending"}}]


def run_replay(
    *, nodes: Sequence[TraceNode], pods: Sequence[TracePod], policy: str, seed: int,
    tune: float = 1.3, limit: int | None = None, tie_break: str = "first",
    progress: Callable[[int, int], None] | None = None,
    policy_args: Mapping[str, Any] | None = None,
) -> ReplayResult:
    """Replay one (trace, policy, seed) through the scheduler; see the module docstring."""
    rng = random.Random(seed)
    capacity = sum(n.gpus for n in nodes) * MILLI
    work = generate_workload(pods, capacity_gpu_milli=capacity, tune=tune, rng=rng)
    order = list(range(len(nodes)))
    rng.shuffle(order)
    shuffled = [nodes[i] for i in order]
    manifests: list[Manifest] = []
    row_of: dict[str, int] = {}
    for rank, node in enumerate(shuffled):
        name, objects = _node_objects(rank, node)
        row_of[name] = rank
        manifests.extend(Manifest(f"<replay node {rank}>", obj) for obj in objects)
    entries = target_entries(work.original)
    conf = replay_conf(policy, target=entries, tie_break=tie_break, policy_args=policy_args)
    cluster, cache, scheduler = build_simulation(manifests, conf=conf, seed=seed)
    scheduler.sampling = NodeSampling(percentage=100)  # the paper scores every node
    states = NodeStates.build(
        gpu_counts=[n.gpus for n in shuffled], cpu_milli=[n.cpu_milli for n in shuffled],
        memory_mib=[n.memory_mib for n in shuffled], models=[n.model for n in shuffled])
    target = TargetWorkload.from_keys(shape_key(p.shape, p.spec_text) for p in work.original)
    metric = FragmentCache(states, target)
    result = ReplayResult(RunRecorder(capacity))
    sequence = list(work.pods[:limit])
    arrived = 0
    started = time.perf_counter()
    for index, pod in enumerate(sequence):
        podgroup, pod_obj = _pod_objects(index, pod)
        for obj in (podgroup, pod_obj):
            _submit(cluster, cache.apply, obj)
        scheduler.run_once()
        cache.flush()
        arrived += pod.total_gpu_milli
        key = f"{NAMESPACE}/{pod_obj['metadata']['name']}"
        stored = cluster.objects["Pod"][key]
        node_name = stored["spec"].get("nodeName")
        if node_name:
            text = stored["metadata"].get("annotations", {}).get(GPU_MINORS, "")
            cards = tuple(int(c) for c in text.split(",") if c) if pod.num_gpu else ()
            states.place(row_of[node_name], pod.shape, cards)
            result.placements.append((pod.name, node_name, cards))
        else:
            result.failed.append(pod.name)
            for kind, obj in (("Pod", stored), ("PodGroup", podgroup)):
                _withdraw(cluster, cache.apply, kind, obj)
        idle = int(states.gpu_idle.sum())
        result.recorder.record(arrived_milli=arrived, allocated_milli=capacity - idle,
                               fragment_milli=metric.total(), idle_milli=idle,
                               failed_pods=len(result.failed))
        if progress is not None:
            progress(index + 1, len(sequence))
    result.seconds_per_pod = (time.perf_counter() - started) / max(len(sequence), 1)
    return result


def _submit(cluster: Any, apply: Callable[[str, str, Any], None], obj: dict[str, Any]) -> None:
    """What the API server does on create: store with a resource version, then watch."""
    meta = obj["metadata"]
    meta.setdefault("creationTimestamp", "2023-01-01T00:00:00Z")
    meta["resourceVersion"] = str(len(cluster.objects.get(obj["kind"], {})) + 1)
    cluster.objects.setdefault(obj["kind"], {})[f"{meta['namespace']}/{meta['name']}"] = obj
    apply("ADDED", obj["kind"], obj)


def _withdraw(cluster: Any, apply: Callable[[str, str, Any], None], kind: str,
              obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    cluster.objects.get(kind, {}).pop(f"{meta['namespace']}/{meta['name']}", None)
    apply("DELETED", kind, obj)
