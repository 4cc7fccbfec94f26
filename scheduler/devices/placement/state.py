"""Pod shapes and the columnar free-resource state of a set of GPU nodes.

Every placement policy reads the same few numbers per node: free milli-GPU of each card, free
CPU, free memory, the card model, and (for GPU clustering) which kinds of GPU pods the node
already hosts. They live here as numpy columns so a policy scores all candidate nodes of a pod
without a Python loop over nodes. Cards are counted in milli (1000 = one whole card), as in the
trace; a node with fewer cards than the widest node has its extra slots at 0 free, which no GPU
request (always at least 1 milli) can use.

``version`` grows on every change of a node, so caches keyed by node (the fragment cache of
``frag``) refresh exactly the rows that changed. Whoever owns the allocation state (the device
family, a test) mutates it through ``place``/``remove`` or bumps ``version`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "MILLI",
    "SHARE_TAG",
    "NodeStates",
    "PodShape",
    "feasible_mask",
    "fitting_cards",
]

MILLI = 1000
"""Milli of one whole card."""

SHARE_TAG = 0
"""Column of ``NodeStates.tags`` counting pods that share one card; column k counts k-card pods."""


@dataclass(frozen=True, slots=True)
class PodShape:
    """What a policy sees of a pod: its requests and the card models it accepts.

    ``gpu_milli`` is per card (1–1000); a pod asking for more than one card asks for whole
    cards (1000 each). ``gpu_spec`` is the set of accepted models, empty for any.
    """

    cpu_milli: int
    memory_mib: int = 0
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_spec: frozenset[str] = frozenset()

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        """Asks for part of one card (the only requests that can share a card)."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def tag(self) -> int:
        """Column of ``NodeStates.tags`` this pod counts in; -1 for a CPU-only pod."""
        if self.num_gpu == 0:
            return -1
        return SHARE_TAG if self.is_share else self.num_gpu


@dataclass(slots=True)
class NodeStates:
    """Free resources of N nodes as columns; row i is node i."""

    gpu_free: np.ndarray
    """(N, G) int64: free milli per card slot; slots beyond a node's card count stay 0."""
    gpu_count: np.ndarray
    """(N,) int64: cards on the node."""
    cpu_free: np.ndarray
    """(N,) int64: free CPU in milli."""
    mem_free: np.ndarray
    """(N,) int64: free memory in MiB."""
    model: np.ndarray
    """(N,) int64: index into ``models`` of the node's card model (-1 for no model)."""
    models: tuple[str, ...]
    tags: np.ndarray
    """(N, 1 + G) int64: GPU pods on the node by kind (column 0 sharing, column k k-card)."""
    version: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        if self.version.shape != self.cpu_free.shape:
            self.version = np.zeros(self.cpu_free.shape, dtype=np.int64)

    @classmethod
    def build(
        cls,
        *,
        gpu_counts: Sequence[int],
        cpu_milli: Sequence[int],
        memory_mib: Sequence[int],
        models: Sequence[str],
    ) -> NodeStates:
        """Empty nodes from per-node capacity lists (all the same length)."""
        n = len(gpu_counts)
        if not (len(cpu_milli) == len(memory_mib) == len(models) == n):
            raise ValueError("node capacity lists differ in length")
        counts = np.asarray(gpu_counts, dtype=np.int64).reshape(n)
        width = max(int(counts.max(initial=0)), 1)
        gpu_free = np.where(np.arange(width)[None, :] < counts[:, None], MILLI, 0).astype(np.int64)
        names = tuple(sorted({m for m in models if m}))
        index = {name: i for i, name in enumerate(names)}
        return cls(
            gpu_free=gpu_free,
            gpu_count=counts,
            cpu_free=np.asarray(cpu_milli, dtype=np.int64).reshape(n),
            mem_free=np.asarray(memory_mib, dtype=np.int64).reshape(n),
            model=np.array([index.get(m, -1) for m in models], dtype=np.int64).reshape(n),
            models=names,
            tags=np.zeros((n, width + 1), dtype=np.int64),
        )

    def __len__(self) -> int:
        return int(self.cpu_free.shape[0])

    @property
    def gpu_idle(self) -> np.ndarray:
        """(N,) free milli summed over the node's cards."""
        return self.gpu_free.sum(axis=1)

    def model_mask(self, spec: frozenset[str]) -> np.ndarray:
        """Boolean (len(models),): which known models a pod's ``gpu_spec`` accepts."""
        if not spec:
            return np.ones(len(self.models), dtype=bool)
        return np.array([m in spec for m in self.models], dtype=bool)

    def place(self, node: int, pod: PodShape, cards: Sequence[int]) -> None:
        """Take the pod's requests from ``node``, ``gpu_milli`` from each of ``cards``."""
        if len(cards) != pod.num_gpu:
            raise ValueError(f"pod asks for {pod.num_gpu} card(s), {len(cards)} given")
        for card in cards:
            if not 0 <= card < self.gpu_count[node]:
                raise ValueError(f"node {node} has no card {card}")
            if self.gpu_free[node, card] < pod.gpu_milli:
                raise ValueError(f"card {card} of node {node} has too little free")
        if self.cpu_free[node] < pod.cpu_milli or self.mem_free[node] < pod.memory_mib:
            raise ValueError(f"node {node} has too little free cpu or memory")
        self.gpu_free[node, list(cards)] -= pod.gpu_milli
        self.cpu_free[node] -= pod.cpu_milli
        self.mem_free[node] -= pod.memory_mib
        if pod.tag >= 0:
            self.tags[node, pod.tag] += 1
        self.version[node] += 1

    def remove(self, node: int, pod: PodShape, cards: Sequence[int]) -> None:
        """Give back what ``place`` took."""
        self.gpu_free[node, list(cards)] += pod.gpu_milli
        if (self.gpu_free[node] > MILLI).any():
            raise ValueError(f"node {node}: a card would have more than {MILLI} free")
        self.cpu_free[node] += pod.cpu_milli
        self.mem_free[node] += pod.memory_mib
        if pod.tag >= 0:
            self.tags[node, pod.tag] -= 1
        self.version[node] += 1


def fitting_cards(pod: PodShape, free: np.ndarray) -> np.ndarray:
    """(…, G) boolean: cards with at least the pod's per-card request free."""
    return free >= pod.gpu_milli


def feasible_mask(pod: PodShape, states: NodeStates) -> np.ndarray:
    """(N,) boolean: nodes where the pod fits by CPU, memory, card model and cards.

    A sharing pod needs one card with ``gpu_milli`` free; a whole-card pod needs ``num_gpu``
    fully free cards; a CPU-only pod needs no card and no particular model.
    """
    ok = (states.cpu_free >= pod.cpu_milli) & (states.mem_free >= pod.memory_mib)
    if pod.num_gpu == 0:
        return ok
    if not states.models:
        return np.zeros_like(ok)
    allowed = states.model_mask(pod.gpu_spec)
    model_ok = (states.model >= 0) & allowed[np.maximum(states.model, 0)]
    fit = fitting_cards(pod, states.gpu_free).sum(axis=1) >= pod.num_gpu
    return ok & model_ok & fit
