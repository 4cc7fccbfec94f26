"""GPU placement by topology: the partition table and the topology tree.

**Partitions** (whole GPUs only). A node's table comes from its Device object's
``scheduling.koordinator.sh/gpu-partitions`` annotation, and is binding when the Device object
is labelled ``node.koordinator.sh/gpu-partition-policy: Honor``. Without a readable annotation
both come from the Node instead, as Koordinator's ``GetDesignatedGPUPartitionIndexer`` reads
them: the built-in NVLink table when the Node's ``node.koordinator.sh/gpu-model`` is
``H100``/``H800``/``H20`` (vendor ``nvidia`` or unset), binding when the Node is labelled
``Honor``. A pod's ``scheduling.koordinator.sh/gpu-partition-spec`` makes the table binding
too; otherwise a failure falls through to the tree. Tiers of ``allocationScore`` are tried
in ascending order (as Koordinator's code does), the first tier with a feasible partition
wins (``Restricted`` stops after the first tier), and among feasible partitions the one
leaving the most larger partitions intact is taken.

**Tree**: Node → NUMA node → PCIe root. The deepest scope that can hold every requested GPU
wins; ties go to the scope whose ancestors are already in use (topology packing), then, for
shared GPUs, to the better device score, then to the lowest NUMA / PCIe id. Whole GPUs take the
lowest free minors of the chosen scope. Two things differ from Koordinator, both strictly
fixing documented holes: a shared request over several cards (``gpu.shared`` > 1) is placed
in one scope too (Koordinator's tree refuses it, #2097), and ``requiredTopologyScope: Device``
means "one card", which a single-GPU request always satisfies and a larger one never does
(Koordinator's tree can never satisfy it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.api.task import TaskInfo
from scheduler.devices.base import DeviceRequestError
from scheduler.devices.finegrained.allocator import Scoring, device_score, fits
from scheduler.devices.finegrained.ledger import Ledger, Pick
from scheduler.devices.finegrained.model import DeviceInfo, NodeDeviceSpec, to_int
from scheduler.devices.finegrained.names import (
    GPU_PARTITIONS,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    LABEL_PARTITION_POLICY,
    PARTITION_SPEC,
    TYPE_GPU,
)
from scheduler.devices.finegrained.request import TypeRequest

__all__ = ["Partition", "PartitionSpec", "PartitionTable", "Scope", "build_tree",
           "by_partition", "by_tree", "node_partitions", "parse_partition_spec",
           "partition_table"]

SCOPE_LEVELS = {"Node": 1, "NUMANode": 2, "PCIe": 3, "Device": 4}
BUILTIN_MODELS = frozenset({"H100", "H800", "H20"})
_BIN_PACK_WEIGHTS = ((8, 10000), (4, 100), (2, 1))


@dataclass(frozen=True, slots=True)
class Scope:
    level: int
    minors: tuple[int, ...]
    children: tuple[Scope, ...] = ()


@dataclass(frozen=True, slots=True)
class Partition:
    minors: frozenset[int]
    ring_bus_bandwidth: int | None = None
    allocation_score: int = 1


PartitionTable = Mapping[int, tuple[tuple[int, tuple[Partition, ...]], ...]]
"""Number of GPUs → tiers ``(allocationScore, partitions)`` in ascending score order."""


def build_tree(gpus: Sequence[DeviceInfo]) -> Scope | None:
    """The Node → NUMA → PCIe tree; None when any GPU lacks topology (as Koordinator)."""
    if not gpus or any(not g.has_topology for g in gpus):
        return None
    numas: dict[int, dict[str, list[int]]] = {}
    for device in gpus:
        numas.setdefault(device.numa, {}).setdefault(device.pcie, []).append(device.minor)
    children = []
    for numa in sorted(numas):
        pcies = numas[numa]
        leaves = tuple(Scope(3, tuple(sorted(pcies[p]))) for p in sorted(pcies))
        children.append(Scope(2, tuple(sorted(m for leaf in leaves for m in leaf.minors)),
                              leaves))
    return Scope(1, tuple(sorted(d.minor for d in gpus)), tuple(children))


def _table_from_entries(entries: Mapping[int, list[Partition]]) -> PartitionTable:
    table: dict[int, tuple[tuple[int, tuple[Partition, ...]], ...]] = {}
    for number, partitions in entries.items():
        tiers: dict[int, list[Partition]] = {}
        for partition in partitions:
            tiers.setdefault(partition.allocation_score, []).append(partition)
        table[number] = tuple((score, tuple(tiers[score])) for score in sorted(tiers))
    return table


def _builtin_table() -> PartitionTable:
    entries = {1: [Partition(frozenset({m})) for m in range(8)],
               2: [Partition(frozenset({m, m + 1})) for m in range(0, 8, 2)],
               4: [Partition(frozenset(range(0, 4))), Partition(frozenset(range(4, 8)))],
               8: [Partition(frozenset(range(8)))]}
    return _table_from_entries(entries)


def node_partitions(spec: NodeDeviceSpec, node_labels: Mapping[str, str],
                    warn: Callable[[str], None]) -> tuple[PartitionTable | None, bool]:
    """``(table, honoured)`` of a node: the Device object's annotation and partition label
    (Koordinator's ``updateNodeDevice``), else the Node's model and partition labels
    (``allocator_gpu.go`` Allocate falling back to ``GetDesignatedGPUPartitionIndexer``)."""
    table = partition_table(spec, warn)
    if table is not None:
        return table, spec.partition_policy == "Honor"
    vendor = node_labels.get(LABEL_GPU_VENDOR, "")
    model = node_labels.get(LABEL_GPU_MODEL, "")
    honor = node_labels.get(LABEL_PARTITION_POLICY, "") == "Honor"
    ignored = [f"{key}={value}" for key, value in sorted(spec.labels.items())
               if key in (LABEL_PARTITION_POLICY, LABEL_GPU_MODEL)
               and node_labels.get(key, "") != value
               and (key != LABEL_GPU_MODEL or value in BUILTIN_MODELS)]
    if ignored:
        warn(f"Device {spec.node}: label(s) {', '.join(ignored)} on the Device object do not "
             f"choose GPU partitions without its {GPU_PARTITIONS} annotation; the Node's "
             f"labels do (as in Koordinator), so label the Node")
    if vendor in ("", "nvidia") and model in BUILTIN_MODELS:
        return _builtin_table(), honor
    return None, honor


def partition_table(spec: NodeDeviceSpec, warn: Callable[[str], None]) -> PartitionTable | None:
    """The table of the Device object's annotation (None without a readable one)."""
    if spec.partitions_text:
        try:
            raw = json.loads(spec.partitions_text)
            entries: dict[int, list[Partition]] = {}
            for number, partitions in raw.items():
                for item in partitions:
                    ring = item.get("ringBusBandwidth")
                    entries.setdefault(int(number), []).append(Partition(
                        frozenset(int(m) for m in item["minors"]),
                        None if ring is None else to_int(ring),
                        int(item.get("allocationScore", 1))))
            return _table_from_entries(entries)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            warn(f"Device {spec.node}: annotation {GPU_PARTITIONS} is unreadable ({exc!r}); "
                 f"the Node's labels choose the partition table instead")
            return None
    return None


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """The pod's ``gpu-partition-spec``: hard partitions, optionally only the first tier."""

    restricted: bool = False
    ring_bus_bandwidth: int | None = None


def parse_partition_spec(task: TaskInfo, text: str) -> PartitionSpec:
    """The pod's ``gpu-partition-spec`` annotation; raises :class:`DeviceRequestError`."""
    where = f"pod {task.key}: annotation {PARTITION_SPEC}"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DeviceRequestError(f"{where} is not JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise DeviceRequestError(f"{where} must be a JSON object")
    policy = raw.get("allocatePolicy") or "BestEffort"
    if policy not in ("BestEffort", "Restricted"):
        raise DeviceRequestError(f"{where}: field allocatePolicy: {policy!r} is not "
                                 f"BestEffort or Restricted")
    ring = raw.get("ringBusBandwidth")
    try:
        bandwidth = None if ring is None else to_int(ring)
    except (ValueError, TypeError):
        raise DeviceRequestError(f"{where}: field ringBusBandwidth: {ring!r} is not a "
                                 f"quantity") from None
    return PartitionSpec(restricted=policy == "Restricted", ring_bus_bandwidth=bandwidth)


def used_minors(ledger: Ledger) -> set[int]:
    return {minor for (kind, minor), used in ledger.used.items() if kind == TYPE_GPU and used}


def by_partition(ledger: Ledger, request: TypeRequest, table: PartitionTable, *,
                 spec: PartitionSpec | None) -> tuple[Pick, ...] | str:
    """Whole GPUs from the partition table, or the reason (Koordinator's wording)."""
    tiers = table.get(request.count)
    if not tiers:
        return "node(s) Unsupported number of GPU requests"
    used = used_minors(ledger)
    healthy = {d.minor for d in ledger.by_type.get(TYPE_GPU, ()) if d.total}
    feasible: list[Partition] = []
    for _, partitions in tiers:
        for partition in partitions:
            if partition.minors & used or not partition.minors <= healthy:
                continue
            wanted = spec.ring_bus_bandwidth if spec is not None else None
            if wanted is not None and (partition.ring_bus_bandwidth is None
                                       or wanted > partition.ring_bus_bandwidth):
                continue
            feasible.append(partition)
        if feasible or (spec is not None and spec.restricted):
            break
    if not feasible:
        return "Insufficient Partitioned GPU Devices"
    chosen = _bin_pack(feasible, table, used, request.count)
    picks = []
    for minor in sorted(chosen.minors):
        charge = fits(ledger, ledger.devices[(TYPE_GPU, minor)], request.per_device)
        if charge is None:
            return "Insufficient Partitioned GPU Devices"
        picks.append(Pick(minor, charge))
    return tuple(picks)


def _bin_pack(feasible: Sequence[Partition], table: PartitionTable, used: set[int],
              count: int) -> Partition:
    best, best_score = feasible[0], -1
    for partition in feasible:
        taken = used | partition.minors
        score = 0
        for number, weight in _BIN_PACK_WEIGHTS:
            tiers = table.get(number)
            if number < count or not tiers:
                continue
            score += sum(weight * p.allocation_score for p in tiers[0][1]
                         if not p.minors & taken)
        if score > best_score:
            best, best_score = partition, score
    return best


@dataclass(frozen=True, slots=True)
class _Result:
    picks: tuple[Pick, ...]
    depth: int
    not_empties: int
    score: int


def _better(result: _Result, best: _Result, *, shared: bool) -> bool:
    """Deeper first, then more used ancestors; for shared GPUs then the better score."""
    if (result.depth, result.not_empties) != (best.depth, best.not_empties):
        return (result.depth, result.not_empties) > (best.depth, best.not_empties)
    return shared and result.score > best.score


def by_tree(ledger: Ledger, request: TypeRequest, tree: Scope, *, scoring: Scoring,
            allowed: Collection[int], required_level: int = 0) -> tuple[Pick, ...] | None:
    """The GPUs of the preferred scope, or None when no scope at or below the required level
    holds them."""
    search = _TreeSearch(ledger=ledger, request=request, scoring=scoring, allowed=allowed,
                         required_level=required_level, used=used_minors(ledger))
    result = search.visit(tree, 0, 0)
    return None if result is None else result.picks


@dataclass(slots=True, kw_only=True)
class _TreeSearch:
    """One :func:`by_tree` search. A class rather than nested functions: a nested function that
    calls itself holds a reference cycle through its own closure, which only a full garbage
    collection frees."""

    ledger: Ledger
    request: TypeRequest
    scoring: Scoring
    allowed: Collection[int]
    required_level: int
    used: set[int]
    fits_by_minor: dict[int, tuple[dict[str, int] | None, int]] = field(default_factory=dict)

    def device_fit(self, minor: int) -> tuple[dict[str, int] | None, int]:
        known = self.fits_by_minor.get(minor)
        if known is None:
            request = self.request
            device = self.ledger.devices.get((TYPE_GPU, minor))
            charge = None
            if device is not None and minor in self.allowed:
                charge = fits(self.ledger, device, request.per_device)
            score = device_score(self.ledger, device, request.per_device, self.scoring) \
                if charge is not None and device is not None and request.shared else 0
            known = self.fits_by_minor[minor] = (charge, score)
        return known

    def visit(self, scope: Scope, depth: int, not_empties: int) -> _Result | None:
        request = self.request
        if len(scope.minors) < request.count:
            return None
        depth += 1
        if self.used.intersection(scope.minors):
            not_empties += 1
        best: _Result | None = None
        for child in scope.children:
            result = self.visit(child, depth, not_empties)
            if result is None:
                continue
            if best is None or _better(result, best, shared=request.shared):
                best = result
        if best is not None:
            return best
        if self.required_level > scope.level:
            return None
        fitting: list[tuple[int, dict[str, int], int]] = []
        for minor in scope.minors:
            charge, score = self.device_fit(minor)
            if charge is not None:
                fitting.append((minor, charge, score))
        if len(fitting) < request.count:
            return None
        if request.shared:
            fitting.sort(key=lambda f: (-f[2], f[0]))
        chosen = fitting[:request.count]
        return _Result(tuple(Pick(minor, charge) for minor, charge, _ in chosen), depth,
                       not_empties, sum(score for _, _, score in chosen))
