"""Plugins, one per module, in an explicit registry keyed by the conf's plugin names."""

from __future__ import annotations

from typing import Any

from plugins.binpack import Binpack
from plugins.capacity import Capacity
from plugins.conformance import Conformance
from plugins.deviceshare import DeviceShare
from plugins.drf import Drf
from plugins.gang import Gang
from plugins.network_topology_aware import NetworkTopologyAware
from plugins.nodeorder import NodeOrder
from plugins.overcommit import Overcommit
from plugins.predicates import Predicates
from plugins.priority import Priority
from plugins.proportion import Proportion
from plugins.sla import Sla

__all__ = ["PLUGINS"]

PLUGINS: dict[str, Any] = {
    cls.NAME: cls
    for cls in (Priority, Gang, Conformance, Drf, Proportion, Overcommit, Predicates, NodeOrder,
                Binpack, DeviceShare, Capacity, Sla, NetworkTopologyAware)
}
