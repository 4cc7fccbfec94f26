"""FGD placement: score nodes by how little the pod grows their fragment, and pick its card.

Matches the reference simulator's FGD score plugin (``calculateGpuShareFragExtendScore`` in
hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/fgd_score.go``): the score of
node n is ⌊100 · sigmoid(Δ/1000)⌋ with Δ = F_n before − F_n after the placement (milli), so
the node whose fragment grows least scores highest. A card-sharing pod tries every card with
room and keeps the best; that card is also the one it gets (the first card on equal integer
scores). Whole-card pods take the lowest-numbered fully free cards; CPU-only pods take none.

Nodes of the same kind (card model, free CPU, free milli per card in any order) score alike,
so a pod is scored once per kind among its candidates and each node takes its kind's score.
"""

from __future__ import annotations

import numpy as np

from scheduler.devices.placement.frag import FragmentCache, TargetWorkload
from scheduler.devices.placement.state import MILLI, NodeStates, PodShape

__all__ = ["FgdPolicy", "fgd_cards", "fgd_scores", "whole_cards"]

MAX_SCORE = 100


def _score_of(delta: np.ndarray) -> np.ndarray:
    # Fragments are sums of float products; a placement that changes nothing must give a
    # change of exactly 0 (score 50), not ±1e-13, so the change is rounded to 1e-6 milli.
    delta = np.round(delta, 6)
    return np.floor(MAX_SCORE / (1.0 + np.exp(-delta / 1000.0))).astype(np.int64)


def whole_cards(pod: PodShape, free: np.ndarray) -> tuple[int, ...]:
    """The lowest-numbered fully free cards, as many as the pod asks for."""
    full = np.flatnonzero(free >= MILLI)[: pod.num_gpu]
    if full.size < pod.num_gpu:
        raise ValueError("the node has too few fully free cards for the pod")
    return tuple(int(c) for c in full)


def fgd_scores(cache: FragmentCache, pod: PodShape, nodes: np.ndarray) -> np.ndarray:
    """(C,) FGD node scores (0–100) of ``nodes``, which must all fit the pod."""
    cache.refresh()
    nodes = np.asarray(nodes, dtype=np.int64)
    # One evaluation per node kind; every node of a kind gets the same score.
    first, inverse = cache.kinds(nodes)
    sample = nodes[first]
    before = cache.per_node[sample]
    if not pod.is_share:
        return _score_of(before - cache.after_whole(pod, sample))[inverse]
    free = cache.states.gpu_free[sample]
    rows, cards = np.nonzero(free >= pod.gpu_milli)
    scores = np.zeros(sample.size, dtype=np.int64)
    if rows.size:
        delta = before[rows] - cache.after_share(pod, sample[rows], free[rows, cards])
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        scores[rows[starts]] = _score_of(np.maximum.reduceat(delta, starts))
    return scores[inverse]


def fgd_cards(cache: FragmentCache, pod: PodShape, node: int) -> tuple[int, ...]:
    """The cards FGD gives the pod on ``node``."""
    free = cache.states.gpu_free[node]
    if pod.num_gpu == 0:
        return ()
    if not pod.is_share:
        return whole_cards(pod, free)
    cache.refresh()
    cards = np.flatnonzero(free >= pod.gpu_milli)
    if cards.size == 0:
        raise ValueError("no card of the node has room for the pod")
    nodes = np.full(cards.size, node, dtype=np.int64)
    delta = cache.per_node[node] - cache.after_share(pod, nodes, free[cards])
    return (int(cards[int(np.argmax(_score_of(delta)))]),)


class FgdPolicy:
    """FGD against a fixed target workload (the paper's: the trace's own pod shapes)."""

    name = "fgd"

    def __init__(self, states: NodeStates, *, target: TargetWorkload,
                 terms: tuple[np.ndarray, np.ndarray] | None = None,
                 fragment: np.ndarray | None = None) -> None:
        """``terms`` and ``fragment``: see :class:`FragmentCache` (a caller's memo)."""
        self.states = states
        self.cache = FragmentCache(states, target, terms=terms, fragment=fragment)

    def observe(self, pod: PodShape) -> None:
        """FGD's target is fixed; arrivals change nothing."""

    def score(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray:
        return fgd_scores(self.cache, pod, candidates)

    def choose_cards(self, pod: PodShape, node: int) -> tuple[int, ...]:
        return fgd_cards(self.cache, pod, node)
