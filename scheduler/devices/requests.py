"""Reading device requests from a pod's containers, with reasons users can act on.

The generic resource model ignores per-device quantities (they do not add up per node), so the
families read them here from the raw pod: limits first, as device plugins do, then requests.
A request that no node could ever satisfy as written (a fraction of a card, a negative
number, a percentage above 100) raises :class:`DeviceRequestError` naming pod, container and
resource, so the pod is reported unschedulable instead of being silently misplaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.api.task import TaskInfo
from scheduler.devices.base import DeviceRequestError, task_annotations
from scheduler.devices.names import GPU_MEMORY, GPU_NUMBER, VGpuNames

__all__ = [
    "GpuShareRequest",
    "VGpuContainerRequest",
    "VGpuRequest",
    "gpushare_request",
    "vgpu_request",
]

UNSET_PERCENTAGE = 101


def _containers(pod: Mapping[str, Any], field: str) -> Sequence[Mapping[str, Any]]:
    containers = (pod.get("spec") or {}).get(field) or []
    return [c for c in containers if isinstance(c, Mapping)]


def _quantity(task: TaskInfo, container: Mapping[str, Any], name: str) -> int | None:
    """A whole, non-negative device quantity of one container, or None when absent."""
    resources = container.get("resources") or {}
    raw = None
    for section in ("limits", "requests"):
        values = resources.get(section) if isinstance(resources, Mapping) else None
        if isinstance(values, Mapping) and name in values:
            raw = values[name]
            break
    if raw is None:
        return None
    where = f"pod {task.key} container {container.get('name', '?')!r}: {name}"
    try:
        value = parse_quantity(raw)
    except QuantityError:
        raise DeviceRequestError(f"{where} {raw!r} is not a quantity") from None
    if value < 0:
        raise DeviceRequestError(f"{where} {raw!r} is negative")
    if value != value.to_integral_value():
        raise DeviceRequestError(f"{where} {raw!r} must be a whole number")
    return int(Decimal(value))


# -- GPU share --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GpuShareRequest:
    """Memory on one shared card, or a number of whole cards (never both)."""

    memory: int = 0
    number: int = 0


def gpushare_request(task: TaskInfo, *, sharing: bool, number: bool) -> GpuShareRequest | None:
    """The pod's GPU share request: max(Σ app containers, largest init container)."""
    totals = {GPU_MEMORY: 0, GPU_NUMBER: 0}
    for name in totals:
        app = sum(_quantity(task, c, name) or 0 for c in _containers(task.pod, "containers"))
        init = max((_quantity(task, c, name) or 0
                    for c in _containers(task.pod, "initContainers")), default=0)
        totals[name] = max(app, init)
    memory = totals[GPU_MEMORY] if sharing else 0
    cards = totals[GPU_NUMBER] if number else 0
    if memory and cards:
        raise DeviceRequestError(f"pod {task.key} requests both {GPU_MEMORY} and {GPU_NUMBER}; "
                                 f"a pod shares one card or takes whole cards, not both")
    if not memory and not cards:
        return None
    return GpuShareRequest(memory=memory, number=cards)


# -- vGPU -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class VGpuContainerRequest:
    number: int
    memory: int = 0
    """MiB per vGPU; 0 with ``percentage`` unset means the whole card."""
    percentage: int = UNSET_PERCENTAGE
    cores: int = 0

    def memory_on(self, card_memory: int) -> int:
        if self.memory:
            return self.memory
        percentage = 100 if self.percentage == UNSET_PERCENTAGE else self.percentage
        return card_memory * percentage // 100

    def describe(self) -> str:
        if self.memory:
            memory = f"{self.memory} MiB"
        elif self.percentage != UNSET_PERCENTAGE:
            memory = f"{self.percentage}% memory"
        else:
            memory = "a whole card's memory"
        return f"{self.number} vGPU(s) with {memory} and {self.cores}% cores each"


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (value or "").split(",") if p.strip())


@dataclass(frozen=True, slots=True)
class VGpuRequest:
    """Per app container (None = no vGPU) plus the pod's card selection annotations."""

    containers: tuple[VGpuContainerRequest | None, ...]
    container_names: tuple[str, ...] = ()
    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    mode: str = ""
    spread_group: str = ""
    """The PodGroup whose pods must not share a card (``vgpu-podgroup-policy: spread``)."""
    exclusive: frozenset[int] = frozenset()
    """The ``deviceshare.GPUExclusiveRules`` the pod matches (indices)."""

    @property
    def max_number(self) -> int:
        return max((c.number for c in self.containers if c is not None), default=0)

    @property
    def max_memory(self) -> int:
        """The largest MiB-denominated need of one vGPU (0 when only percentages are asked)."""
        return max((c.memory for c in self.containers if c is not None), default=0)


def _container_vgpu(task: TaskInfo, container: Mapping[str, Any],
                    names: VGpuNames) -> VGpuContainerRequest | None:
    number = _quantity(task, container, names.count)
    memory = _quantity(task, container, names.memory)
    percentage = _quantity(task, container, names.memory_percentage)
    cores = _quantity(task, container, names.cores)
    if number is None and memory is None and percentage is None and cores is None:
        return None
    where = f"pod {task.key} container {container.get('name', '?')!r}"
    if number is None:
        number = 1
    if number == 0:
        if memory or percentage or cores:
            raise DeviceRequestError(f"{where} asks for vGPU memory or cores with "
                                     f"{names.count} 0")
        return None
    if percentage is not None and not 0 < percentage <= 100:
        raise DeviceRequestError(f"{where}: {names.memory_percentage} {percentage} must be "
                                 f"between 1 and 100")
    if cores is not None and cores > 100:
        raise DeviceRequestError(f"{where}: {names.cores} {cores} must be at most 100")
    if memory and percentage is not None:
        # Both given: Volcano's vgpu fit sizes the card share by the percentage, HAMi's Fit
        # by the MiB; each profile follows its own scheduler.
        if names.profile == "volcano":
            memory = None
        else:
            percentage = None
    return VGpuContainerRequest(
        number=number, memory=memory or 0,
        percentage=UNSET_PERCENTAGE if percentage is None else percentage, cores=cores or 0)


def vgpu_request(task: TaskInfo, names: VGpuNames) -> VGpuRequest | None:
    specs = _containers(task.pod, "containers")
    containers = tuple(_container_vgpu(task, c, names) for c in specs)
    if all(c is None for c in containers):
        return None
    annotations = task_annotations(task)
    spread = annotations.get(names.group_policy, "").strip().lower() == "spread"
    return VGpuRequest(
        containers=containers,
        container_names=tuple(str(c.get("name", i)) for i, c in enumerate(specs)),
        use_types=tuple(t.lower() for t in _split(annotations.get(names.use_type))),
        nouse_types=tuple(t.lower() for t in _split(annotations.get(names.nouse_type))),
        use_uuids=_split(annotations.get(names.use_uuid)),
        nouse_uuids=_split(annotations.get(names.nouse_uuid)),
        mode=annotations.get(names.mode, "").strip(),
        spread_group=str(task.job) if spread and task.job else "",
    )
