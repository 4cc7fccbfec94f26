"""A small reference replay loop, for tests only: the product replays through the scheduler.

It submits the pods of a generated workload one at a time to a ``NodeStates`` of the trace's
nodes (in an order shuffled with the run's seed, as the paper's simulator renames its nodes
with a seeded random prefix), lets the policy score the feasible nodes and pick the cards,
never retries a failure, and records the paper's metrics after every pod.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from scheduler.devices.placement.frag import FragmentCache, TargetWorkload, shape_key
from scheduler.devices.placement.learned import LearnedFgdPolicy
from scheduler.devices.placement.policies import make_policy, select_node
from scheduler.devices.placement.state import NodeStates, feasible_mask
from scheduler.replay.metrics import RunRecorder
from scheduler.replay.trace import TraceNode, TracePod, generate_workload


@dataclass(slots=True)
class Replay:
    states: NodeStates
    node_names: list[str]
    recorder: RunRecorder
    target: TargetWorkload
    placements: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def replay(
    *, nodes: list[TraceNode], pods: list[TracePod], policy: str, seed: int,
    tune: float = 1.3, limit: int | None = None, ties: str = "first",
    options: dict[str, float | int | str | None] | None = None,
) -> Replay:
    rng = random.Random(seed)
    capacity = sum(n.gpus for n in nodes) * 1000
    work = generate_workload(pods, capacity_gpu_milli=capacity, tune=tune, rng=rng)
    order = list(range(len(nodes)))
    rng.shuffle(order)
    shuffled = [nodes[i] for i in order]
    states = NodeStates.build(
        gpu_counts=[n.gpus for n in shuffled], cpu_milli=[n.cpu_milli for n in shuffled],
        memory_mib=[n.memory_mib for n in shuffled], models=[n.model for n in shuffled])
    target = TargetWorkload.from_keys(shape_key(p.shape, p.spec_text) for p in work.original)
    chooser = make_policy(policy, states, rng=rng, target=target, **(options or {}))
    metric = FragmentCache(states, target)
    result = Replay(states, [n.name for n in shuffled], RunRecorder(capacity), target)
    arrived = 0
    for pod in work.pods[:limit]:
        shape = pod.shape
        arrived += shape.total_gpu_milli
        chooser.observe(shape)
        candidates = np.flatnonzero(feasible_mask(shape, states))
        if isinstance(chooser, LearnedFgdPolicy):  # the whole-card reserve (off by default)
            candidates = chooser.admit(shape, candidates)
        if candidates.size:
            node = select_node(chooser.score(shape, candidates), candidates, rng, ties=ties)
            cards = chooser.choose_cards(shape, node)
            states.place(node, shape, cards)
            result.placements.append((pod.name, result.node_names[node], cards))
        else:
            result.failed.append(pod.name)
        idle = int(states.gpu_idle.sum())
        result.recorder.record(arrived_milli=arrived, allocated_milli=capacity - idle,
                               fragment_milli=metric.total(), idle_milli=idle,
                               failed_pods=len(result.failed))
    return result
