"""Our placement policy: FGD against the pods the cluster holds, with wider score bands and
the GPU a node's CPU cannot feed counted as fragment.

FGD (``fgd``) measures fragment against the shapes of the whole trace, which a running
scheduler cannot know in advance. ``fgd-learned`` takes its target workload from what one
scheduling session sees: the shapes of the pods bound to nodes plus the pending ones (in a
replay, where pods arrive one at a time, that is every arrival placed so far and the arriving
pod). The kept shapes are chosen as FGD chooses them (most frequent first until
``popularity`` percent of the count is covered). A learned shape is keyed by CPU, milli per
card and card count only: a session sees a pod's accepted card models only as node affinity,
which the predicates enforce, so every learned shape is taken to accept any model.

The node score is FGD's, ⌊100·σ(Δ/``scale``)⌋ with Δ the node's fragment before minus after the
pod, but with ``scale`` (milli) a documented argument: FGD's 1000 cuts Δ into bands about
40 milli wide near 0; a wider ``scale`` puts more nearly-equal nodes into one band, where the
tie-break (``first``: the first node in the node order) packs pods onto the same nodes and
leaves others whole for the large requests. The exact Δ without bands does far worse
(``docs/replay.md``), which is what pointed here. A card-sharing pod gets, by ``cards``, the
fitting card with the least free milli (``bestfit``) or the card with the best banded score
(``fragment``, as ``fgd``).

FGD counts a node's free GPU as fragment to a shape only once the node cannot fit one more pod
of that shape; a node whose free CPU is about to run out before its free cards do looks whole
to it until the last pod. ``fgd-learned`` adds to a node's fragment, with weight ``starved``,
the free GPU milli its free CPU cannot feed at the CPU per GPU milli the target's GPU shapes
ask on average: max(0, free GPU − free CPU / ρ), ρ = Σ p·cpu / Σ p·milli·cards over the GPU
shapes. So CPU-only and CPU-heavy pods go where CPU is left over, not where it would strand
cards. With ``starved`` 0 (or no GPU shape seen yet) the measure is FGD's, and it is FGD's for
a pod asking more than one card (the term sent 2- and 4-card pods to the CPU-rich nodes, where
the rare CPU-heavy 8-card pods then found no room).

With ``reserve`` above 0 (off by default) the policy also keeps whole cards for the pods that
take a card whole: while the cluster's entirely free cards are fewer than ``reserve`` percent
of its cards times the share of the counted GPU milli that one-card whole pods ask, a
card-sharing pod that would strand a whole card — what it leaves on the card would fit fewer
than ``STRAND_SHARE`` of the counted card-sharing pods — may take only a card already in use,
and waits (in a replay: fails) when no node has one that fits. It trades pods that fit now for
whole cards later, which pays only once whole cards run out (``docs/replay.md``).

In the scheduler the counts come from the cluster's pods alone: the ``deviceshare`` plugin
counts the shapes when a session opens (again only for the nodes renewed since the last
session, :class:`~scheduler.devices.finegrained.placement.LearnedShapes`) and hands them
in as ``learned``. In the reference loop the policy
object lives through the run and counts itself: ``observe`` marks the arriving pod pending,
``choose_cards`` (called only for a pod that was placed) moves it to the bound ones — so both
loops score against the same counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scheduler.devices.placement.fgd import whole_cards
from scheduler.devices.placement.frag import (
    DEFAULT_POPULARITY,
    FragmentCache,
    ShapeKey,
    TargetWorkload,
)
from scheduler.devices.placement.state import MILLI, NodeStates, PodShape

__all__ = [
    "CARD_CHOICES",
    "DEFAULT_SCALE",
    "DEFAULT_STARVED",
    "STRAND_SHARE",
    "LearnedArgs",
    "LearnedFgdPolicy",
    "cpu_per_milli",
    "learned_key",
    "reserve_holds",
    "reserved_cards",
    "starved_milli",
]

MAX_SCORE = 100
DEFAULT_SCALE = 2000
"""Milli of fragment change per unit of the sigmoid; FGD's is 1000."""
DEFAULT_STARVED = 1.0
"""Weight of the starved GPU milli added to a node's fragment; 0 leaves FGD's measure."""
CARD_CHOICES = ("bestfit", "fragment")
STRAND_SHARE = 0.05
"""A sharing pod strands a whole card when what it leaves fits fewer than this share of the
counted card-sharing pods."""
_CARDS_PER_WORD = 6
"""(MILLI + 1) ** 6 < 2 ** 63."""


