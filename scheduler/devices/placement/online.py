"""Our policy's target workload: the pod shapes seen so far, with older arrivals fading.

FGD as published measures fragment against the shapes of the whole trace, which a running
scheduler does not know in advance. ``OnlineTargetWorkload`` learns it from the pods that
arrive: every arrival adds weight 1 to its shape and every earlier weight decays so that it
halves after ``half_life`` arrivals (no decay when ``half_life`` is None). The kept shapes are
chosen like FGD's (most weight first, until ``popularity`` percent is covered).

With ``memory_aware`` a shape also needs the median memory of its pods free to fit, so cards
on a node whose memory is nearly gone count as fragment (the paper's measure ignores memory,
though the placement checks it).

``FgdOnlinePolicy`` ("fgd-online") is FGD's scoring and card choice against that estimate. It
rebuilds its fragment cache when the estimate has had enough new arrivals: after 1, 2, 4, …
pods while it is young, then every ``refresh`` pods, so early pods are not scored against an
empty workload and later ones do not pay for a rebuild each.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.devices.placement.fgd import fgd_cards, fgd_scores
from scheduler.devices.placement.frag import (
    DEFAULT_POPULARITY,
    FragmentCache,
    ShapeKey,
    TargetWorkload,
    shape_key,
)
from scheduler.devices.placement.state import NodeStates, PodShape

__all__ = ["FgdOnlinePolicy", "OnlineTargetWorkload"]

_RESCALE_AT = 1e150


class OnlineTargetWorkload:
    """Decayed counts of the pod shapes that arrived."""

    __slots__ = ("_growth", "_increment", "_memory", "_weights", "half_life", "popularity",
                 "seen")

    def __init__(
        self, *, half_life: float | None = None, popularity: float = DEFAULT_POPULARITY
    ) -> None:
        if half_life is not None and not half_life > 0:
            raise ValueError(f"half_life must be positive, got {half_life}")
        if not 0 < popularity <= 100:
            raise ValueError(f"popularity must be in (0, 100], got {popularity}")
        self.half_life = half_life
        self.popularity = popularity
        self.seen = 0
        # Instead of shrinking every old weight on each arrival, new arrivals weigh more.
        self._growth = 1.0 if half_life is None else math.pow(2.0, 1.0 / half_life)
        self._increment = 1.0
        self._weights: dict[ShapeKey, float] = {}
        self._memory: dict[ShapeKey, dict[int, float]] = {}

    def observe(self, pod: PodShape, spec_text: str | None = None) -> None:
        key = shape_key(pod, spec_text)
        self._weights[key] = self._weights.get(key, 0.0) + self._increment
        by_memory = self._memory.setdefault(key, {})
        by_memory[pod.memory_mib] = by_memory.get(pod.memory_mib, 0.0) + self._increment
        self.seen += 1
        self._increment *= self._growth
        if self._increment > _RESCALE_AT:
            scale = 1.0 / self._increment
            self._weights = {k: w * scale for k, w in self._weights.items()}
            self._memory = {k: {m: w * scale for m, w in v.items()}
                            for k, v in self._memory.items()}
            self._increment = 1.0

    def weights(self) -> dict[ShapeKey, float]:
        """Each seen shape's share of the decayed weight (summing to 1)."""
        total = sum(self._weights.values())
        return {k: w / total for k, w in self._weights.items()} if total else {}

    def memory_needs(self) -> dict[ShapeKey, float]:
        """Per shape, the weighted median memory (MiB) of the pods of that shape."""
        needs: dict[ShapeKey, float] = {}
        for key, by_memory in self._memory.items():
            half = sum(by_memory.values()) / 2.0
            running = 0.0
            for memory, weight in sorted(by_memory.items()):
                running += weight
                if running >= half:
                    needs[key] = float(memory)
                    break
        return needs

    def target(self, *, memory_aware: bool = False) -> TargetWorkload:
        """The kept shapes; with ``memory_aware`` each also needs its median memory free."""
        if not self._weights:
            raise ValueError("no pod has arrived yet")
        target = TargetWorkload.from_counts(self.weights(), popularity=self.popularity)
        return target.with_memory(self.memory_needs()) if memory_aware else target


class FgdOnlinePolicy:
    """FGD scoring against the target workload learned from arrivals."""

    name = "fgd-online"

    def __init__(
        self,
        states: NodeStates,
        *,
        half_life: float | None = None,
        refresh: int = 200,
        popularity: float = DEFAULT_POPULARITY,
        memory_aware: bool = False,
    ) -> None:
        if refresh < 1:
            raise ValueError(f"refresh must be at least 1, got {refresh}")
        self.states = states
        self.refresh = refresh
        self.memory_aware = memory_aware
        self.estimate = OnlineTargetWorkload(half_life=half_life, popularity=popularity)
        self.cache: FragmentCache | None = None
        self._built_at = 0

    def observe(self, pod: PodShape) -> None:
        self.estimate.observe(pod)
        seen = self.estimate.seen
        due = seen >= 2 * self._built_at if self._built_at < self.refresh else (
            seen - self._built_at >= self.refresh)
        if self.cache is None or due:
            target = self.estimate.target(memory_aware=self.memory_aware)
            self.cache = FragmentCache(self.states, target)
            self._built_at = seen

    def _ready(self, pod: PodShape) -> FragmentCache:
        if self.cache is None:
            self.observe(pod)
        assert self.cache is not None
        return self.cache

    def score(self, pod: PodShape, candidates: np.ndarray) -> np.ndarray:
        return fgd_scores(self._ready(pod), pod, candidates)

    def choose_cards(self, pod: PodShape, node: int) -> tuple[int, ...]:
        return fgd_cards(self._ready(pod), pod, node)
