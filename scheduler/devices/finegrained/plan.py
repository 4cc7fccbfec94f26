"""One pod's device choice on one node, across device types (Koordinator's Allocate).

Per device type, candidates are the node's healthy devices of that type that pass the pod's
hint filters (:mod:`.select`); GPUs go through the GPU stages (partition table, topology tree,
default allocator), other types through the default allocator, or all matching devices with
``ApplyForAll``. Types named in a joint annotation are chosen together (:mod:`.joint`). The
result is either the picks per type or the reason nothing fits, worded as Koordinator words it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.devices.finegrained.allocator import Scoring, default_allocate, fits
from scheduler.devices.finegrained.hints import Hint, JointSpec
from scheduler.devices.finegrained.joint import RULES_VIOLATION, joint_allocate
from scheduler.devices.finegrained.ledger import Allocation, Ledger, Pick
from scheduler.devices.finegrained.names import TYPE_GPU
from scheduler.devices.finegrained.request import TypeRequest
from scheduler.devices.finegrained.select import Candidates, candidates_for
from scheduler.devices.finegrained.topology import (
    SCOPE_LEVELS,
    PartitionSpec,
    PartitionTable,
    Scope,
    by_partition,
    by_tree,
)

__all__ = ["ISOLATION_REASON", "SHARE_UNSUPPORTED_REASON", "NodeTopology", "PodDeviceRequest",
           "plan"]

ISOLATION_REASON = "GPUIsolationProviderHAMICore not found on the node"
SHARE_UNSUPPORTED_REASON = ("the node's GPU model does not support sharing "
                            "(deviceshare.FineGrainedShareUnsupportedModels)")


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
    partition_spec: PartitionSpec | None = None
    hints: Mapping[str, Hint] = field(default_factory=dict)
    joint: JointSpec | None = None
    isolation: str = ""
    """The pod's ``koordinator.sh/gpu-isolation-provider`` label: a shared GPU must be on a
    node with the same label."""
    signature: str = ""
    """Everything the device choice reads from the pod (requests and annotations), so pods
    that ask the same share memoised choices; empty: not shared."""

    @property
    def gpu_required_scope(self) -> str:
        hint = self.hints.get(TYPE_GPU)
        return hint.required_scope if hint is not None else ""

    def exclusive_roots_of(self, allocation: Allocation,
                           ledger: Ledger) -> frozenset[tuple[str, str]]:
        """The PCIe roots this pod holds under a ``PCIeLevel`` hint."""
        return frozenset(
            (kind, ledger.devices[(kind, p.minor)].pcie)
            for kind, hint in self.hints.items() if hint.exclusive == "PCIeLevel"
            for p in allocation.get(kind, ()) if (kind, p.minor) in ledger.devices)


def _partitions_bind(topology: NodeTopology, request: PodDeviceRequest) -> bool:
    gpu = request.types.get(TYPE_GPU)
    return gpu is not None and not gpu.shared and topology.partitions is not None and (
        request.partition_spec is not None or topology.honor_partitions)


def allocate_gpus(ledger: Ledger, topology: NodeTopology, request: PodDeviceRequest,
                  gpu: TypeRequest, candidates: Candidates, *, scoring: Scoring
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
                        allowed={d.minor for d in candidates.devices}, required_level=level)
        if picks is None:
            return ("Insufficient Topology Scoped GPU Devices" if level
                    else "Insufficient GPU Devices")
        return picks
    if level:
        return "node(s) missing GPU Device Topology Tree"
    return default_allocate(ledger, gpu, candidates.devices, scoring=scoring) \
        or "Insufficient gpu devices"


def _apply_for_all(ledger: Ledger, request: TypeRequest, candidates: Candidates
                   ) -> tuple[Pick, ...] | None:
    picks: list[Pick] = []
    taken: set[str] = set()
    for device in candidates.devices:
        charge = fits(ledger, device, request.per_device)
        if charge is None:
            return None
        vfs: tuple[tuple[int, str], ...] = ()
        if candidates.vf_picker is not None:
            vf = candidates.vf_picker(device, taken)
            if vf is None:
                return None
            taken.add(vf[1])
            vfs = (vf,)
        picks.append(Pick(device.minor, charge, vfs))
    return tuple(picks) or None


def _one_type(ledger: Ledger, topology: NodeTopology, request: PodDeviceRequest, kind: str,
              candidates: Candidates, scoring: Scoring) -> tuple[Pick, ...] | str:
    type_request = request.types[kind]
    if kind == TYPE_GPU:
        return allocate_gpus(ledger, topology, request, type_request, candidates,
                             scoring=scoring)
    if type_request.apply_for_all:
        picks = _apply_for_all(ledger, type_request, candidates)
    else:
        picks = default_allocate(ledger, type_request, candidates.devices, scoring=scoring,
                                 vf_picker=candidates.vf_picker)
    return picks if picks is not None else f"Insufficient {kind} devices"


def plan(ledger: Ledger, request: PodDeviceRequest, *, scoring: Scoring,
         topology: NodeTopology | None = None) -> Allocation | str:
    """The picks per type, or the reason the node cannot serve the pod."""
    topology = topology or NodeTopology()
    candidates: dict[str, Candidates] = {}
    for kind in request.types:
        candidates[kind] = candidates_for(ledger, kind, request.hints.get(kind))
        if candidates[kind].problem:
            return candidates[kind].problem
    out: Allocation = {}
    joint = request.joint
    gpu_secondary = joint is not None and joint.types[0] != TYPE_GPU and TYPE_GPU in joint.types
    if joint is not None and gpu_secondary:
        # GPUs are never placed around another type (Koordinator's GPU allocator ignores the
        # preferred PCIe roots): they are chosen as usual and only checked against the rule.
        joint = JointSpec(tuple(t for t in joint.types if t != TYPE_GPU), joint.same_pcie)
        if len(joint.types) < 2:
            joint = None
    if joint is not None:
        primary = joint.types[0]
        first = _one_type(ledger, topology, request, primary, candidates[primary], scoring)
        if isinstance(first, str):
            return first
        result = joint_allocate(ledger, joint, request.types, candidates, first_choice=first,
                                tree=topology.tree, required_scope=request.gpu_required_scope,
                                scoring=scoring, search=not _partitions_bind(topology, request))
        if isinstance(result, str):
            return result
        out.update(result)
    for kind in request.types:
        if kind in out:
            continue
        picks = _one_type(ledger, topology, request, kind, candidates[kind], scoring)
        if isinstance(picks, str):
            return picks
        out[kind] = picks
    if gpu_secondary and request.joint is not None and request.joint.same_pcie:
        primary = request.joint.types[0]
        if _roots(ledger, TYPE_GPU, out[TYPE_GPU]) != _roots(ledger, primary, out[primary]):
            return RULES_VIOLATION
    return out


def _roots(ledger: Ledger, kind: str, picks: tuple[Pick, ...]) -> set[str]:
    return {ledger.devices[(kind, p.minor)].pcie for p in picks if (kind, p.minor) in
            ledger.devices}
