"""Plugins, one per module, in an explicit registry keyed by the conf's plugin names.

The registry names every plugin's module and class up front, and imports a module the first
time its plugin is looked up: a scheduler whose conf lists eight plugins does not pay at start
for the device, topology, capacity and SLA modules it never calls (a fifth of a second of
imports on a small machine). Iterating or testing membership imports nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["PLUGINS", "PluginRegistry"]


class PluginRegistry(Mapping[str, Any]):
    """Conf name → plugin class, each module imported on its first lookup."""

    __slots__ = ("_loaded", "_where")

    def __init__(self, where: Mapping[str, str]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        cls = self._loaded.get(name)
        if cls is None:
            module, _, attribute = self._where[name].partition(":")
            cls = getattr(importlib.import_module(module), attribute)
            if name != cls.NAME:
                raise ImportError(f"{module}.{attribute} is named {cls.NAME!r}, not {name!r}")
            self._loaded[name] = cls
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, name: object) -> bool:
        return name in self._where


PLUGINS = PluginRegistry({
    "priority": "plugins.priority:Priority",
    "gang": "plugins.gang:Gang",
    "conformance": "plugins.conformance:Conformance",
    "drf": "plugins.drf:Drf",
    "proportion": "plugins.proportion:Proportion",
    "overcommit": "plugins.overcommit:Overcommit",
    "predicates": "plugins.predicates:Predicates",
    "nodeorder": "plugins.nodeorder:NodeOrder",
    "binpack": "plugins.binpack:Binpack",
    "deviceshare": "plugins.deviceshare:DeviceShare",
    "capacity": "plugins.capacity:Capacity",
    "sla": "plugins.sla:Sla",
    "network-topology-aware": "plugins.network_topology_aware:NetworkTopologyAware",
})
