"""Encoders and decoders for the device annotations exchanged with node-side plugins.

Every annotation is untrusted text written by another program (or a person). The strict
decoders raise :class:`CodecError` with a message naming the offending entry; callers decide
whether that makes a node deviceless or a pod's binding failed. What a *bound* pod holds is
read by the tolerant readers (:func:`read_pod_devices`, :func:`read_index_list`), which keep
every entry that parses and say why each other one was left out, as Volcano's
``decodeContainerDevices`` skips only the bad entry: one broken entry must not free the cards
the others hold. Encoders produce exactly the byte layout the Volcano / HAMi device plugins
parse.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CodecError",
    "ContainerDevice",
    "HeldDevices",
    "ReadIndices",
    "RegisteredCard",
    "decode_index_list",
    "decode_pod_devices",
    "duplicate_uuids",
    "encode_pod_devices",
    "parse_register",
    "read_index_list",
    "read_pod_devices",
]

NVIDIA = "NVIDIA"
MODES = ("hami-core", "mig", "mps")


class CodecError(ValueError):
    """An annotation value that does not follow its format."""


@dataclass(frozen=True, slots=True)
class RegisteredCard:
    """One physical GPU as its node's device plugin registered it."""

    uuid: str
    index: int
    split: int
    """How many vGPUs may share the card."""
    memory: int
    """MiB."""
    type: str
    healthy: bool = True
    mode: str = "hami-core"
    cores: int = 100


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    """One vGPU handed to one container: card UUID, vendor type, MiB and % of SMs."""

    uuid: str
    type: str
    memory: int
    cores: int

    def encode(self) -> str:
        return f"{self.uuid},{self.type},{self.memory},{self.cores}:"


