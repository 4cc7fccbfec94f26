"""A registry of classes named up front and imported on first lookup.

The plugin and action registries name every module and class explicitly, as the conventions
ask, but import a module only the first time its entry is looked up: a scheduler whose conf
lists eight plugins and three actions does not pay at start for the modules it never calls.
Iterating or testing membership imports nothing, so a conf naming an unknown entry is refused
without importing any of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["LazyRegistry", "load"]


def load(where: str) -> Any:
    """The attribute ``where`` names as ``"module:Attribute"``, its module imported now."""
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(module), attribute)


class LazyRegistry(Mapping[str, Any]):
    """Conf name → class (``"module:Class"``), each module imported on its first lookup; the
    class's ``NAME`` must be the entry's name."""

    __slots__ = ("_loaded", "_where")

    def __init__(self, where: Mapping[str, str]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        cls = self._loaded.get(name)
        if cls is None:
            where = self._where[name]
            cls = load(where)
            if name != cls.NAME:
                raise ImportError(
                    f"{where.replace(':', '.')} is named {cls.NAME!r}, not {name!r}")
            self._loaded[name] = cls
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, name: object) -> bool:
        return name in self._where
