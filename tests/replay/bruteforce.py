"""Slow, obviously-correct versions of the fragment measure, the FGD score and the learned
shape count, for tests.

Each is a direct reading of the FGD paper's definitions (``GetNodePodFrag`` and
``NodeGpuShareFragAmount`` of hkust-adsl/kubernetes-scheduler-simulator ``pkg/utils/frag.go``),
one node and one shape at a time, without numpy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from scheduler.devices.finegrained.placement import task_shape_key
from scheduler.devices.placement.frag import ShapeKey, TargetWorkload

MILLI = 1000


def shape_fragment(
    free: Sequence[int], cpu_free: int, model: str, *, cpu: int, milli: int, num: int,
    spec: frozenset[str], mem_free: float = 0, mem: float = 0,
) -> float:
    idle = sum(free)
    if milli == 0:
        return idle  # a CPU-only shape never uses the free GPU
    if spec and model not in spec:
        return idle
    fitting = sum(1 for f in free if f >= milli)
    if fitting >= num and cpu_free >= cpu and mem_free >= mem:
        return sum(f for f in free if f < milli)
    return idle


def node_fragment(
    free: Sequence[int], cpu_free: int, model: str, target: TargetWorkload, mem_free: float = 0
) -> float:
    """With ``target.memory`` set, a shape also needs that much of ``mem_free`` to fit."""
    total = 0.0
    for k, key in enumerate(target.shapes):
        total += float(target.prob[k]) * shape_fragment(
            free, cpu_free, model, cpu=key.cpu_milli, milli=key.gpu_milli, num=key.num_gpu,
            spec=key.gpu_spec, mem_free=mem_free,
            mem=0 if target.memory is None else float(target.memory[k]),
        )
    return total


def starved_fragment(free: Sequence[int], cpu_free: int, target: TargetWorkload) -> float:
    """The free GPU milli that the free CPU cannot feed at the CPU per GPU milli the target's
    GPU shapes ask on average (their CPU over their GPU, both weighed by probability)."""
    cpu = milli = 0.0
    for k, key in enumerate(target.shapes):
        if key.num_gpu:
            cpu += float(target.prob[k]) * key.cpu_milli
            milli += float(target.prob[k]) * key.gpu_milli * key.num_gpu
    if milli == 0 or cpu == 0:
        return 0.0
    return max(0.0, sum(free) - cpu_free / (cpu / milli))


def fgd_node_score(
    free: Sequence[int], cpu_free: int, model: str, target: TargetWorkload, *, cpu: int, milli: int, num: int
) -> tuple[int, tuple[int, ...]]:
    """(node score, cards) of FGD for a pod on one node, trying every card for a sharing pod."""
    before = node_fragment(free, cpu_free, model, target)

    def score(after: Sequence[int]) -> int:
        delta = before - node_fragment(after, cpu_free - cpu, model, target)
        return int(100 / (1 + math.exp(-delta / 1000)))

    if num == 1 and milli < MILLI:
        best, card = -1, -1
        for g, f in enumerate(free):
            if f >= milli:
                after = list(free)
                after[g] -= milli
                s = score(after)
                if s > best:
                    best, card = s, g
        return best, (card,)
    cards = tuple(g for g, f in enumerate(free) if f >= MILLI)[:num] if num else ()
    after = [f - MILLI if g in cards else f for g, f in enumerate(free)]
    return score(after), cards


def full_count(nodes: Sequence[Any], pending: list[Any]) -> dict[ShapeKey, float]:
    """Every pod on a node and every pending pod, counted by shape from scratch."""
    tasks = [t for node in nodes for t in node.tasks.values()] + pending
    return {key: float(n) for key, n in Counter(map(task_shape_key, tasks)).items()}
