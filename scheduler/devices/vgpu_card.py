"""One vGPU card's usage and the rules that decide whether it takes one more vGPU."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from scheduler.devices.codec import RegisteredCard
from scheduler.devices.mig import Geometry, MigUsage
from scheduler.devices.requests import VGpuContainerRequest, VGpuRequest

__all__ = ["MAX_CORES", "VGpuCard", "present", "refusal"]

MAX_CORES = 100


def present(group: str, memory: int, cores: int) -> bool:
    """Whether a pod's vGPU on a card counts for its PodGroup's spread policy: Volcano's
    ``deviceHasPodFromSameGroup`` ignores a same-group pod that holds 0 MiB and 0 cores."""
    return bool(group) and (memory > 0 or cores > 0)


@dataclass(slots=True)
class VGpuCard:
    info: RegisteredCard
    used_num: int = 0
    used_mem: int = 0
    used_cores: int = 0
    groups: Counter[str] = field(default_factory=Counter)
    exclusive: Counter[int] = field(default_factory=Counter)
    """Exclusivity rule → vGPUs on this card held by pods matching it."""
    templates: tuple[Geometry, ...] = ()
    """The MIG geometries of a card registered in ``mig`` mode (:mod:`.mig`)."""
    mig: MigUsage = field(default_factory=MigUsage)

    def copy(self) -> VGpuCard:
        return VGpuCard(self.info, self.used_num, self.used_mem, self.used_cores,
                        Counter(self.groups), Counter(self.exclusive), self.templates,
                        self.mig.copy())

    @property
    def free_memory(self) -> int:
        return max(self.info.memory - self.used_mem, 0)

    @property
    def open(self) -> bool:
        """Healthy with a free slot and cores left: could take at least some request."""
        return (self.info.healthy and self.used_num < self.info.split
                and self.used_cores < MAX_CORES)


def refusal(card: VGpuCard, need: VGpuContainerRequest, request: VGpuRequest) -> str | None:
    """Why ``card`` cannot take one vGPU of ``need`` (None: it can)."""
    info = card.info
    if not info.healthy:
        return "unhealthy"
    if request.use_uuids and info.uuid not in request.use_uuids:
        return "not in the allowed UUID list"
    if info.uuid in request.nouse_uuids:
        return "in the excluded UUID list"
    card_type = info.type.lower()
    # Volcano's checkGPUtype: an allow list, when given, is the whole rule (the deny list is
    # not consulted then).
    if request.use_types:
        if not any(t in card_type for t in request.use_types):
            return "type not allowed"
    elif any(t in card_type for t in request.nouse_types):
        return "type excluded"
    # HAMi's checkType, per card: the pod's mode annotation must contain the card's mode
    # (the volcano profile compares it once per node, VGpuDevices._plan).
    if request.mode and info.mode not in request.mode:
        return f"mode is not {request.mode}"
    if card.used_num >= info.split:
        return "all share slots used"
    if request.exclusive and any(card.exclusive.get(rule) for rule in request.exclusive):
        # gpuexclusive.go FilterNode/Allocate: such a card is capped at its used count.
        return "held by a pod of the same exclusivity rule"
    if request.spread_group and card.groups.get(request.spread_group):
        return "already used by the same PodGroup"
    if card.free_memory < need.memory_on(info.memory):
        return "insufficient memory"
    if card.used_cores + need.cores > MAX_CORES:
        return "insufficient cores"
    if need.cores == MAX_CORES and card.used_num > 0:
        return "exclusive use impossible on a shared card"
    if card.used_cores >= MAX_CORES and need.cores == 0:
        return "cores fully used"
    return None
