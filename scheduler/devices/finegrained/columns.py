"""The family's node-table columns: per-card free capacity, so one vector pass decides.

Each node row carries, for up to ``GPU_SLOTS`` GPUs and ``SLOTS`` RDMA NICs / FPGAs, the
free core, ratio and bytes (and card size) of every GPU, the free share and free VFs of every
NIC/FPGA, plus per-type sums for the node score. For the common requests this is not just a
necessary condition but the exact answer of the device choice (whole GPUs, shared GPUs on one
or several cards, plain or counted RDMA/FPGA, joint allocation without a required scope), so
the per-node exact check — a Python call per candidate node — is skipped for them, and the
node score is computed for all candidates in one pass. Requests the columns cannot decide
(selectors, required scopes, honoured partitions, SamePCIe, nodes with more devices than
slots) still get the exact per-node check.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from scheduler.devices.finegrained.allocator import Scoring
from scheduler.devices.finegrained.joint import RULES_VIOLATION
from scheduler.devices.finegrained.ledger import Ledger
from scheduler.devices.finegrained.names import (
    FPGA,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    HAMI_CORE,
    RDMA,
    TYPE_FPGA,
    TYPE_GPU,
    TYPE_RDMA,
    UNIT_OF,
)
from scheduler.devices.finegrained.plan import (
    ISOLATION_REASON,
    SHARE_UNSUPPORTED_REASON,
    PodDeviceRequest,
)

__all__ = ["COLUMNS", "col", "exact_by_columns", "summary", "used_card_fits", "vector_conditions",
           "vector_score"]

GPU_SLOTS = 8
UNIT_SLOTS = 8
SLOTS = {TYPE_RDMA: UNIT_SLOTS, TYPE_FPGA: 4}
_P = "finegrained."
_GPU_DIMS = ("core", "ratio", "bytes", "size")
_SCORED = (GPU_CORE, GPU_MEMORY_RATIO, GPU_MEMORY, RDMA, FPGA)
_TYPE_OF = {GPU_CORE: TYPE_GPU, GPU_MEMORY_RATIO: TYPE_GPU, GPU_MEMORY: TYPE_GPU,
            RDMA: TYPE_RDMA, FPGA: TYPE_FPGA}

COLUMNS: tuple[str, ...] = (
    _P + "present", _P + "honor", _P + "isolation", _P + "share_blocked", _P + "gpu_idle",
    _P + "overflow",
    _P + "joint_idle_q1", _P + "joint_idle_q100",
    *(f"{_P}gpu{i}.{dim}" for i in range(GPU_SLOTS) for dim in _GPU_DIMS),
    *(f"{_P}{kind}{i}.{dim}" for kind in (TYPE_RDMA, TYPE_FPGA) for i in range(SLOTS[kind])
      for dim in ("free", "vfs")),
    *(f"{_P}total.{name}" for name in _SCORED), *(f"{_P}free.{name}" for name in _SCORED),
    # GPU pods on the node by kind (0: sharing one card, k: k whole cards), which the
    # clustering placement policy reads.
    *(f"{_P}kind{k}" for k in range(GPU_SLOTS + 1)),
)
_INDEX = {name: i for i, name in enumerate(COLUMNS)}


def col(name: str) -> str:
    return _P + name


def isolation_code(value: str) -> float:
    """The node's ``koordinator.sh/gpu-isolation-provider`` label as a column value."""
    return 0.0 if not value else 1.0 if value == HAMI_CORE else 2.0



def gpu_kinds(ledger: Ledger) -> tuple[int, ...]:
    """GPU pods on the node by kind: index 0 counts pods sharing one card, index k pods
    holding k whole cards (the last index also counts more). The card usage alone does not
    tell them apart (two one-card pods use what one two-card pod uses)."""
    counts = [0] * (GPU_SLOTS + 1)
    for allocation in ledger.holders.values():
        picks = allocation.get(TYPE_GPU, ())
        if picks:
            shared = len(picks) == 1 and picks[0].resources.get(GPU_CORE, 100) < 100
            counts[0 if shared else min(len(picks), GPU_SLOTS)] += 1
    return tuple(counts)