@dataclass(frozen=True, slots=True)
class LearnedArgs:
    """The policy's arguments; a bad value raises ``ValueError`` naming the argument."""

    scale: int = DEFAULT_SCALE
    cards: str = "bestfit"
    popularity: float = DEFAULT_POPULARITY
    starved: float = DEFAULT_STARVED
    reserve: float = 0.0
    """Percent of the cluster's cards kept whole (scaled by the one-card whole pods' share)."""

    def __post_init__(self) -> None:
        if isinstance(self.scale, bool) or not isinstance(self.scale, int) or self.scale < 1:
            raise ValueError(f"scale must be a whole number of milli, at least 1, "
                             f"got {self.scale!r}")
        if self.cards not in CARD_CHOICES:
            raise ValueError(f"cards must be one of {', '.join(CARD_CHOICES)}, "
                             f"got {self.cards!r}")
        if isinstance(self.popularity, bool) or not isinstance(self.popularity, int | float) \
                or not 0 < self.popularity <= 100:
            raise ValueError(f"popularity must be a percentage in (0, 100], "
                             f"got {self.popularity!r}")
        if isinstance(self.starved, bool) or not isinstance(self.starved, int | float) \
                or not 0 <= self.starved < float("inf"):
            raise ValueError(f"starved must be a number at least 0, got {self.starved!r}")
        if isinstance(self.reserve, bool) or not isinstance(self.reserve, int | float) \
                or not 0 <= self.reserve <= 100:
            raise ValueError(f"reserve must be a percentage in [0, 100], got {self.reserve!r}")


def learned_key(pod: PodShape) -> ShapeKey:
    """The shape a pod counts as: CPU, milli per card, cards; any card model."""
    return ShapeKey(pod.cpu_milli, pod.gpu_milli, pod.num_gpu)


def _banded(delta: np.ndarray, scale: int) -> np.ndarray:
    # As FGD: a placement that changes nothing must give exactly 0 (score 50), not ±1e-13.
    delta = np.round(delta, 6)
    return np.floor(MAX_SCORE / (1.0 + np.exp(-delta / scale))).astype(np.int64)


def cpu_per_milli(target: TargetWorkload) -> float:
    """The CPU milli the target's GPU pods ask per GPU milli, as an expectation over its
    shapes; 0 when it has no GPU shape."""
    gpu = target.is_gpu
    milli = float((target.prob[gpu] * target.milli[gpu] * target.num[gpu]).sum())
    if milli <= 0:
        return 0.0
    return float((target.prob[gpu] * target.cpu[gpu]).sum()) / milli


def starved_milli(idle: np.ndarray, cpu: np.ndarray, rho: float) -> np.ndarray:
    """The part of ``idle`` free GPU milli that ``cpu`` free CPU milli cannot feed when pods
    ask ``rho`` (> 0) CPU milli per GPU milli; 0 where the CPU suffices."""
    return np.maximum(0.0, idle - cpu / rho)


def reserved_cards(counts: Mapping[ShapeKey, float], *, cards: int, reserve: float) -> float:
    """The whole cards to keep: ``reserve`` percent of ``cards`` times the share of the
    counted pods' GPU milli that pods taking one card whole ask (0 without GPU pods)."""
    total = sum(n * k.gpu_milli * k.num_gpu for k, n in counts.items())
    if total <= 0 or reserve <= 0:
        return 0.0
    whole = sum(n * MILLI for k, n in counts.items() if k.num_gpu == 1 and k.gpu_milli >= MILLI)
    return reserve / 100.0 * cards * whole / total


