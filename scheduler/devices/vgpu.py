"""vGPU, HAMi-compatible: cards shared by slot count, memory (MiB) and cores (% of SMs).

Cards come from the node's register annotation (Volcano colon format, or HAMi's JSON in the
``hami`` profile); a malformed annotation makes the node deviceless with a warning naming it,
duplicate UUIDs keep their first entry. Each container's request is fitted card by card in the
policy's order, exactly as Volcano walks them (binpack: most used memory first; spread: fewest
sharers first; ties and the unset policy by card index, the unset policy from the highest
index down), charging every accepted card before the next container looks, so one pod never
over-commits a card. The same fitting runs in the filter and at allocation, so what was
filtered is what is written. The node score is Volcano's too: binpack adds each chosen card's
fullness after the charge; spread only counts cards nobody used before the charge, which a
charged card never is, so spread and the unset policy score 0 and nodes are ranked by the
other scorers.

What bound pods hold is read from their device lists entry by entry (:func:`.usage.vgpu_record`):
a bad entry is reported and left out, the others stay charged. Bound pods are charged as they
are even when together they exceed a card (memory, cores or share count); the node then gets
one warning naming the card and the pods, and the card takes no new pod.

A MIG node (:mod:`.mig`) hands out MIG instances instead of HAMi-core shares; exclusivity
rules (:mod:`.exclusive`) keep pods of one rule off each other's cards on HAMi-core nodes.
The family object that builds these ledgers is :mod:`.vgpu_family`; one card's state and
refusal rules are :mod:`.vgpu_card`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from scheduler.api.status import Status
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskID
from scheduler.devices.base import DeviceError, DeviceFit, DeviceWarning, Reporter, task_annotations
from scheduler.devices.codec import NVIDIA, ContainerDevice, encode_pod_devices
from scheduler.devices.exclusive import ExclusiveRules, matching_rules, task_labels
from scheduler.devices.mig import (
    add_used,
    card_uuid,
    decode_mig_id,
    find_match,
    sub_used,
)
from scheduler.devices.names import VGpuNames
from scheduler.devices.requests import VGpuContainerRequest, VGpuRequest
from scheduler.devices.usage import VGpuRecord, vgpu_record
from scheduler.devices.vgpu_card import MAX_CORES, VGpuCard, present, refusal

__all__ = ["REASON_PREFIX", "VGpuCard", "VGpuDevices"]

NAME = "hamivgpu"
REASON_PREFIX = "hami-vgpuDeviceSharing error"
COL_USABLE = "vgpu.usable_cards"
COL_FREE = "vgpu.max_free_memory"
COL_CARDS = "vgpu.registered_cards"
INVALID_ANNOTATION = "InvalidDeviceAnnotation"
MIG = "mig"
HAMI_CORE = "hami-core"
OVERBOOKED = "DeviceOverbooked"


@dataclass(slots=True)
class _Plan:
    containers: list[list[ContainerDevice]]
    score: float


@dataclass(slots=True)
class VGpuDevices:
    """One node's vGPU ledger (``NodeInfo.others["hamivgpu"]``)."""

    node_name: str
    cards: list[VGpuCard]
    names: VGpuNames
    policy: str = ""
    reporter: Reporter | None = None
    charges: dict[TaskID, tuple[tuple[str, int, int, str], ...]] = field(default_factory=dict)
    pods: dict[TaskID, str] = field(default_factory=dict)
    """The namespace/name of each pod charged here (named when a card is overbooked)."""
    rules: ExclusiveRules = ()
    """``deviceshare.GPUExclusiveRules``; they act only when :attr:`exclusive_mode`."""
    exclusive_mode: bool = True
    """Whether the node's cards run in HAMi-core mode, the only mode the rules act in."""
    matched: dict[TaskID, frozenset[int]] = field(default_factory=dict)
    """The exclusivity rules each pod charged here matches (only pods matching some)."""
    mig_mode: bool = False
    """The node shares its cards by MIG instance (its last card is a ``mig`` card whose type
    the device ConfigMap's geometries name), else by HAMi-core."""
    memory_factor: int = 1
    """``gpuMemoryFactor`` of the device ConfigMap (MIG only)."""
    requested: dict[TaskID, int] = field(default_factory=dict)
    """On a MIG node, the MiB each pod's device list records (its charges hold the
    instances' MiB): Volcano's ``AddQueueResource`` counts these."""

    def _card(self, uuid: str) -> VGpuCard | None:
        uuid = card_uuid(uuid)
        return next((card for card in self.cards if card.info.uuid == uuid), None)

    # -- accounting ---------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        if task.uid in self.charges:
            return
        record = vgpu_record(task_annotations(task), self.names)
        if record is None:
            return
        self._report_record(task, record)
        charges = []
        for device in record.held.devices:
            if self._card(device.uuid) is None:
                self._warn(task, f"pod {task.key} on node {self.node_name} holds vGPU card "
                                 f"{device.uuid}, which the node no longer registers; that "
                                 f"usage is ignored", reason="GPUIndexOutOfRange")
                continue
            charges.append((device.uuid, device.memory, device.cores, str(task.job)))
        before = {card_uuid(uuid): self._excess(card)
                  for uuid in dict.fromkeys(c[0] for c in charges)
                  if (card := self._card(uuid)) is not None}
        self._charge(task, tuple(charges))
        for uuid, excess in before.items():
            if not excess:
                self._report_overbooked(uuid)

    def _report_record(self, task: TaskInfo, record: VGpuRecord) -> None:
        """Warn about every part of the pod's vGPU annotations that is not counted."""
        where = f"pod {task.key} on node {self.node_name}"
        for key, why in record.unreadable:
            then = (f"its {record.key} is counted instead" if record.key
                    else "its vGPU usage is not counted")
            self._warn(task, f"{where}: annotation {key} has no readable entry "
                             f"({'; '.join(why)}); {then}", reason=INVALID_ANNOTATION)
        if record.held.skipped:
            self._warn(task, f"{where}: annotation {record.key}: "
                             f"{'; '.join(record.held.skipped)}; that entry is not counted, the "
                             f"others are", reason=INVALID_ANNOTATION)

    def _excess(self, card: VGpuCard) -> list[str]:
        """What the pods on ``card`` hold beyond it (bound pods may come in that way)."""
        info = card.info
        out = []
        if card.used_mem > info.memory:
            out.append(f"memory {card.used_mem}/{info.memory} MiB")
        if card.used_cores > MAX_CORES:
            out.append(f"cores {card.used_cores}/{MAX_CORES}%")
        if card.used_num > info.split:
            out.append(f"shares {card.used_num}/{info.split}")
        return out

    def _report_overbooked(self, uuid: str) -> None:
        card = self._card(uuid)
        excess = self._excess(card) if card is not None else []
        if not excess or self.reporter is None:
            return
        pods = sorted(self.pods[uid] for uid, charges in self.charges.items()
                      if uid in self.pods and any(card_uuid(c[0]) == uuid for c in charges))
        self.reporter.warn(DeviceWarning(
            kind="Node", name=self.node_name, reason=OVERBOOKED,
            message=f"node {self.node_name}: vGPU card {uuid} is overbooked by the pods bound "
                    f"to it ({', '.join(excess)}; pods {', '.join(pods)}); every pod keeps its "
                    f"usage, so the card takes no new pod until enough of them end"))

    def sub_task(self, task: TaskInfo) -> None:
        self.pods.pop(task.uid, None)
        self.requested.pop(task.uid, None)
        rules = self.matched.pop(task.uid, frozenset())
        for uuid, memory, cores, group in self.charges.pop(task.uid, ()):
            card = self._card(uuid)
            if card is None:
                continue
            for rule in rules:
                card.exclusive[rule] -= 1
                if card.exclusive[rule] <= 0:
                    del card.exclusive[rule]
            if self.mig_mode and (instance := decode_mig_id(uuid)) is not None:
                sub_used(card.mig, card.templates, *instance)
            card.used_num -= 1
            card.used_mem -= memory
            card.used_cores -= cores
            if present(group, memory, cores):
                card.groups[group] -= 1
                if card.groups[group] <= 0:
                    del card.groups[group]

    def _charge(self, task: TaskInfo, charges: tuple[tuple[str, int, int, str], ...]) -> None:
        rules = self.task_rules(task)
        if rules:
            self.matched[task.uid] = rules
        charged = []
        for uuid, memory, cores, group in charges:
            card = self._card(uuid)
            if card is None:
                charged.append((uuid, memory, cores, group))
                continue
            if self.mig_mode:
                memory = self._mig_charge(task, card, uuid, memory)
            charged.append((uuid, memory, cores, group))
            for rule in rules:
                card.exclusive[rule] += 1
            card.used_num += 1
            card.used_mem += memory
            card.used_cores += cores
            if present(group, memory, cores):
                card.groups[group] += 1
        self.charges[task.uid] = tuple(charged)
        self.pods[task.uid] = task.key
        if self.mig_mode:  # the queue counts what the pod asked for, not the instance
            self.requested[task.uid] = sum(memory for _, memory, _, _ in charges)

    def _mig_charge(self, task: TaskInfo, card: VGpuCard, device_id: str, memory: int) -> int:
        """The MiB a MIG instance charges to ``card`` (``MIGFactory.AddPod``: the instance's
        memory, divided by the memory factor). An id that names no instance keeps the
        recorded MiB, with a warning (Volcano would not count the pod at all)."""
        instance = decode_mig_id(device_id)
        held = add_used(card.mig, card.templates, *instance) if instance is not None else 0
        if not held:
            self._warn(task, f"pod {task.key} on node {self.node_name} holds {device_id!r}, "
                             f"which names no MIG instance of the card's geometries; its "
                             f"recorded {memory} MiB are counted instead",
                       reason=INVALID_ANNOTATION)
            return memory
        return held // self.memory_factor if self.memory_factor > 1 else held

    def _warn(self, task: TaskInfo, message: str, *, reason: str = "DeviceWarning") -> None:
        if self.reporter is not None:
            self.reporter.warn(DeviceWarning(kind="Pod", name=task.name, namespace=task.namespace,
                                             uid=str(task.uid), message=message, reason=reason))

    def task_rules(self, task: TaskInfo) -> frozenset[int]:
        """The exclusivity rules ``task`` matches here (none where the rules do not act)."""
        if not self.rules or not self.exclusive_mode:
            return frozenset()
        return matching_rules(task_labels(task), self.rules)

    # -- fitting ------------------------------------------------------------------------
    def _order(self, cards: list[VGpuCard]) -> list[VGpuCard]:
        """Volcano's ``sortedDeviceIndicesByPolicy``: no tie-break but the card index."""
        if self.policy == "binpack":
            return sorted(cards, key=lambda c: (-c.used_mem, c.info.index))
        if self.policy == "spread":
            return sorted(cards, key=lambda c: (c.used_num, c.info.index))
        return sorted(cards, key=lambda c: c.info.index, reverse=True)

    def _card_score(self, card: VGpuCard) -> float:
        """Volcano's ``GPUScore`` of a card just charged with one vGPU: its spread bonus needs
        a card without sharers, which a charged card never is, so only binpack scores."""
        if self.policy == "binpack":
            return 100.0 * min(card.used_mem / max(card.info.memory, 1), 1.0)
        return 0.0

    @property
    def node_mode(self) -> str:
        """The node's sharing mode as Volcano's ``decodeNodeDevices`` sets it: ``mig`` or
        ``hami-core`` (any other registered mode, ``mps`` included, counts as HAMi-core)."""
        return MIG if self.mig_mode else HAMI_CORE

    def _plan(self, request: VGpuRequest) -> _Plan | str:
        if request.mode and self.names.profile == "volcano":
            # checkNodeGPUSharingPredicateAndScore: the pod's mode against the node's, once.
            if request.mode != self.node_mode:
                return (f"{REASON_PREFIX}: node {self.node_name}: pod required sharing mode "
                        f"{request.mode} is not the same as the node mode {self.node_mode}")
            request = replace(request, mode="")
        work = [card.copy() for card in self.cards]
        out: list[list[ContainerDevice]] = []
        score = 0.0
        for position, need in enumerate(request.containers):
            if need is None:
                out.append([])
                continue
            chosen: list[ContainerDevice] = []
            refusals: Counter[str] = Counter()
            for card in self._order(work):
                if len(chosen) == need.number:
                    break
                reason = refusal(card, need, request)
                if reason is not None:
                    refusals[reason] += 1
                    continue
                memory = need.memory_on(card.info.memory)
                device_id, charged = card.info.uuid, memory
                if self.mig_mode:
                    instance = self._mig_fit(card, memory)
                    if instance is None:
                        refusals["no MIG instance fits"] += 1
                        continue
                    device_id, charged = instance
                card.used_num += 1
                card.used_mem += charged
                card.used_cores += need.cores
                if present(request.spread_group, charged, need.cores):
                    card.groups[request.spread_group] += 1
                score += self._card_score(card)
                chosen.append(ContainerDevice(device_id, NVIDIA, memory, need.cores))
            if len(chosen) < need.number:
                return self._reason(request, position, need, len(chosen), refusals)
            out.append(chosen)
        return _Plan(out, score)

    def _mig_fit(self, card: VGpuCard, memory: int) -> tuple[str, int] | None:
        """``MIGFactory.TryAddPod``: the instance id and the MiB it charges, without marking
        the instance used (only an allocation does, so two containers of one pod may be
        offered the same instance, as in Volcano)."""
        factor = self.memory_factor
        match = find_match(card.info.uuid, memory * factor if factor > 1 else memory,
                           card.mig, card.templates)
        if match is None:
            return None
        return match[0], match[1] // factor if factor > 1 else match[1]

    def _reason(self, request: VGpuRequest, position: int, need: VGpuContainerRequest,
                found: int, refusals: Counter[str]) -> str:
        name = (request.container_names[position] if position < len(request.container_names)
                else str(position))
        if not self.cards:
            detail = "no vGPU cards registered"
        else:
            detail = ", ".join(f"{count} {why}" for why, count in sorted(refusals.items()))
        return (f"{REASON_PREFIX}: node {self.node_name}: container {name!r} needs "
                f"{need.describe()}, {found} of {len(self.cards)} card(s) fit ({detail})")

    def filter_node(self, task: TaskInfo, request: VGpuRequest) -> DeviceFit:
        plan = self._plan(self._scoped(request))
        if isinstance(plan, str):
            return DeviceFit(Status.unschedulable(plan))
        return DeviceFit(score=plan.score)

    def _scoped(self, request: VGpuRequest) -> VGpuRequest:
        """``request`` as this node sees it: exclusivity rules only act in HAMi-core mode."""
        if request.exclusive and not self.exclusive_mode:
            return replace(request, exclusive=frozenset())
        return request

    def allocate(self, task: TaskInfo, request: VGpuRequest, *, now: float) -> dict[str, str]:
        plan = self._plan(self._scoped(request))
        if isinstance(plan, str):
            raise DeviceError(plan)
        self.sub_task(task)
        self._charge(task, tuple((d.uuid, d.memory, d.cores, str(task.job))
                                 for container in plan.containers for d in container))
        encoded = encode_pod_devices(plan.containers, terminated=self.names.profile == "hami")
        seconds = str(int(now))
        return {self.names.assigned_node: self.node_name, self.names.assigned_time: seconds,
                self.names.allocated: encoded, self.names.to_allocate: encoded,
                self.names.bind_phase: "allocating", self.names.bind_time: seconds}

    def release(self, task: TaskInfo) -> tuple[str, ...]:
        if task.bind_annotations.get(self.names.bind_phase) == "success":
            return ()
        return self.names.binding_keys

    def queue_resources(self, task: TaskInfo) -> dict[str, float]:
        """Volcano's ``AddQueueResource``: the MiB and % cores ``task`` holds on this node's
        cards (milli units, like every scalar), for the queue's ``status.allocated``."""
        charges = self.charges.get(task.uid)
        if not charges:
            return {}
        memory = self.requested.get(task.uid)
        if memory is None:
            memory = sum(memory for _, memory, _, _ in charges)
        return {self.names.memory: 1000.0 * memory,
                self.names.cores: 1000.0 * sum(cores for _, _, cores, _ in charges)}

    # -- summaries ----------------------------------------------------------------------
    def summary(self) -> tuple[float, ...]:
        usable = [card for card in self.cards if card.open]
        return (float(len(usable)), float(max((c.free_memory for c in usable), default=0)),
                float(len(self.cards)))

    def status(self) -> str:
        cards = ", ".join(f"{c.info.uuid}:{c.used_num}/{c.info.split} slots "
                          f"{c.used_mem}/{c.info.memory}MiB {c.used_cores}% cores"
                          for c in self.cards)
        return f"{NAME} node {self.node_name}: {cards or 'no cards'}"

    def clone(self) -> VGpuDevices:
        return VGpuDevices(node_name=self.node_name, cards=[c.copy() for c in self.cards],
                           names=self.names, policy=self.policy, reporter=self.reporter,
                           charges=dict(self.charges), pods=dict(self.pods), rules=self.rules,
                           exclusive_mode=self.exclusive_mode, matched=dict(self.matched),
                           mig_mode=self.mig_mode, memory_factor=self.memory_factor,
                           requested=dict(self.requested))
