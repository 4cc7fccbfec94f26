"""The FGD fragmentation measure (Weng et al., USENIX ATC'23) and the change a placement makes.

A node's fragment is the GPU milli it has free that the *target workload* (the pod shapes a
cluster expects, with their popularity) could not use, as an expectation over that workload.
For one shape m on node n with per-card free R_g and free CPU C:

- m asks for no card: all of the node's free GPU counts as fragment (such a pod never uses it);
- the node's card model is not one m accepts: all free GPU is fragment;
- m fits (at least ``num_gpu`` cards each with ``gpu_milli`` free, and the CPU): only cards
  with less than ``gpu_milli`` free are fragment;
- otherwise (too few fitting cards, or CPU-starved cards): all free GPU is fragment.

F_n = Σ_m p_m · fragment(n, m) and the cluster's fragment is Σ_n F_n. FGD places a pod where
F grows least. The target workload is the trace's most frequent shapes (memory ignored)
covering 95 % of its pods, probabilities renormalised over the kept shapes; ties in frequency
keep the larger shape first.

To make one pod's scores cheap, ``FragmentCache`` keeps per node and shape the fragment a
fitting shape leaves (``small``: free milli on cards too small for it) and the number of cards
it fits (``fits``); a placement changes only the row of its node. The fragment after a
placement is then a few (candidates × shapes) array operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from scheduler.devices.placement.state import MILLI, NodeStates, PodShape

__all__ = [
    "DEFAULT_POPULARITY",
    "FragmentCache",
    "ShapeKey",
    "TargetWorkload",
    "TermsMemo",
    "fragment_of_nodes",
    "shape_key",
]

DEFAULT_POPULARITY = 95.0
"""Percent of the pods the kept shapes must cover (the paper's ``podPopularityThreshold``)."""


class ShapeKey(NamedTuple):
    """A pod shape as the target workload counts it; the field order is the tie-break order.
    A named tuple: hashed and compared in C, since counts are keyed by it every session."""

    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    spec_text: str = ""

    @property
    def gpu_spec(self) -> frozenset[str]:
        return frozenset(m for m in self.spec_text.split("|") if m)


def shape_key(pod: PodShape, spec_text: str | None = None) -> ShapeKey:
    """The target-workload key of a pod; ``spec_text`` as written in the trace when known."""
    text = spec_text if spec_text is not None else "|".join(sorted(pod.gpu_spec))
    return ShapeKey(pod.cpu_milli, pod.gpu_milli, pod.num_gpu, text)


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Pod shapes with probabilities summing to 1, as columns."""

    shapes: tuple[ShapeKey, ...]
    prob: np.ndarray
    cpu: np.ndarray
    milli: np.ndarray
    num: np.ndarray
    memory: np.ndarray | None = None
    """(K,) MiB a shape needs to fit, or None: memory ignored, as in the paper."""

    @classmethod
    def from_counts(
        cls, counts: Mapping[ShapeKey, float], *, popularity: float = DEFAULT_POPULARITY
    ) -> TargetWorkload:
        """The most frequent shapes until they cover ``popularity`` percent of the weight."""
        items = sorted(((w, k) for k, w in counts.items() if w > 0), reverse=True)
        if not items:
            raise ValueError("a target workload needs at least one pod shape")
        total = sum(w for w, _ in items)
        wanted = popularity * total / 100.0
        kept: list[tuple[float, ShapeKey]] = []
        covered = 0.0
        for weight, key in items:
            if covered >= wanted and kept:
                break
            kept.append((weight, key))
            covered += weight
        prob = np.array([w / covered for w, _ in kept], dtype=np.float64)
        shapes = tuple(k for _, k in kept)
        return cls(
            shapes=shapes,
            prob=prob,
            cpu=np.array([k.cpu_milli for k in shapes], dtype=np.int64),
            milli=np.array([k.gpu_milli for k in shapes], dtype=np.int64),
            num=np.array([k.num_gpu for k in shapes], dtype=np.int64),
        )

    @classmethod
    def from_keys(
        cls, keys: Iterable[ShapeKey], *, popularity: float = DEFAULT_POPULARITY
    ) -> TargetWorkload:
        counts: dict[ShapeKey, float] = {}
        for key in keys:
            counts[key] = counts.get(key, 0.0) + 1.0
        return cls.from_counts(counts, popularity=popularity)

    def __len__(self) -> int:
        return len(self.shapes)

    def with_memory(self, memory_mib: Mapping[ShapeKey, float]) -> TargetWorkload:
        """The same shapes, each also needing ``memory_mib[shape]`` MiB free to fit."""
        needed = np.array([memory_mib.get(k, 0.0) for k in self.shapes], dtype=np.float64)
        return TargetWorkload(self.shapes, self.prob, self.cpu, self.milli, self.num, needed)

    @property
    def is_gpu(self) -> np.ndarray:
        return self.num > 0

    def access(self, models: tuple[str, ...]) -> np.ndarray:
        """(K, len(models) + 1) boolean: shape k may use cards of model j; the last column is
        a node without a model, which only unrestricted shapes may try."""
        table = np.zeros((len(self.shapes), len(models) + 1), dtype=bool)
        for k, key in enumerate(self.shapes):
            spec = key.gpu_spec
            table[k, : len(models)] = [not spec or m in spec for m in models]
            table[k, -1] = not spec
        return table


_ROW_WEIGHTS = np.random.default_rng(20230710).integers(1, 1 << 62, size=64, dtype=np.int64) | 1
"""Fixed odd weights folding a row of integers into one key (arithmetic wraps around)."""


def _group_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, inverse) of the distinct rows of ``matrix``, as ``np.unique(axis=0)`` gives
    them up to the order of the groups: ``first`` the first row of each group.

    Grouping one folded key per row is some twenty times cheaper than sorting whole rows;
    rows are then checked against their group's first row, so two different rows that fold
    to the same key (never seen, but possible) only cost the exact grouping.
    """
    if matrix.shape[1] > _ROW_WEIGHTS.size or len(matrix) == 0:
        _, first, inverse = np.unique(matrix, axis=0, return_index=True, return_inverse=True)
        return first, inverse.reshape(-1)
    keys = matrix @ _ROW_WEIGHTS[: matrix.shape[1]]
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not (matrix == matrix[first][inverse]).all():
        _, first, inverse = np.unique(matrix, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    return first, inverse


def _terms(gpu_free: np.ndarray, target: TargetWorkload) -> tuple[np.ndarray, np.ndarray]:
    """Per row and shape: milli on cards too small for the shape, and cards it fits."""
    small_card = gpu_free[:, None, :] < target.milli[None, :, None]
    small = (gpu_free[:, None, :] * small_card).sum(axis=2)
    fits = (~small_card).sum(axis=2)
    return small, fits


def _fragment(
    *,
    small: np.ndarray,
    fits: np.ndarray,
    idle: np.ndarray,
    cpu: np.ndarray,
    mem: np.ndarray,
    access: np.ndarray,
    target: TargetWorkload,
) -> np.ndarray:
    """(R,) expected fragment of R node states; ``access`` is (R, K)."""
    usable = access & target.is_gpu & (fits >= target.num) & (cpu[:, None] >= target.cpu)
    if target.memory is not None:
        usable &= mem[:, None] >= target.memory
    per_shape = np.where(usable, small, idle[:, None])
    # A row-wise sum (not a matrix product, whose BLAS kernels add in an order that depends
    # on the number of rows) gives a node the same figure however many rows are computed.
    return np.asarray((per_shape * target.prob).sum(axis=1), dtype=np.float64)


def fragment_of_nodes(states: NodeStates, target: TargetWorkload) -> np.ndarray:
    """(N,) fragment of every node, computed from scratch."""
    small, fits = _terms(states.gpu_free, target)
    access = target.access(states.models)[:, states.model].T
    return _fragment(small=small, fits=fits, idle=states.gpu_idle, cpu=states.cpu_free,
                     mem=states.mem_free, access=access, target=target)


class TermsMemo:
    """The terms of :func:`_terms` per row of a long-lived table, kept between calls.

    A row's terms depend only on its cards' free milli and the target, so the memo keeps the
    free milli it computed each row from and recomputes only the rows whose cards changed
    (one vector comparison finds them). A caller that scores a few thousand mostly unchanged
    nodes per pod thus pays for the nodes that changed, not for all of them.
    """

    __slots__ = ("_access", "_fits", "_fragment", "_inputs", "_models", "_small", "_state",
                 "target")

    def __init__(self, target: TargetWorkload) -> None:
        self.target = target
        self._inputs = np.zeros((0, 0), dtype=np.int64)
        self._small = np.zeros((0, len(target)), dtype=np.int64)
        self._fits = np.zeros((0, len(target)), dtype=np.int64)
        self._state = np.zeros((0, 0), dtype=np.int64)
        """Per row: free milli per card, free CPU, free memory, model code (fragment inputs)."""
        self._fragment = np.zeros(0, dtype=np.float64)
        self._models: tuple[str, ...] | None = None
        self._access = np.zeros((len(target), 1), dtype=bool)

    def fragments(self, rows: np.ndarray, states: NodeStates
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(small, fits, fragment) of table ``rows``, whose nodes are ``states`` now.

        The fragment also depends on free CPU, memory and the card model, so it is kept
        under all of them; rows whose state changed are recomputed, from their terms."""
        rows = np.asarray(rows, dtype=np.int64)
        small, fits = self.terms(rows, states.gpu_free)
        state = np.concatenate([np.asarray(states.gpu_free, dtype=np.int64),
                                np.stack([states.cpu_free, states.mem_free, states.model],
                                         axis=1).astype(np.int64)], axis=1)
        if states.models != self._models or self._state.shape[1] != state.shape[1]:
            self._models = states.models  # codes index this tuple: another one, all anew
            self._access = self.target.access(states.models)
            self._state = np.zeros((0, state.shape[1]), dtype=np.int64)
            self._fragment = np.zeros(0, dtype=np.float64)
        needed = int(rows.max()) + 1 if rows.size else 0
        if needed > len(self._state):
            # -1 milli free on a card never occurs, so new rows are computed on use.
            grown = np.full((needed, state.shape[1]), -1, dtype=np.int64)
            grown[: len(self._state)] = self._state
            fragment = np.zeros(needed, dtype=np.float64)
            fragment[: len(self._fragment)] = self._fragment
            self._state, self._fragment = grown, fragment
        stale = (self._state[rows] != state).any(axis=1)
        if stale.any():
            dirty = rows[stale]
            self._fragment[dirty] = _fragment(
                small=small[stale], fits=fits[stale], idle=states.gpu_idle[stale],
                cpu=states.cpu_free[stale], mem=states.mem_free[stale],
                access=self._access[:, states.model[stale]].T, target=self.target)
            self._state[dirty] = state[stale]
        return small, fits, self._fragment[rows]

    def terms(self, rows: np.ndarray, gpu_free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(small, fits) of table ``rows`` whose cards have ``gpu_free`` milli free now."""
        rows = np.asarray(rows, dtype=np.int64)
        gpu_free = np.asarray(gpu_free, dtype=np.int64)
        needed = int(rows.max()) + 1 if rows.size else 0
        if self._inputs.shape[1] != gpu_free.shape[1]:
            self._resize(0, gpu_free.shape[1])
        if needed > len(self._inputs):
            self._resize(needed, gpu_free.shape[1])
        stale = (self._inputs[rows] != gpu_free).any(axis=1)
        if stale.any():
            dirty = rows[stale]
            small, fits = _terms(gpu_free[stale], self.target)
            self._small[dirty] = small
            self._fits[dirty] = fits
            self._inputs[dirty] = gpu_free[stale]
        return self._small[rows], self._fits[rows]

    def _resize(self, length: int, width: int) -> None:
        # New rows hold -1 milli free, which no card ever has, so they are computed on use.
        old = min(len(self._inputs), length) if self._inputs.shape[1] == width else 0
        inputs = np.full((length, width), -1, dtype=np.int64)
        small = np.zeros((length, len(self.target)), dtype=np.int64)
        fits = np.zeros((length, len(self.target)), dtype=np.int64)
        if old:
            inputs[:old], small[:old], fits[:old] = (
                self._inputs[:old], self._small[:old], self._fits[:old])
        self._inputs, self._small, self._fits = inputs, small, fits


class FragmentCache:
    """Per-node fragment terms of ``states`` against ``target``, refreshed by node version."""

    __slots__ = ("_access", "_fits", "_fragment", "_small", "_version", "states", "target")

    def __init__(self, states: NodeStates, target: TargetWorkload, *,
                 terms: tuple[np.ndarray, np.ndarray] | None = None,
                 fragment: np.ndarray | None = None) -> None:
        """``terms``: (small, fits) of every node of ``states`` when the caller has them
        (:class:`TermsMemo`), and ``fragment`` with them; computed here otherwise."""
        self.states = states
        self.target = target
        self._access = target.access(states.models)
        n, k = len(states), len(target)
        self._small = np.zeros((n, k), dtype=np.int64)
        self._fits = np.zeros((n, k), dtype=np.int64)
        self._fragment = np.zeros(n, dtype=np.float64)
        self._version = np.full(n, -1, dtype=np.int64)
        if terms is not None:
            self._small[:], self._fits[:] = terms
            if fragment is None:
                fragment = _fragment(
                    small=self._small, fits=self._fits, idle=states.gpu_idle,
                    cpu=states.cpu_free, mem=states.mem_free,
                    access=self._node_access(np.arange(n)), target=target)
            self._fragment[:] = fragment
            self._version[:] = states.version
        self.refresh()

    def refresh(self) -> None:
        """Recompute the rows of nodes that changed since the last call."""
        rows = np.flatnonzero(self.states.version != self._version)
        if rows.size == 0:
            return
        states = self.states
        small, fits = _terms(states.gpu_free[rows], self.target)
        self._small[rows] = small
        self._fits[rows] = fits
        self._fragment[rows] = _fragment(
            small=small, fits=fits, idle=states.gpu_idle[rows], cpu=states.cpu_free[rows],
            mem=states.mem_free[rows], access=self._node_access(rows), target=self.target,
        )
        self._version[rows] = states.version[rows]

    def kinds(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first, inverse) over ``nodes`` grouped by kind: nodes of one kind (card model,
        free CPU, free milli per card in any order, and free memory when the target looks
        at it) share every fragment figure, before and after any placement, so scorers
        compute once per kind (``nodes[first]``) and spread with ``inverse``."""
        states = self.states
        parts = [states.model[nodes, None], states.cpu_free[nodes, None],
                 np.sort(states.gpu_free[nodes], axis=1)]
        if self.target.memory is not None:
            parts.append(states.mem_free[nodes, None])
        return _group_rows(np.concatenate(parts, axis=1).astype(np.int64))

    def _node_access(self, rows: np.ndarray) -> np.ndarray:
        return self._access[:, self.states.model[rows]].T

    @property
    def per_node(self) -> np.ndarray:
        """(N,) fragment of each node (call ``refresh`` first after changes)."""
        return self._fragment

    def total(self) -> float:
        self.refresh()
        return float(self._fragment.sum())

    def after_whole(self, pod: PodShape, nodes: np.ndarray) -> np.ndarray:
        """(C,) fragment of ``nodes`` after placing a CPU-only or whole-card pod there.

        Whole cards come from fully free ones, which are never "too small" for a shape, so
        only the count of fitting cards, the idle milli and the CPU change.
        """
        states = self.states
        cards = pod.num_gpu if pod.gpu_milli >= MILLI else 0
        if pod.num_gpu and not cards:
            raise ValueError("a pod sharing a card goes through after_share")
        return _fragment(
            small=self._small[nodes],
            fits=self._fits[nodes] - cards,
            idle=states.gpu_idle[nodes] - cards * MILLI,
            cpu=states.cpu_free[nodes] - pod.cpu_milli,
            mem=states.mem_free[nodes] - pod.memory_mib,
            access=self._node_access(nodes),
            target=self.target,
        )

    def after_share(self, pod: PodShape, nodes: np.ndarray, free: np.ndarray) -> np.ndarray:
        """(E,) fragment of ``nodes[e]`` after placing a card-sharing pod on a card of that
        node that has ``free[e]`` milli free (at least the pod's ``gpu_milli``)."""
        milli = self.target.milli[None, :]
        before = free[:, None]
        after = before - pod.gpu_milli
        small = (self._small[nodes] - before * (before < milli) + after * (after < milli))
        fits = self._fits[nodes] - (before >= milli) + (after >= milli)
        return _fragment(
            small=small,
            fits=fits,
            idle=self.states.gpu_idle[nodes] - pod.gpu_milli,
            cpu=self.states.cpu_free[nodes] - pod.cpu_milli,
            mem=self.states.mem_free[nodes] - pod.memory_mib,
            access=self._node_access(nodes),
            target=self.target,
        )
