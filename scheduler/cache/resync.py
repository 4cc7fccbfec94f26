"""Rate-limited resync of pods whose bind failed.

After a refused bind the pod's task is taken out of the cache and comes back only when its
resync is due: the pod is read again from the cluster (so a pod deleted or bound meanwhile is not
retried blindly) and rebuilt as a fresh task. The delay doubles with every failure of the same
pod, from 5 ms to 1000 s like Volcano's error-task queue, so a bind that keeps failing (a webhook
refusing it, a node gone) is retried less and less often instead of every cycle. A successful
bind forgets the pod's history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ResyncQueue"]


@dataclass(slots=True)
class _Entry:
    failures: int
    due: float


class ResyncQueue:
    """Pod keys waiting for a resync, each with its own exponential backoff."""

    def __init__(self, *, clock: Callable[[], float], initial: float = 0.005,
                 maximum: float = 1000.0) -> None:
        self.clock = clock
        self.initial = initial
        self.maximum = maximum
        self._entries: dict[str, _Entry] = {}
        self._failures: dict[str, int] = {}

    def add(self, key: str) -> float:
        """Schedule a resync of ``key`` after one more failure; returns the delay."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = min(self.maximum, self.initial * 2 ** min(failures - 1, 40))
        self._entries[key] = _Entry(failures, self.clock() + delay)
        return delay

    def waiting(self, key: str) -> bool:
        """True while ``key`` is held back for a resync."""
        return key in self._entries

    def due(self) -> list[str]:
        """Remove and return the keys whose resync time has come."""
        now = self.clock()
        ready = [key for key, entry in self._entries.items() if entry.due <= now]
        for key in ready:
            del self._entries[key]
        return ready

    def forget(self, key: str) -> None:
        """The pod was bound or is gone: drop its backoff history."""
        self._entries.pop(key, None)
        self._failures.pop(key, None)

    def failures(self, key: str) -> int:
        return self._failures.get(key, 0)

    def __len__(self) -> int:
        return len(self._entries)
