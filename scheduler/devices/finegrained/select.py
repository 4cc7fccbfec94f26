"""Which devices a pod may get: hint filters, PCIe exclusivity, and virtual functions.

Candidates of a type are its healthy devices whose labels match the hint's ``selector``. A
``PCIeLevel`` hint keeps only PCIe roots where every device of the type is untouched (devices
without topology never qualify). Exclusivity is symmetric here: a root held under
``PCIeLevel`` also refuses later pods of that type that did not ask for exclusivity
(Koordinator checks it only when the exclusive pod itself is placed). With a ``vfSelector``
each chosen device must also give one free virtual function from a matching VF group, the
lowest bus id first.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.devices.finegrained.allocator import VfPicker
from scheduler.devices.finegrained.hints import Hint
from scheduler.devices.finegrained.ledger import Ledger
from scheduler.devices.finegrained.model import DeviceInfo

__all__ = ["Candidates", "candidates_for"]


@dataclass(frozen=True, slots=True)
class Candidates:
    devices: list[DeviceInfo]
    vf_picker: VfPicker | None = None
    problem: str = ""
    """Non-empty when the hint can never be met on this node (e.g. no VFs at all)."""


def _vf_picker(ledger: Ledger, kind: str, hint: Hint) -> VfPicker:
    selector = hint.vf_selector
    assert selector is not None

    def pick(device: DeviceInfo, taken: set[str]) -> tuple[int, str] | None:
        used = ledger.vfs_used.get((kind, device.minor), set())
        free = [vf for vf in device.vfs if vf.bus_id not in used and vf.bus_id not in taken
                and selector.matches(dict(vf.labels))]
        if not free:
            return None
        best = min(free, key=lambda vf: vf.bus_id)
        return best.minor, best.bus_id

    return pick


def candidates_for(ledger: Ledger, kind: str, hint: Hint | None) -> Candidates:
    devices = [d for d in ledger.by_type.get(kind, ()) if d.total]
    if hint is not None and hint.selector is not None:
        selector = hint.selector
        devices = [d for d in devices if selector.matches(d.labels)]
    held = ledger.exclusive_roots(kind)
    if held:
        devices = [d for d in devices if d.pcie not in held]
    if hint is not None and hint.exclusive == "PCIeLevel":
        busy = {d.pcie for d in ledger.by_type.get(kind, ())
                if not ledger.is_untouched(kind, d.minor)}
        devices = [d for d in devices if d.has_topology and d.pcie not in busy]
    picker = None
    if hint is not None and hint.vf_selector is not None:
        if not any(d.vfs for d in ledger.by_type.get(kind, ())):
            return Candidates([], problem=f"Insufficient {kind} VirtualFunctions")
        picker = _vf_picker(ledger, kind, hint)
    return Candidates(devices, picker)
