"""One pod's device choice on one node, across device types (Koordinator's Allocate).

Per device type, candidates are the node's devices of that type that pass the pod's hint
filters; GPUs go through the GPU stages (partition table, topology tree, default allocator),
other types through the default allocator. A pod that asks for several types with a joint
annotation has them chosen together (:mod:`.joint`). The result is either the picks per type
or the reason nothing fits, worded as Koordinator words it where it has a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.api.devices.finegrained.allocator import Scoring, default_allocate
from scheduler.api.devices.finegrained.ledger import Allocation, Ledger
from scheduler.api.devices.finegrained.model import DeviceInfo
from scheduler.api.devices.finegrained.request import TypeRequest

__all__ = ["PodDeviceRequest", "plan"]


@dataclass(frozen=True, slots=True)
class PodDeviceRequest:
    """A pod's validated fine-grained request: per type, in allocation order."""

    types: Mapping[str, TypeRequest]
    describe: str = ""
    extras: Mapping[str, object] = field(default_factory=dict)


def candidates(ledger: Ledger, kind: str) -> list[DeviceInfo]:
    return [d for d in ledger.by_type.get(kind, ()) if d.total]


def plan(ledger: Ledger, request: PodDeviceRequest, *, scoring: Scoring) -> Allocation | str:
    """The picks per type, or the reason the node cannot serve the pod."""
    out: Allocation = {}
    for kind, type_request in request.types.items():
        picks = default_allocate(ledger, type_request, candidates(ledger, kind),
                                 scoring=scoring)
        if picks is None:
            return f"Insufficient {kind} devices"
        out[kind] = picks
    return out
