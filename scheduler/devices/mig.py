"""MIG instances of the vGPU family, from Volcano's device ConfigMap.

Volcano's ``deviceshare`` reads the ConfigMap ``volcano-vgpu-device-config`` in
``kube-system`` (``deviceshare.KnownGeometriesCMName`` / ``KnownGeometriesCMNamespace``), key
``device-config.yaml``. Its ``nvidia.knownMigGeometries`` lists, per GPU model, the allowed
*geometries*: named groups of MIG instance templates (``{name, memory, count}``). A card
registered in ``mig`` mode whose type contains one of the models gets those geometries; a node
whose last registered card is such a card shares its cards by MIG instance instead of
HAMi-core (``decodeNodeDevices``).

On a MIG node a vGPU request is met by one free instance of a card: while the card holds no
instance, the geometries are tried in order and within one the smallest template with
enough memory wins; once an instance is in use the card is fixed to that geometry, and only
templates it already uses offer more instances (``findMatch`` / ``pickFromGroup``). The
instance's device id is ``<card UUID>[<group>-<position>]``, the position counting the
instances of the group's earlier templates first. ``nvidia.gpuMemoryFactor`` above 1
multiplies the request before it is compared with the templates, and divides the instance's
memory before it is charged to the card (``mig.go`` ``MIGFactory``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = [
    "DEFAULT_CONFIG_MAP",
    "Geometry",
    "MigTemplate",
    "MigUsage",
    "VGpuSettings",
    "add_used",
    "card_uuid",
    "decode_mig_id",
    "encode_mig_id",
    "find_match",
    "parse_device_config",
    "sub_used",
]

DEFAULT_CONFIG_MAP = ("kube-system", "volcano-vgpu-device-config")
CONFIG_KEY = "device-config.yaml"


@dataclass(frozen=True, slots=True)
class MigTemplate:
    name: str
    memory: int
    count: int


@dataclass(frozen=True, slots=True)
class Geometry:
    group: str
    instances: tuple[MigTemplate, ...] = ()


@dataclass(frozen=True, slots=True)
class KnownGeometries:
    models: tuple[str, ...]
    geometries: tuple[Geometry, ...]


@dataclass(frozen=True, slots=True)
class VGpuSettings:
    """What the vGPU family takes from the device ConfigMap."""

    known: tuple[KnownGeometries, ...] = ()
    memory_factor: int = 1
    source: str = ""
    """``namespace/name`` of the ConfigMap read, empty for the built-in defaults."""

    def geometries_for(self, card_type: str) -> tuple[Geometry, ...] | None:
        """The geometries of the first entry naming a model ``card_type`` contains
        (``extractGeometryFromType``); None when no entry does."""
        for entry in self.known:
            if any(model in card_type for model in entry.models):
                return entry.geometries
        return None


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where} must be a whole number >= 0, got {value!r}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list, got {value!r}")
    return value


def _map(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a map, got {value!r}")
    return value


def parse_device_config(text: str, *, source: str = "") -> VGpuSettings:
    """``device-config.yaml``'s vGPU part; raises ValueError naming the field."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{CONFIG_KEY} is not YAML: {exc}") from None
    nvidia = _map(_map(raw, CONFIG_KEY).get("nvidia"), "nvidia")
    known: list[KnownGeometries] = []
    for i, entry in enumerate(_list(nvidia.get("knownMigGeometries"),
                                    "nvidia.knownMigGeometries")):
        where = f"nvidia.knownMigGeometries[{i}]"
        entry = _map(entry, where)
        models = tuple(str(m) for m in _list(entry.get("models"), f"{where}.models"))
        geometries = []
        for j, group in enumerate(_list(entry.get("allowedGeometries"),
                                        f"{where}.allowedGeometries")):
            gwhere = f"{where}.allowedGeometries[{j}]"
            group = _map(group, gwhere)
            instances = tuple(
                MigTemplate(name=str(_map(t, f"{gwhere}.geometries[{k}]").get("name", "")),
                            memory=_int(t.get("memory", 0), f"{gwhere}.geometries[{k}].memory"),
                            count=_int(t.get("count", 0), f"{gwhere}.geometries[{k}].count"))
                for k, t in enumerate(_list(group.get("geometries"), f"{gwhere}.geometries")))
            geometries.append(Geometry(group=str(group.get("group", "")), instances=instances))
        known.append(KnownGeometries(models=models, geometries=tuple(geometries)))
    factor = _int(nvidia.get("gpuMemoryFactor", 0) or 0, "nvidia.gpuMemoryFactor")
    return VGpuSettings(known=tuple(known), memory_factor=max(factor, 1), source=source)