def summary(ledger: Ledger | None, honor: bool, isolation: str = "",
            share_blocked: bool = False) -> tuple[float, ...]:
    """This node's row of :data:`COLUMNS`."""
    row = [0.0] * len(COLUMNS)
    row[_INDEX[col("isolation")]] = isolation_code(isolation)
    row[_INDEX[col("share_blocked")]] = float(share_blocked)
    if ledger is None:
        return tuple(row)
    row[_INDEX[col("present")]] = 1.0
    row[_INDEX[col("honor")]] = float(honor)
    totals = dict.fromkeys(_SCORED, 0)
    frees = dict.fromkeys(_SCORED, 0)
    overflow = False
    gpus = [d for d in ledger.by_type.get(TYPE_GPU, ()) if d.total]
    overflow |= len(gpus) > GPU_SLOTS
    idle = 0
    for slot, device in enumerate(gpus):
        free = ledger.free(TYPE_GPU, device.minor)
        idle += ledger.is_untouched(TYPE_GPU, device.minor)
        for name in (GPU_CORE, GPU_MEMORY_RATIO, GPU_MEMORY):
            totals[name] += device.total.get(name, 0)
            frees[name] += free.get(name, 0)
        if slot < GPU_SLOTS:
            base = f"{_P}gpu{slot}."
            row[_INDEX[base + "core"]] = free.get(GPU_CORE, 0)
            row[_INDEX[base + "ratio"]] = free.get(GPU_MEMORY_RATIO, 0)
            row[_INDEX[base + "bytes"]] = free.get(GPU_MEMORY, 0)
            row[_INDEX[base + "size"]] = device.total.get(GPU_MEMORY, 0)
    row[_INDEX[col("gpu_idle")]] = float(idle)
    # Idle GPUs on PCIe roots that also have a NIC with at least 1 / 100 free: the exact
    # answer for a SamePCIe whole-GPU + RDMA request (the joint search finds such a set).
    nic_roots: dict[int, set[str]] = {1: set(), 100: set()}
    rdma_held = ledger.exclusive_roots(TYPE_RDMA)
    for device in ledger.by_type.get(TYPE_RDMA, ()):
        if device.total and device.has_topology and device.pcie not in rdma_held:
            share = ledger.free(TYPE_RDMA, device.minor).get(RDMA, 0)
            for need, roots in nic_roots.items():
                if share >= need:
                    roots.add(device.pcie)
    for need, roots in nic_roots.items():
        row[_INDEX[col(f"joint_idle_q{need}")]] = float(sum(
            1 for d in gpus if d.has_topology and d.pcie in roots
            and ledger.is_untouched(TYPE_GPU, d.minor)))
    for kind in (TYPE_RDMA, TYPE_FPGA):
        name = UNIT_OF[kind]
        held = ledger.exclusive_roots(kind)
        units = [d for d in ledger.by_type.get(kind, ()) if d.total]
        overflow |= len(units) > SLOTS[kind]
        for slot, device in enumerate(units):
            share = ledger.free(kind, device.minor).get(name, 0)
            totals[name] += device.total.get(name, 0)
            frees[name] += share
            if slot < SLOTS[kind] and device.pcie not in held:  # exclusively held: unusable
                used_vfs = ledger.vfs_used.get((kind, device.minor), set())
                row[_INDEX[f"{_P}{kind}{slot}.free"]] = share
                row[_INDEX[f"{_P}{kind}{slot}.vfs"]] = sum(1 for vf in device.vfs
                                                           if vf.bus_id not in used_vfs)
    row[_INDEX[col("overflow")]] = float(overflow)
    for k, count in enumerate(gpu_kinds(ledger)):
        row[_INDEX[col(f"kind{k}")]] = float(count)
    for name in _SCORED:
        row[_INDEX[f"{_P}total.{name}"]] = totals[name]
        row[_INDEX[f"{_P}free.{name}"]] = frees[name]
    return tuple(row)


