"""One pod's device choice on one node, across device types (Koordinator's Allocate).

Per device type, candidates are the node's healthy devices of that type that pass the pod's
hint filters; GPUs go through the GPU stages (partition table, topology tree, default
allocator), other types through the default allocator. The result is either the picks per
type or the reason nothing fits, worded as Koordinator words it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.api.devices.finegrained.allocator import Scoring, default_allocate
from scheduler.api.devices.finegrained.ledger import Allocation, Ledger, Pick
from scheduler.api.devices.finegrained.model import DeviceInfo
from scheduler.api.devices.finegrained.names import TYPE_GPU
from scheduler.api.devices.finegrained.request import TypeRequest
from scheduler.api.devices.finegrained.topology import (
    SCOPE_LEVELS,
    PartitionSpec,
    PartitionTable,
    Scope,
    by_partition,
    by_tree,
)

__all__ = ["NodeTopology", "PodDeviceRequest", "plan"]


@dataclass(frozen=True, slots=True)
class NodeTopology:
    """What the node's Device object says about GPU placement (shared by ledger copies)."""

    tree: Scope | None = None
    partitions: PartitionTable | None = None
    honor_partitions: bool = False


@dataclass(frozen=True, slots=True)
class PodDeviceRequest:
    """A pod's validated fine-grained request: per type, in allocation order."""

    types: Mapping[str, TypeRequest]
    describe: str = ""
    partition_spec: PartitionSpec | None = None
    gpu_required_scope: str = ""
    extras: Mapping[str, object] = field(default_factory=dict)


def candidates(ledger: Ledger, kind: str) -> list[DeviceInfo]:
    return [d for d in ledger.by_type.get(kind, ()) if d.total]


def allocate_gpus(ledger: Ledger, topology: NodeTopology, request: PodDeviceRequest,
                  gpu: TypeRequest, devices: list[DeviceInfo], *, scoring: Scoring
                  ) -> tuple[Pick, ...] | str:
    """Partition table → topology tree → default allocator (Koordinator's GPU order)."""
    if not gpu.shared:
        honor = request.partition_spec is not None or topology.honor_partitions
        if topology.partitions is None:
            if honor:
                return "node(s) missing GPU Partition Table"
        else:
            by_table = by_partition(ledger, gpu, topology.partitions,
                                    spec=request.partition_spec)
            if not isinstance(by_table, str) or honor:
                return by_table
    required = request.gpu_required_scope
    level = SCOPE_LEVELS.get(required, 0)
    if required == "Device":
        if gpu.count > 1:
            return (f"Insufficient Topology Scoped GPU Devices: requiredTopologyScope Device "
                    f"holds one GPU, {gpu.count} requested")
        level = 0
    if topology.tree is not None:
        picks = by_tree(ledger, gpu, topology.tree, scoring=scoring,
                        allowed={d.minor for d in devices}, required_level=level)
        if picks is None:
            return ("Insufficient Topology Scoped GPU Devices" if level
                    else "Insufficient GPU Devices")
        return picks
    if level:
        return "node(s) missing GPU Device Topology Tree"
    return default_allocate(ledger, gpu, devices, scoring=scoring) or "Insufficient gpu devices"


def plan(ledger: Ledger, request: PodDeviceRequest, *, scoring: Scoring,
         topology: NodeTopology | None = None) -> Allocation | str:
    """The picks per type, or the reason the node cannot serve the pod."""
    topology = topology or NodeTopology()
    out: Allocation = {}
    for kind, type_request in request.types.items():
        devices = candidates(ledger, kind)
        if kind == TYPE_GPU:
            picks: tuple[Pick, ...] | str | None = allocate_gpus(
                ledger, topology, request, type_request, devices, scoring=scoring)
        else:
            picks = default_allocate(ledger, type_request, devices, scoring=scoring)
        if picks is None:
            return f"Insufficient {kind} devices"
        if isinstance(picks, str):
            return picks
        out[kind] = picks
    return out
