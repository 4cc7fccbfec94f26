"""Choosing devices of one type on one node: fit, fill, score and Koordinator's default order.

A device fits a per-instance request when every requested dimension is free on it. GPU memory
is always checked in bytes: a ratio request is turned into this card's bytes before the check,
so tenants asking in bytes and tenants asking in ratio can never together book more memory
than the card has (Koordinator compares only the dimensions a pod names, which lets mixed
tenants overbook by up to 1% each). What is charged is the request filled per chosen card:
ratio ↔ bytes, both recorded.

The default allocator (Koordinator's ``defaultAllocator``) orders candidates by device score
(descending), then minor, and takes devices until the maximum count; fewer than the desired
count fails. Secondary joint types have their own order (:mod:`.joint`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.devices.finegrained.ledger import Ledger, Pick
from scheduler.devices.finegrained.model import DeviceInfo
from scheduler.devices.finegrained.names import (
    FPGA,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    RDMA,
    TYPE_GPU,
)
from scheduler.devices.finegrained.request import TypeRequest

__all__ = ["DEFAULT_WEIGHTS", "Scoring", "default_allocate", "fill", "fits", "node_score"]

DEFAULT_WEIGHTS: Mapping[str, int] = {GPU_MEMORY_RATIO: 1, GPU_MEMORY: 1, RDMA: 1, FPGA: 1}
"""Koordinator's default scored resources (``gpu-core`` is not scored unless configured)."""


@dataclass(frozen=True, slots=True)
class Scoring:
    """``ScoringStrategy``: LeastAllocated spreads, MostAllocated packs."""

    most_allocated: bool = False
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))

    def score(self, totals: Mapping[str, int], frees: Mapping[str, int],
              request: Mapping[str, int]) -> int:
        """Weighted average over the scored resources the device(s) have (0..100)."""
        weighted = weight_sum = 0
        for name, weight in self.weights.items():
            total = totals.get(name, 0)
            if total <= 0:
                continue
            free = frees.get(name, 0)
            requested = (total - free) + request.get(name, 0) if total >= free else 0
            if self.most_allocated:
                value = min(requested, total) * 100 // total
            else:
                value = 0 if requested > total else (total - requested) * 100 // total
            weighted += value * weight
            weight_sum += weight
        return weighted // weight_sum if weight_sum else 0


def fill(device: DeviceInfo, per: Mapping[str, int]) -> dict[str, int]:
    """The request as charged on ``device``: GPU ratio ↔ bytes completed for this card."""
    if device.type != TYPE_GPU:
        return dict(per)
    out = dict(per)
    total_bytes = device.total.get(GPU_MEMORY, 0)
    if GPU_MEMORY_RATIO in per and GPU_MEMORY not in per:
        out[GPU_MEMORY] = per[GPU_MEMORY_RATIO] * total_bytes // 100
    elif GPU_MEMORY in per and GPU_MEMORY_RATIO not in per and total_bytes:
        out[GPU_MEMORY_RATIO] = per[GPU_MEMORY] * 100 // total_bytes
    return out


def fits(ledger: Ledger, device: DeviceInfo, per: Mapping[str, int]) -> dict[str, int] | None:
    """The filled charge when ``per`` fits on ``device``, else None."""
    if not device.total:
        return None
    charge = fill(device, per)
    free = ledger.free(device.type, device.minor)
    for name, value in per.items():
        if value > free.get(name, 0):
            return None
    if device.type == TYPE_GPU and charge.get(GPU_MEMORY, 0) > free.get(GPU_MEMORY, 0):
        return None  # always in bytes: mixed ratio/byte tenants cannot overbook
    return charge


def device_score(ledger: Ledger, device: DeviceInfo, per: Mapping[str, int],
                 scoring: Scoring) -> int:
    return scoring.score(device.total, ledger.free(device.type, device.minor), per)


VfPicker = Callable[[DeviceInfo, set[str]], tuple[int, str] | None]
"""Given a PF and the VF bus ids already taken in this allocation, a free VF or None."""


def default_allocate(ledger: Ledger, request: TypeRequest, candidates: Sequence[DeviceInfo], *,
                     scoring: Scoring, vf_picker: VfPicker | None = None
                     ) -> tuple[Pick, ...] | None:
    """Koordinator's default allocator over ``candidates`` (already filtered)."""
    per = request.per_device
    scored = sorted(candidates, key=lambda d: (-device_score(ledger, d, per, scoring), d.minor))
    limit = max(request.max_count, request.count)
    picks: list[Pick] = []
    taken_vfs: set[str] = set()
    for device in scored:
        charge = fits(ledger, device, per)
        if charge is None:
            continue
        vfs: tuple[tuple[int, str], ...] = ()
        if vf_picker is not None:
            vf = vf_picker(device, taken_vfs)
            if vf is None:
                continue
            taken_vfs.add(vf[1])
            vfs = (vf,)
        picks.append(Pick(device.minor, charge, vfs))
        if len(picks) >= limit:
            break
    return tuple(picks) if len(picks) >= request.count else None


def node_score(ledger: Ledger, requests: Mapping[str, TypeRequest], scoring: Scoring) -> int:
    """Σ over requested types of the score of the type's devices summed (Koordinator's
    node-level scorer); the caller normalises across nodes."""
    total_score = 0
    for kind, request in requests.items():
        totals: dict[str, int] = {}
        frees: dict[str, int] = {}
        for device in ledger.by_type.get(kind, ()):
            free = ledger.free(kind, device.minor)
            for name, value in device.total.items():
                totals[name] = totals.get(name, 0) + value
                frees[name] = frees.get(name, 0) + free.get(name, 0)
        asked = {name: value * request.count for name, value in request.per_device.items()}
        total_score += scoring.score(totals, frees, asked)
    return total_score
