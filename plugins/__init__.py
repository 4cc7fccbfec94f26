"""Plugins, one per module, in an explicit registry keyed by the conf's plugin names.

The registry names every plugin's module and class up front, and imports a module the first
time its plugin is looked up: a scheduler whose conf lists eight plugins does not pay at start
for the device, topology, capacity and SLA modules it never calls (a fifth of a second of
imports on a small machine). Iterating or testing membership imports nothing.
"""

from __future__ import annotations

from scheduler.framework.lazyregistry import LazyRegistry as PluginRegistry

__all__ = ["PLUGINS", "PluginRegistry"]

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