def _gpu_ok(request: PodDeviceRequest, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    gpu = request.types[TYPE_GPU]
    if not gpu.shared:
        return np.asarray(columns[col("gpu_idle")] >= gpu.count)
    count = np.zeros(len(columns[col("present")]))
    for slot in range(GPU_SLOTS):
        count += _slot_ok(gpu.per_device, columns, slot)
    return np.asarray(count >= gpu.count)


def _slot_ok(per: Mapping[str, int], columns: Mapping[str, np.ndarray], slot: int
             ) -> np.ndarray:
    """Per node: whether GPU ``slot`` has room for ``per`` (one card's share)."""
    base = f"{_P}gpu{slot}."
    ok = columns[base + "size"] > 0
    if GPU_CORE in per:
        ok = ok & (columns[base + "core"] >= per[GPU_CORE])
    if GPU_MEMORY_RATIO in per:
        ok = ok & (columns[base + "ratio"] >= per[GPU_MEMORY_RATIO])
    need = per[GPU_MEMORY] if GPU_MEMORY in per else \
        (per.get(GPU_MEMORY_RATIO, 0) * columns[base + "size"]) // 100
    return np.asarray(ok & (columns[base + "bytes"] >= need))


def used_card_fits(request: PodDeviceRequest, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per node: whether a GPU already in use (some core or memory ratio taken) has room for
    the request's one shared card."""
    per = request.types[TYPE_GPU].per_device
    found = np.zeros(len(columns[col("present")]), dtype=bool)
    for slot in range(GPU_SLOTS):
        base = f"{_P}gpu{slot}."
        used = (columns[base + "core"] < 100) | (columns[base + "ratio"] < 100)
        found |= _slot_ok(per, columns, slot) & used
    return found


def _unit_ok(request: PodDeviceRequest, kind: str, columns: Mapping[str, np.ndarray],
             *, with_vfs: bool) -> np.ndarray:
    unit = request.types[kind]
    per = unit.per_device[UNIT_OF[kind]]
    count = np.zeros(len(columns[col("present")]))
    for slot in range(SLOTS[kind]):
        ok = columns[f"{_P}{kind}{slot}.free"] >= per
        if with_vfs:
            ok = ok & (columns[f"{_P}{kind}{slot}.vfs"] > 0)
        count += ok
    return np.asarray(count >= unit.count)


def vector_conditions(request: PodDeviceRequest, columns: Mapping[str, np.ndarray]
                      ) -> list[tuple[np.ndarray, str]]:
    """``(failed, reason)`` per requested type (nodes without a Device object never fail,
    except on the isolation provider of a shared GPU, which is the Node's label)."""
    present = columns[col("present")] > 0
    out = []
    gpu = request.types.get(TYPE_GPU)
    if gpu is not None and gpu.shared and request.isolation:
        code = columns[col("isolation")]
        wrong = code != 1 if request.isolation == HAMI_CORE else code != 2
        out.append((wrong, ISOLATION_REASON))
    if gpu is not None and gpu.shared:
        out.append((columns[col("share_blocked")] > 0, SHARE_UNSUPPORTED_REASON))
    for kind in request.types:
        unit = request.types[kind]
        if kind == TYPE_GPU:
            ok = _gpu_ok(request, columns)
        elif unit.apply_for_all:
            ok = np.ones(len(present), dtype=bool)
        else:
            ok = _unit_ok(request, kind, columns, with_vfs=False)
            hint = request.hints.get(kind)
            if hint is not None and hint.vf_selector is not None:
                out.append((present & ok & ~_unit_ok(request, kind, columns, with_vfs=True)
                            & ~(columns[col("overflow")] > 0),
                            f"Insufficient {kind} VirtualFunctions"))
        # Nodes with more devices than slots are only pre-filtered loosely here.
        ok = ok | (columns[col("overflow")] > 0)
        out.append((present & ~ok, f"Insufficient {kind} devices"))
    share = _same_pcie_by_columns(request)
    if share and request.joint is not None and request.joint.same_pcie:
        ok = (columns[col(f"joint_idle_q{share}")] >= request.types[TYPE_GPU].count) | (
            columns[col("overflow")] > 0)
        out.append((present & ~ok, RULES_VIOLATION))
    return out


def _same_pcie_by_columns(request: PodDeviceRequest) -> int:
    """The NIC share (1 or 100) whose joint column decides this SamePCIe request, else 0."""
    joint = request.joint
    gpu = request.types.get(TYPE_GPU)
    rdma = request.types.get(TYPE_RDMA)
    if (joint is None or joint.types != (TYPE_GPU, TYPE_RDMA) or gpu is None or gpu.shared
            or rdma is None or rdma.count != 1 or request.hints or set(request.types) !=
            {TYPE_GPU, TYPE_RDMA}):
        return 0
    share = rdma.per_device[RDMA]
    return share if share in (1, 100) else 0


def exact_by_columns(request: PodDeviceRequest, columns: Mapping[str, np.ndarray]) -> bool:
    """True when :func:`vector_conditions` is the exact answer for every node."""
    if request.partition_spec is not None:
        return False
    gpu = request.types.get(TYPE_GPU)
    if gpu is not None and gpu.shared and request.isolation not in ("", HAMI_CORE):
        return False  # other providers are compared by name on each node
    if request.joint and request.joint.same_pcie and (
            not _same_pcie_by_columns(request) or bool((columns[col("honor")] > 0).any())):
        return False
    if bool((columns[col("overflow")] > 0).any()):
        return False
    for kind, unit in request.types.items():
        hint = request.hints.get(kind)
        if kind == TYPE_GPU:
            if hint is not None and (hint.selector is not None or hint.required_scope):
                return False
            if not unit.shared and bool((columns[col("honor")] > 0).any()):
                return False
        elif hint is not None:
            plain_vf = hint.vf_selector is None or hint.vf_selector.is_empty
            if (hint.selector is not None or not plain_vf or unit.apply_for_all
                    or hint.exclusive == "PCIeLevel"):
                return False
    return True


def vector_score(request: PodDeviceRequest, columns: Mapping[str, np.ndarray],
                 rows: np.ndarray, scoring: Scoring) -> np.ndarray:
    """Koordinator's node-level device score (as :func:`.allocator.node_score`) for ``rows``."""
    total_score = np.zeros(len(rows), dtype=np.int64)
    for kind, unit in request.types.items():
        weighted = np.zeros(len(rows), dtype=np.int64)
        weights = np.zeros(len(rows), dtype=np.int64)
        for name, weight in scoring.weights.items():
            if _TYPE_OF.get(name) != kind:
                continue
            total = columns[f"{_P}total.{name}"][rows].astype(np.int64)
            free = columns[f"{_P}free.{name}"][rows].astype(np.int64)
            asked = unit.per_device.get(name, 0) * unit.count
            requested = np.where(total >= free, total - free + asked, 0)
            safe = np.maximum(total, 1)
            if scoring.most_allocated:
                value = np.minimum(requested, total) * 100 // safe
            else:
                value = np.where(requested > total, 0, (total - requested) * 100 // safe)
            has = total > 0
            weighted += np.where(has, value * weight, 0)
            weights += np.where(has, weight, 0)
        total_score += np.where(weights > 0, weighted // np.maximum(weights, 1), 0)
    return total_score.astype(float)