# -- integers -------------------------------------------------------------------------------
def _int(text: object, what: str, *, minimum: int = 0) -> int:
    if isinstance(text, bool):
        raise CodecError(f"{what} must be an integer, got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise CodecError(f"{what} must be an integer, got {text!r}") from None
    if value < minimum:
        raise CodecError(f"{what} must be at least {minimum}, got {value}")
    return value


# The spellings Go's strconv.ParseBool accepts (the device plugins write "true"/"false"), plus
# the words a person is likely to type.
_TRUE = frozenset({"1", "t", "true", "healthy"})
_FALSE = frozenset({"0", "f", "false", "unhealthy"})


def _health(text: object, what: str) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise CodecError(f"{what} must be true or false, got {text!r}")


def decode_index_list(text: str) -> list[int]:
    """``"0"`` or ``"0,2,3"`` (GPU share's ``volcano.sh/gpu-index``) as card indices."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise CodecError(f"card index list {text!r} is empty or has an empty item")
    return [_int(p, f"card index {p!r}") for p in parts]


@dataclass(frozen=True, slots=True)
class ReadIndices:
    """A card index list read item by item: the indices that parse, and the items left out."""

    indices: tuple[int, ...]
    skipped: tuple[str, ...]
    """One message per item left out, naming it."""


def read_index_list(text: str) -> ReadIndices:
    """:func:`decode_index_list` that keeps every readable index (Volcano's ``GetGPUIndex``
    drops the whole list for one bad item, which frees the cards the good items name)."""
    indices: list[int] = []
    skipped: list[str] = []
    parts = text.split(",")
    for position, part in enumerate(parts):
        item = part.strip()
        if not item:
            if text.strip():
                skipped.append(f"item {position} is empty")
            continue
        try:
            indices.append(_int(item, f"item {position}"))
        except CodecError as exc:
            skipped.append(str(exc))
    if not indices and not skipped:
        skipped.append("no card index")
    return ReadIndices(tuple(indices), tuple(skipped))


# -- node registration ---------------------------------------------------------------------
def parse_register(text: str, *, json_format: bool = False,
                   legacy_fields: bool = False) -> list[RegisteredCard]:
    """Decode a node's vGPU register annotation.

    Volcano: entries ``UUID,splitCount,memoryMiB,type,health,mode`` separated by ``:`` (the
    entry's position is the card index). As Volcano's ``decodeNodeDevices``, a value without
    ``:`` registers nothing, pieces without ``,`` are skipped, an entry of fewer than six
    fields makes the whole value unreadable (fields past the sixth are ignored);
    ``legacy_fields`` also takes the five fields older device plugins wrote (mode then
    ``hami-core``). HAMi (``json_format``): a JSON array of ``{id, index, count, devmem,
    devcore, type, health, mode}``, or HAMi's legacy
    ``uuid,count,devmem,devcore,type,numa,health[,index,mode]`` entries separated by ``:``.
    """
    stripped = text.strip()
    if json_format and stripped.startswith("["):
        return _parse_hami_json(stripped)
    if json_format:
        cards = [_parse_hami_entry(entry.strip(), i)
                 for i, entry in enumerate(stripped.split(":")) if entry.strip()]
    else:
        if stripped and ":" not in stripped:
            raise CodecError("no ':' after the device entry (each entry ends with ':')")
        minimum = 5 if legacy_fields else 6
        # The index is the entry's position in the ``:``-split text, as the plugins count.
        cards = [_parse_volcano_entry(entry.strip(), i, minimum=minimum)
                 for i, entry in enumerate(stripped.split(":")) if "," in entry]
    if not cards:
        raise CodecError("no device entries")
    return cards


def duplicate_uuids(cards: Sequence[RegisteredCard]) -> list[str]:
    """UUIDs registered more than once, in order of their second appearance."""
    seen: set[str] = set()
    duplicates: list[str] = []
    for card in cards:
        if card.uuid in seen and card.uuid not in duplicates:
            duplicates.append(card.uuid)
        seen.add(card.uuid)
    return duplicates


def _parse_volcano_entry(entry: str, index: int, *, minimum: int) -> RegisteredCard:
    fields = entry.split(",")
    if len(fields) < minimum:
        legacy = ("" if minimum == 5 else
                  "; deviceshare.VGPURegisterLegacyFields takes the five fields of older plugins")
        raise CodecError(f"device entry {index} {entry!r} has {len(fields)} comma-separated "
                         f"fields, needs {minimum} (UUID,splitCount,memoryMiB,type,health,mode)"
                         f"{legacy}")
    uuid = fields[0].strip()
    if not uuid:
        raise CodecError(f"device entry {index} has an empty UUID")
    mode = fields[5].strip() if len(fields) > 5 and fields[5].strip() else "hami-core"
    return RegisteredCard(
        uuid=uuid, index=index,
        split=_int(fields[1], f"device {uuid} split count", minimum=1),
        memory=_int(fields[2], f"device {uuid} memory"),
        type=fields[3].strip(),
        healthy=_health(fields[4], f"device {uuid} health"),
        mode=mode,
    )


def _parse_hami_entry(entry: str, index: int) -> RegisteredCard:
    fields = entry.split(",")
    if len(fields) < 7:
        raise CodecError(f"device entry {index} {entry!r} needs at least 7 comma-separated "
                         f"fields (uuid,count,devmem,devcore,type,numa,health)")
    uuid = fields[0].strip()
    if not uuid:
        raise CodecError(f"device entry {index} has an empty UUID")
    position = _int(fields[7], f"device {uuid} index") if len(fields) > 7 and fields[7] else index
    mode = fields[8].strip() if len(fields) > 8 and fields[8].strip() else "hami-core"
    return RegisteredCard(
        uuid=uuid, index=position,
        split=_int(fields[1], f"device {uuid} count", minimum=1),
        memory=_int(fields[2], f"device {uuid} devmem"),
        cores=_int(fields[3], f"device {uuid} devcore"),
        type=fields[4].strip(),
        healthy=_health(fields[6], f"device {uuid} health"),
        mode=mode,
    )


def _parse_hami_json(text: str) -> list[RegisteredCard]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CodecError(f"not valid JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(raw, list) or not raw:
        raise CodecError("expected a non-empty JSON array of devices")
    cards = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise CodecError(f"device {i} is not a JSON object")
        cards.append(_hami_card(item, i))
    return cards


def _hami_card(item: dict[str, Any], position: int) -> RegisteredCard:
    """One ``DeviceInfo`` of HAMi's JSON (``UnMarshalNodeDevices``)."""
    uuid = str(item.get("id") or "").strip()
    if not uuid:
        raise CodecError(f"device {position} has no id")
    return RegisteredCard(
        uuid=uuid,
        # HAMi marshals with omitempty: a missing index is card 0 wherever it stands (the
        # plugin lists cards in map order), not the entry's position
        index=_int(item.get("index", 0), f"device {uuid} index"),
        split=_int(item.get("count", 0), f"device {uuid} count", minimum=1),
        memory=_int(item.get("devmem", 0), f"device {uuid} devmem"),
        cores=_int(item.get("devcore", 100) or 100, f"device {uuid} devcore"),
        type=str(item.get("type") or ""),
        healthy=_health(item.get("health", False), f"device {uuid} health"),
        mode=str(item.get("mode") or "hami-core"),
    )


# -- per-pod device lists ------------------------------------------------------------------
def encode_pod_devices(containers: Sequence[Sequence[ContainerDevice]], *,
                       terminated: bool = False) -> str:
    """Containers joined by ``;`` (Volcano) or each ended by ``;`` (HAMi, ``terminated``)."""
    parts = ["".join(device.encode() for device in container) for container in containers]
    return "".join(p + ";" for p in parts) if terminated else ";".join(parts)


def _segments(text: str, terminated: bool) -> list[str]:
    segments = text.split(";")
    if terminated and len(segments) > 1 and segments[-1] == "":
        segments.pop()
    return segments


def decode_pod_devices(text: str, *, terminated: bool = False) -> list[list[ContainerDevice]]:
    """The inverse of :func:`encode_pod_devices`; empty containers stay as empty lists."""
    containers: list[list[ContainerDevice]] = []
    for c, segment in enumerate(_segments(text, terminated)):
        devices = []
        for entry in segment.split(":"):
            if not entry.strip():
                continue
            fields = entry.split(",")
            if len(fields) != 4 or not fields[0].strip():
                raise CodecError(f"container {c} device {entry!r} must be "
                                 f"UUID,Type,usedMemMiB,usedCores")
            uuid = fields[0].strip()
            devices.append(ContainerDevice(
                uuid=uuid, type=fields[1].strip(),
                memory=_int(fields[2], f"memory of device {uuid}"),
                cores=_int(fields[3], f"cores of device {uuid}")))
        containers.append(devices)
    return containers


@dataclass(frozen=True, slots=True)
class HeldDevices:
    """A pod's device list read entry by entry (:func:`read_pod_devices`)."""

    containers: tuple[tuple[ContainerDevice, ...], ...]
    skipped: tuple[str, ...]
    """One message per entry left out, naming its container and its text."""

    @property
    def devices(self) -> tuple[ContainerDevice, ...]:
        return tuple(device for container in self.containers for device in container)


def _held_entry(entry: str, container: int) -> ContainerDevice:
    fields = entry.split(",")
    if len(fields) < 4 or not fields[0].strip():
        raise CodecError(f"container {container} entry {entry!r} is not "
                         f"UUID,Type,usedMemMiB,usedCores")
    uuid = fields[0].strip()
    where = f"container {container} entry {entry!r}"
    return ContainerDevice(uuid=uuid, type=fields[1].strip(),
                           memory=_int(fields[2], f"{where}: memory"),
                           cores=_int(fields[3], f"{where}: cores"))


def read_pod_devices(text: str, *, terminated: bool = False) -> HeldDevices:
    """What a bound pod's device annotation records, every readable entry of it.

    Volcano's ``decodeContainerDevices`` skips an entry with fewer than four fields or a memory
    or cores value that is not an unsigned integer, and keeps the others (fields past the
    fourth are ignored, as there); here every skipped entry is also reported. Containers keep
    their positions.
    """
    containers: list[tuple[ContainerDevice, ...]] = []
    skipped: list[str] = []
    for c, segment in enumerate(_segments(text, terminated)):
        devices = []
        for entry in segment.split(":"):
            if not entry.strip():
                continue
            try:
                devices.append(_held_entry(entry, c))
            except CodecError as exc:
                skipped.append(str(exc))
        containers.append(tuple(devices))
    return HeldDevices(tuple(containers), tuple(skipped))
