"""Node scores and card choice of the placement policies compared in the FGD paper, and ours.

Each policy is bound to a ``NodeStates`` and answers two questions a device family asks:
``score(pod, candidates)`` — integer scores 0–100 for the candidate nodes (all of which fit
the pod), the highest wins (``select_node`` breaks ties) — and ``choose_cards(pod, node)`` —
the cards the pod gets on the chosen node. ``observe(pod)`` tells a policy a pod has arrived,
before it is scored.

The baselines follow the reference simulator's score plugins (hkust-adsl/
kubernetes-scheduler-simulator, ``pkg/simulator/plugin``), integer arithmetic included:

- ``random``: one candidate, drawn uniformly, scores 100 (``RandomScorePlugin.PreScore``);
  a sharing pod gets a uniformly drawn card with room (``allocateGpuIdBasedOnRandomFit``).
- ``dotprod``: Tetris' dot product of the node's free [CPU, total GPU] and the pod's request,
  each divided by the largest node (128 cores, 8 cards); score ⌊100·(1 − dot/2)⌋, 0 when the
  CPU does not fit (``calculateDotProductScore``, merged GPU dimension, max normalisation).
- ``clustering``: bands by the kinds of GPU pods a node hosts — only the pod's kind 75–100,
  its kind among others 50–75, none 25–50, only other kinds 0–25 — and inside a band more
  for less free GPU; CPU-only pods score 0 (``GpuClusteringScorePlugin.Score``).
- ``packing``: sharing an already used card 50–100 (less free on it is better), whole cards
  on a used node 33–50, an untouched node ≤ 33; CPU-only pods 0 (``getPackingScore``).
- ``bestfit``: ⌊100·(1 − ½·(CPU left after)/128 cores − ½·(GPU left after)/8 cards)⌋, then
  min–max normalised over the candidates (``getBestFitScore`` + ``NormalizeScore``).
- ``fgd``: fragmentation gradient descent (``fgd``).

All but ``random`` and ``fgd`` give a sharing pod the fitting card with the least free milli
(``allocateGpuIdBasedOnBestFit``). Whole-card pods always take the lowest-numbered fully free
cards. ``fgd-online`` (``online``) and ``fgd-learned`` (``learned``) are ours.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

import numpy as np

from scheduler.devices.placement.fgd import FgdPolicy, whole_cards
from scheduler.devices.placement.frag import ShapeKey, TargetWorkload
from scheduler.devices.placement.learned import LearnedArgs, LearnedFgdPolicy
from scheduler.devices.placement.online import FgdOnlinePolicy
from scheduler.devices.placement.state import MILLI, NodeStates, PodShape

__all__ = [
    "POLICIES",
    "TIE_BREAKS",
    "BestFitPolicy",
    "ClusteringPolicy",
    "DotProdPolicy",
    "PackingPolicy",
    "Policy",
    "RandomPolicy",
    "best_fit_cards",
    "make_policy",
    "select_node",
]

MAX_SCORE = 100
MAX_SPEC_CPU = 128_000
"""Milli-CPU of the largest node, the normaliser of ``dotprod`` and ``bestfit``."""
MAX_SPEC_GPU = 8 * MILLI
"""Milli-GPU of the largest node."""


class Policy(Protocol):
    name: str

    def observe(self, pod: PodShape) -> None: ...

    def score(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray: ...

    def choose_cards(self, pod: PodShape, node: int) -> tuple[int, ...]: ...


TIE_BREAKS = ("first", "random")


def select_node(
    scores: np.ndarray, candidates: np.ndarray, rng: random.Random, *, ties: str = "first"
) -> int:
    """A candidate with the highest score.

    ``ties="first"`` takes the first best candidate in the given order; ``"random"`` draws
    uniformly among the best, as upstream kube-scheduler's ``selectHost`` does. The paper's
    curves are reproduced with ``"first"`` over nodes in a per-run shuffled order (the
    simulator renames nodes with a seeded random prefix): with uniform draws, CPU-only pods,
    which tie everywhere under packing, clustering and FGD, spread over all nodes and starve
    their cards of CPU, and FGD on ``default`` leaves about twice the published unallocated
    GPU at 100 % arrived.
    """
    if ties not in TIE_BREAKS:
        raise ValueError(f"ties must be one of {', '.join(TIE_BREAKS)}, got {ties!r}")
    if len(candidates) == 0:
        raise ValueError("no candidate node to select from")
    if ties == "first":
        return int(candidates[int(np.argmax(scores))])
    best = np.flatnonzero(scores == scores.max())
    return int(candidates[best[rng.randrange(best.size)]])


def best_fit_cards(pod: PodShape, free: np.ndarray) -> tuple[int, ...]:
    """A sharing pod's fitting card with the least free milli (lowest number on ties)."""
    if pod.num_gpu == 0:
        return ()
    if not pod.is_share:
        return whole_cards(pod, free)
    room = np.where(free >= pod.gpu_milli, free, MILLI + 1)
    card = int(np.argmin(room))
    if room[card] > MILLI:
        raise ValueError("no card of the node has room for the pod")
    return (card,)


