"""Pod annotations that steer the device choice: allocate hints and joint allocation.

``scheduling.koordinator.sh/device-allocate-hint`` maps a device type to a hint: ``selector``
(device labels), ``vfSelector`` (its presence makes a virtual function mandatory),
``allocateStrategy`` (``ApplyForAll``: every matching device; ``RequestsAsCount``: the quantity
is a device count), ``exclusivePolicy`` (``DeviceLevel``: whole devices with
``RequestsAsCount``; ``PCIeLevel``: only PCIe roots where every device of the type is free) and,
for GPUs, ``requiredTopologyScope``. ``scheduling.koordinator.sh/device-joint-allocate`` names
the device types chosen together and optionally ``requiredScope: SamePCIe``. A malformed
annotation makes the pod unschedulable-and-unresolvable with the key and field named.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.task import TaskInfo
from scheduler.devices.base import DeviceRequestError
from scheduler.devices.finegrained.names import ALLOCATE_HINT, JOINT_ALLOCATE, TYPES

__all__ = ["Hint", "JointSpec", "LabelSelector", "parse_hints", "parse_joint"]

STRATEGIES = ("ApplyForAll", "RequestsAsCount")
EXCLUSIVE = ("DeviceLevel", "PCIeLevel")
SCOPES = ("Device", "PCIe", "NUMANode", "Node")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes LabelSelector (matchLabels and matchExpressions)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()

    @property
    def is_empty(self) -> bool:
        """``{}``: matches everything."""
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        for key, operator, values in self.expressions:
            present = key in labels
            if operator == "In" and not (present and labels[key] in values):
                return False
            if operator == "NotIn" and present and labels[key] in values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True


def _selector(raw: Any, where: str) -> LabelSelector:
    if not isinstance(raw, Mapping):
        raise DeviceRequestError(f"{where} must be a label selector object")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise DeviceRequestError(f"{where}.matchLabels must be a map")
    expressions = []
    for i, item in enumerate(raw.get("matchExpressions") or []):
        operator = item.get("operator") if isinstance(item, Mapping) else None
        if operator not in _OPERATORS or not isinstance(item.get("key"), str):
            raise DeviceRequestError(f"{where}.matchExpressions[{i}]: needs a key and an "
                                     f"operator among {', '.join(_OPERATORS)}")
        expressions.append((item["key"], operator,
                            frozenset(str(v) for v in item.get("values") or [])))
    return LabelSelector(tuple(sorted((str(k), str(v)) for k, v in labels.items())),
                         tuple(expressions))


@dataclass(frozen=True, slots=True)
class Hint:
    selector: LabelSelector | None = None
    vf_selector: LabelSelector | None = None
    """Not None (even empty) makes a VF mandatory for every device of the type."""
    strategy: str = ""
    exclusive: str = ""
    required_scope: str = ""


def _choice(raw: Mapping[str, Any], key: str, allowed: tuple[str, ...], where: str) -> str:
    value = raw.get(key) or ""
    if value and value not in allowed:
        raise DeviceRequestError(f"{where}: field {key}: {value!r} is not one of "
                                 f"{', '.join(allowed)}")
    return str(value)


def _load(task: TaskInfo, key: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DeviceRequestError(f"pod {task.key}: annotation {key} is not JSON: {exc}") \
            from None


def parse_hints(task: TaskInfo, text: str) -> dict[str, Hint]:
    raw = _load(task, ALLOCATE_HINT, text)
    if not isinstance(raw, Mapping):
        raise DeviceRequestError(f"pod {task.key}: annotation {ALLOCATE_HINT} must map a "
                                 f"device type to a hint")
    out: dict[str, Hint] = {}
    for kind, hint in raw.items():
        where = f"pod {task.key}: annotation {ALLOCATE_HINT} [{kind}]"
        if kind not in TYPES:
            raise DeviceRequestError(f"{where}: unknown device type (gpu, rdma or fpga)")
        if not isinstance(hint, Mapping):
            raise DeviceRequestError(f"{where} must be an object")
        out[kind] = Hint(
            selector=_selector(hint["selector"], f"{where}.selector")
            if hint.get("selector") is not None else None,
            vf_selector=_selector(hint["vfSelector"], f"{where}.vfSelector")
            if hint.get("vfSelector") is not None else None,
            strategy=_choice(hint, "allocateStrategy", STRATEGIES, where),
            exclusive=_choice(hint, "exclusivePolicy", EXCLUSIVE, where),
            required_scope=_choice(hint, "requiredTopologyScope", SCOPES, where))
    return out


@dataclass(frozen=True, slots=True)
class JointSpec:
    types: tuple[str, ...]
    """Primary first."""
    same_pcie: bool = False


def parse_joint(task: TaskInfo, text: str) -> JointSpec:
    raw = _load(task, JOINT_ALLOCATE, text)
    where = f"pod {task.key}: annotation {JOINT_ALLOCATE}"
    if not isinstance(raw, Mapping):
        raise DeviceRequestError(f"{where} must be an object")
    types = raw.get("deviceTypes") or []
    if not isinstance(types, list) or any(t not in TYPES for t in types):
        raise DeviceRequestError(f"{where}: field deviceTypes: must list gpu, rdma or fpga")
    scope = raw.get("requiredScope") or ""
    if scope not in ("", "SamePCIe"):
        raise DeviceRequestError(f"{where}: field requiredScope: {scope!r} is not SamePCIe")
    return JointSpec(tuple(dict.fromkeys(types)), same_pcie=scope == "SamePCIe")