# -- instances --------------------------------------------------------------------------------
@dataclass(slots=True)
class MigUsage:
    """Which instances of a card are in use (``MigInUse``): the geometry index (-1: none yet)
    and, per template name, the used instance indices in ascending order."""

    index: int = -1
    used: dict[str, list[int]] = field(default_factory=dict)

    def copy(self) -> MigUsage:
        return MigUsage(self.index, {name: list(ix) for name, ix in self.used.items()})


def card_uuid(device_id: str) -> str:
    """The card UUID of a device id (a MIG instance id without its ``[group-position]``)."""
    return device_id.split("[", 1)[0]


def encode_mig_id(uuid: str, group: str, position: int) -> str:
    return f"{uuid}[{group}-{position}]"


def decode_mig_id(device_id: str) -> tuple[str, int] | None:
    """``(group, position)`` of ``UUID[group-position]``; None when it is not one
    (``decodeMIGID``: the part in brackets must split on ``-`` into exactly two)."""
    start, end = device_id.find("["), device_id.find("]")
    if start < 0 or end < 0 or start > end:
        return None
    parts = device_id[start + 1:end].split("-")
    if len(parts) != 2:
        return None
    try:
        return parts[0], int(parts[1])
    except ValueError:
        return None


def _position(group: Geometry, count: int, used: Sequence[int], index: int) -> int:
    """``getPosition``: the instances of earlier templates, plus the first free index."""
    position = sum(t.count for t in group.instances[:index])
    for i in range(count):
        if i not in used:
            return position + i
    return position


def pick_from_group(group: Geometry, usage: Mapping[str, Sequence[int]] | None,
                    request: int) -> tuple[int, int] | None:
    """``(position, instance memory)`` of the smallest fitting template (``pickFromGroup``):
    on a card without instances any template; otherwise only templates already in use."""
    ordered = sorted(enumerate(group.instances), key=lambda item: item[1].memory)
    for index, template in ordered:
        if not usage and template.memory >= request:
            return _position(group, template.count, [], index), template.memory
        for name, used in (usage or {}).items():
            if name == template.name and template.count - len(used) > 0 \
                    and template.memory >= request:
                return _position(group, template.count, used, index), template.memory
    return None


def find_match(uuid: str, request: int, usage: MigUsage,
               geometries: Sequence[Geometry]) -> tuple[str, int] | None:
    """``(instance device id, instance memory)`` for ``request`` MiB (``findMatch``)."""
    if usage.index >= 0:
        if usage.index >= len(geometries):
            return None
        group = geometries[usage.index]
        picked = pick_from_group(group, usage.used, request)
        return None if picked is None else (encode_mig_id(uuid, group.group, picked[0]),
                                            picked[1])
    for group in geometries:
        picked = pick_from_group(group, None, request)
        if picked is not None:
            return encode_mig_id(uuid, group.group, picked[0]), picked[1]
    return None


def _locate(group: Geometry, position: int) -> tuple[int, int] | None:
    """``findPosition``: (template index, index within it) of a position."""
    total = 0
    for i, template in enumerate(group.instances):
        if position < total + template.count:
            return i, position - total
        total += template.count
    return None


def add_used(usage: MigUsage, geometries: Sequence[Geometry], group_name: str,
             position: int) -> int:
    """Mark an instance used (``addMigUsed``); returns its memory, 0 when the group or the
    position is not in the geometries."""
    for index, group in enumerate(geometries):
        if group.group != group_name:
            continue
        located = _locate(group, position)
        if located is None:
            return 0
        usage.index = index
        template = group.instances[located[0]]
        used = usage.used.setdefault(template.name, [])
        if located[1] not in used:
            used.append(located[1])
            used.sort()
        return template.memory
    return 0


def sub_used(usage: MigUsage, geometries: Sequence[Geometry], group_name: str,
             position: int) -> int:
    """Free an instance (``subMigUsed``); returns its memory, 0 when it was not in use."""
    for index, group in enumerate(geometries):
        if group.group != group_name:
            continue
        usage.index = index
        located = _locate(group, position)
        if located is None:
            return 0
        template = group.instances[located[0]]
        used = usage.used.get(template.name)
        if used is None:
            return 0
        if located[1] in used:
            used.remove(located[1])
        if not used:
            del usage.used[template.name]
        return template.memory
    return 0