class _BestFitCards:
    states: NodeStates

    def observe(self, pod: PodShape) -> None:
        """Baselines keep no state about arrivals."""

    def choose_cards(self, pod: PodShape, node: int) -> tuple[int, ...]:
        return best_fit_cards(pod, self.states.gpu_free[node])


class RandomPolicy:
    name = "random"

    def __init__(self, states: NodeStates, *, rng: random.Random) -> None:
        self.states = states
        self.rng = rng

    def observe(self, pod: PodShape) -> None:
        """Random placement keeps no state about arrivals."""

    def score(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(candidates), dtype=np.int64)
        if len(candidates):
            scores[self.rng.randrange(len(candidates))] = MAX_SCORE
        return scores

    def choose_cards(self, pod: PodShape, node: int) -> tuple[int, ...]:
        free = self.states.gpu_free[node]
        if not pod.is_share:
            return best_fit_cards(pod, free)
        chosen = -1
        # Reservoir sampling over the fitting cards in card order.
        for seen, card in enumerate(np.flatnonzero(free >= pod.gpu_milli), start=1):
            if self.rng.randrange(seen) == 0:
                chosen = int(card)
        if chosen < 0:
            raise ValueError("no card of the node has room for the pod")
        return (chosen,)


class DotProdPolicy(_BestFitCards):
    name = "dotprod"

    def __init__(self, states: NodeStates) -> None:
        self.states = states

    def score(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray:
        cpu = self.states.cpu_free[candidates].astype(np.float64)
        gpu = self.states.gpu_idle[candidates].astype(np.float64)
        dot = (cpu / MAX_SPEC_CPU) * (pod.cpu_milli / MAX_SPEC_CPU) + (gpu / MAX_SPEC_GPU) * (
            pod.total_gpu_milli / MAX_SPEC_GPU)
        scores = np.trunc(MAX_SCORE * (1.0 - dot / 2.0)).astype(np.int64)
        return np.where(cpu >= pod.cpu_milli, scores, 0)


class ClusteringPolicy(_BestFitCards):
    name = "clustering"

    def __init__(self, states: NodeStates) -> None:
        self.states = states

    def score(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray:
        if pod.tag < 0:
            return np.zeros(len(candidates), dtype=np.int64)
        tags = self.states.tags[candidates]
        kinds = (tags > 0).sum(axis=1)
        same = tags[:, pod.tag] > 0
        band = np.where(same, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        fullness = (MAX_SCORE // 4) * (MAX_SPEC_GPU - self.states.gpu_idle[candidates])
        return np.asarray(fullness // MAX_SPEC_GPU + band, dtype=np.int64)


class PackingPolicy(_BestFitCards):
    name = "packing"

    def __init__(self, states: NodeStates) -> None:
        self.states = states

    def score(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray:
        if pod.num_gpu == 0:
            return np.zeros(len(candidates), dtype=np.int64)
        free = self.states.gpu_free[candidates]
        count = self.states.gpu_count[candidates]
        full = (free >= MILLI).sum(axis=1)
        untouched = np.maximum(MAX_SCORE // 3 - full, full)
        if pod.is_share:
            # The card packing would use: the fitting one with the least free milli.
            least = np.where(free >= pod.gpu_milli, free, MILLI + 1).min(axis=1)
            on_shared = np.maximum(MAX_SCORE - (least * 100 // MILLI) // 10, MAX_SCORE // 2)
            used = np.where(least >= MILLI, max(MAX_SCORE // 2 - 1, MAX_SCORE // 3), on_shared)
        else:
            used = np.full(len(candidates), max(MAX_SCORE // 2 - pod.num_gpu, MAX_SCORE // 3))
        return np.asarray(np.where(full == count, untouched, used), dtype=np.int64)


class BestFitPolicy(_BestFitCards):
    name = "bestfit"

    def __init__(self, states: NodeStates) -> None:
        self.states = states

    def score(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray:
        cpu = self.states.cpu_free[candidates].astype(np.float64)
        gpu = self.states.gpu_idle[candidates].astype(np.float64)
        left = (cpu - pod.cpu_milli) / MAX_SPEC_CPU * 0.5 + (
            gpu - pod.total_gpu_milli) / MAX_SPEC_GPU * 0.5
        raw = np.trunc((1.0 - left) * MAX_SCORE).astype(np.int64)
        if raw.size == 0:
            return raw
        low, high = int(raw.min()), int(raw.max())
        if high == low:
            return np.zeros_like(raw)
        return (raw - low) * MAX_SCORE // (high - low)


PolicyFactory = Callable[..., Policy]

POLICIES: dict[str, PolicyFactory] = {
    RandomPolicy.name: RandomPolicy,
    DotProdPolicy.name: DotProdPolicy,
    ClusteringPolicy.name: ClusteringPolicy,
    PackingPolicy.name: PackingPolicy,
    BestFitPolicy.name: BestFitPolicy,
    FgdPolicy.name: FgdPolicy,
    FgdOnlinePolicy.name: FgdOnlinePolicy,
    LearnedFgdPolicy.name: LearnedFgdPolicy,
}


def make_policy(
    name: str,
    states: NodeStates,
    *,
    rng: random.Random,
    target: TargetWorkload | None = None,
    learned: dict[ShapeKey, float] | None = None,
    **options: float | int | str | None,
) -> Policy:
    """Build a policy by name; ``fgd`` needs ``target``, ``random`` uses ``rng``.

    ``fgd-learned`` takes the arguments of ``LearnedArgs`` as ``options`` and, through the
    scheduler, the shape counts of the session's bound and pending pods as ``learned``
    (without them it counts the pods it sees itself).
    """
    if name not in POLICIES:
        raise ValueError(f"unknown placement policy {name!r}; known: {', '.join(POLICIES)}")
    if name == RandomPolicy.name:
        return RandomPolicy(states, rng=rng)
    if name == FgdPolicy.name:
        if target is None:
            raise ValueError("policy 'fgd' needs the target workload")
        return FgdPolicy(states, target=target)
    if name == FgdOnlinePolicy.name:
        return FgdOnlinePolicy(states, **options)  # type: ignore[arg-type]
    if name == LearnedFgdPolicy.name:
        unknown = sorted(set(options) - set(LearnedArgs.__dataclass_fields__))
        if unknown:
            raise ValueError(f"policy {name!r} takes no option {', '.join(unknown)}")
        return LearnedFgdPolicy(states, learned=learned,
                                args=LearnedArgs(**options))  # type: ignore[arg-type]
    if learned is not None:
        raise ValueError(f"policy {name!r} learns nothing from the cluster's pods")
    if options:
        raise ValueError(f"policy {name!r} takes no options, got {', '.join(options)}")
    return POLICIES[name](states)