def reserve_holds(pod: PodShape, counts: Mapping[ShapeKey, float], *, whole_free: int,
                  cards: int, reserve: float) -> bool:
    """Whether ``pod`` may take only a card already in use: it shares a card, what it leaves
    on a whole one fits fewer than ``STRAND_SHARE`` of the counted sharing pods, and fewer
    than :func:`reserved_cards` cards are whole."""
    if reserve <= 0 or not pod.is_share:
        return False
    sharing = {k: n for k, n in counts.items() if k.num_gpu == 1 and 0 < k.gpu_milli < MILLI}
    total = sum(sharing.values())
    left = MILLI - pod.gpu_milli
    if total <= 0 or sum(n for k, n in sharing.items() if k.gpu_milli <= left) \
            >= STRAND_SHARE * total:
        return False
    return whole_free < reserved_cards(counts, cards=cards, reserve=reserve)


def _subset(states: NodeStates, rows: np.ndarray) -> NodeStates:
    return NodeStates(gpu_free=states.gpu_free[rows], gpu_count=states.gpu_count[rows],
                      cpu_free=states.cpu_free[rows], mem_free=states.mem_free[rows],
                      model=states.model[rows], models=states.models, tags=states.tags[rows])


def _kinds(states: NodeStates, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, inverse) of ``nodes`` grouped by what the fragment depends on: card model,
    free CPU and the free milli of the cards in any order."""
    cards = np.sort(states.gpu_free[nodes], axis=1)
    # A row-wise np.unique sorts a structured view and costs most of a pod's score; packing
    # six cards (0–1000 milli each) into one int64 and sorting a few columns is far cheaper.
    columns = [states.model[nodes], states.cpu_free[nodes]]
    for start in range(0, cards.shape[1], _CARDS_PER_WORD):
        word = np.zeros(len(nodes), dtype=np.int64)
        for slot in range(start, min(start + _CARDS_PER_WORD, cards.shape[1])):
            word = word * (MILLI + 1) + cards[:, slot]
        columns.append(word)
    order = np.lexsort(columns[::-1])
    keys = np.stack(columns, axis=1)[order]
    starts = np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)]
    group = np.cumsum(starts) - 1
    inverse = np.empty(len(nodes), dtype=np.int64)
    inverse[order] = group
    # lexsort is stable, so the first row of each group is its lowest-numbered node.
    return order[starts], inverse


class LearnedFgdPolicy:
    """FGD with a target workload learned from the cluster's pods, in wider bands."""

    name = "fgd-learned"

    def __init__(self, states: NodeStates, *, learned: Mapping[ShapeKey, float] | None = None,
                 args: LearnedArgs | None = None) -> None:
        self.states = states
        self.args = args or LearnedArgs()
        self._fixed = learned is not None
        self._counts: dict[ShapeKey, float] = dict(learned or {})
        self._pending: PodShape | None = None
        self.partial_only = False
        """Set by ``admit`` when the reserve holds for the arriving pod (reference loop);
        the scheduler sets it on the one-node policy that picks the card."""

    # -- the counts -------------------------------------------------------------------------
    def observe(self, pod: PodShape) -> None:
        """The arriving pod is pending until ``choose_cards`` places it (reference loop)."""
        if not self._fixed:
            self._pending = pod

    def target(self) -> TargetWorkload | None:
        """The kept shapes of the bound and pending pods; None before any pod."""
        counts = self.counts()
        if not counts:
            return None
        return TargetWorkload.from_counts(counts, popularity=self.args.popularity)

    def counts(self) -> dict[ShapeKey, float]:
        """The counted shapes, the pending pod included."""
        counts = dict(self._counts)
        if self._pending is not None:
            key = learned_key(self._pending)
            counts[key] = counts.get(key, 0.0) + 1.0
        return counts

    def admit(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray:
        """``candidates`` left to ``pod`` by the reserve: all of them unless it holds, else
        those with a card in use that fits (``states`` is the whole cluster here)."""
        states = self.states
        whole = int((states.gpu_free == MILLI).sum())  # slots past a node's cards hold 0
        self.partial_only = reserve_holds(pod, self.counts(), whole_free=whole,
                                          cards=int(states.gpu_count.sum()),
                                          reserve=float(self.args.reserve))
        if not self.partial_only:
            return candidates
        free = states.gpu_free[candidates]
        used = (free >= pod.gpu_milli) & (free < MILLI)
        return candidates[used.any(axis=1)]

    # -- scores and cards -----------------------------------------------------------------
    def score(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray:
        candidates = np.asarray(candidates, dtype=np.int64)
        target = self.target()
        if target is None or candidates.size == 0:
            return np.zeros(candidates.size, dtype=np.int64)
        # Nodes of one kind have the same fragment before and after any placement, so the
        # fragment is computed once per kind over a small table of one node per kind.
        first, inverse = _kinds(self.states, candidates)
        sample = _subset(self.states, candidates[first])
        cache = FragmentCache(sample, target)
        rows = np.arange(len(sample))
        rho = cpu_per_milli(target)
        # A multi-card pod is placed by FGD's measure alone: steered by the term, the 2- and
        # 4-card pods took the CPU-rich nodes that the rare CPU-heavy 8-card pods need.
        weight = float(self.args.starved) if rho > 0 and pod.num_gpu <= 1 else 0.0
        before = cache.per_node
        starved_after = np.zeros(len(sample))  # per node: on any of its cards alike
        if weight:
            idle = sample.gpu_idle
            before = before + weight * starved_milli(idle, sample.cpu_free, rho)
            starved_after = weight * starved_milli(
                idle - pod.total_gpu_milli, sample.cpu_free - pod.cpu_milli, rho)
        if not pod.is_share:
            after = cache.after_whole(pod, rows) + starved_after
            return _banded(before - after, self.args.scale)[inverse]
        on_card, card = np.nonzero(sample.gpu_free >= pod.gpu_milli)
        scores = np.zeros(len(sample), dtype=np.int64)
        if on_card.size:
            after = cache.after_share(pod, on_card, sample.gpu_free[on_card, card])
            delta = before[on_card] - (after + starved_after[on_card])
            starts = np.flatnonzero(np.r_[True, on_card[1:] != on_card[:-1]])
            scores[on_card[starts]] = _banded(np.maximum.reduceat(delta, starts),
                                              self.args.scale)
        return scores[inverse]

    def choose_cards(self, pod: PodShape, node: int) -> tuple[int, ...]:
        cards = self._cards(pod, node)
        self.partial_only = False
        if not self._fixed:
            key = learned_key(pod)
            self._counts[key] = self._counts.get(key, 0.0) + 1.0
            self._pending = None
        return cards

    def _cards(self, pod: PodShape, node: int) -> tuple[int, ...]:
        free = self.states.gpu_free[node]
        if pod.num_gpu == 0:
            return ()
        if not pod.is_share:
            return whole_cards(pod, free)
        room = free >= pod.gpu_milli
        if self.partial_only:
            room &= free < MILLI  # held by the reserve: a card already in use
        fitting = np.flatnonzero(room)
        if fitting.size == 0:
            raise ValueError("no card of the node has room for the pod")
        if self.args.cards == "bestfit":
            return (int(fitting[int(np.argmin(free[fitting]))]),)
        target = self.target()
        if target is None:
            return (int(fitting[0]),)
        cache = FragmentCache(_subset(self.states, np.array([node])), target)
        delta = cache.per_node[0] - cache.after_share(
            pod, np.zeros(fitting.size, dtype=np.int64), free[fitting])
        return (int(fitting[int(np.argmax(_banded(delta, self.args.scale)))]),)
