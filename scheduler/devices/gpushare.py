"""GPU share (Volcano's ``volcano.sh/gpu-memory`` / ``volcano.sh/gpu-number``).

A node reports the summed memory of its cards and their count; every card has
``total / count`` memory. Memory mode puts a pod on one card with enough free memory: by
default the lowest-index such card, and every node scores 0, as in Volcano. Our choices are
opt-in through ``deviceshare.SchedulePolicy``: ``binpack`` takes the card that is fullest after
placement and prefers nodes whose chosen card ends fullest (a small pod fills a gap instead of
opening a card a big pod may need), ``spread`` the emptiest card and node; lowest index on
ties. Number mode takes the lowest-index whole cards nobody uses. The choice travels as
``volcano.sh/gpu-index`` (comma list in number mode) with ``volcano.sh/predicate-time``, and
the ledger is rebuilt from those annotations of bound pods. A recorded index the node no
longer has is reported (pod, node, index) and never charged, and never chosen again; a bad
item of the index list is reported and left out, the other cards stay charged, and bound pods
that together exceed a card's memory are all counted, with one warning naming card and pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import ClassVar

import numpy as np

from scheduler.api.node import NodeInfo
from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.api.status import Status
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskID
from scheduler.devices.base import (
    DeviceConfig,
    DeviceError,
    DeviceFit,
    DeviceWarning,
    Reporter,
    task_annotations,
)
from scheduler.devices.codec import CodecError, decode_index_list, read_index_list
from scheduler.devices.names import (
    GPU_INDEX,
    GPU_MEMORY,
    GPU_NUMBER,
    GPU_UNHEALTHY_IDS,
    GPUSHARE_LOCK,
    PREDICATE_TIME,
)
from scheduler.devices.requests import GpuShareRequest, gpushare_request

__all__ = ["GpuCard", "GpuShareDevices", "GpuShareFamily"]

NAME = "GpuShare"
COL_MAX_FREE = "gpushare.max_free_memory"
COL_IDLE = "gpushare.idle_cards"
COL_MAX_CARD = "gpushare.max_card_memory"
COL_HEALTHY = "gpushare.healthy_cards"
INVALID_ANNOTATION = "InvalidDeviceAnnotation"
OVERBOOKED = "DeviceOverbooked"


@dataclass(slots=True)
class GpuCard:
    index: int
    memory: int
    used: int = 0
    holders: int = 0
    healthy: bool = True

    @property
    def free(self) -> int:
        return max(self.memory - self.used, 0)


@dataclass(slots=True)
class GpuShareDevices:
    """One node's GPU share ledger (``NodeInfo.others["GpuShare"]``)."""

    node_name: str
    cards: list[GpuCard]
    policy: str = ""
    reporter: Reporter | None = None
    charges: dict[TaskID, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    pods: dict[TaskID, str] = field(default_factory=dict)
    """The namespace/name of each pod charged here (named when a card is overbooked)."""

    # -- accounting ---------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        annotations = task_annotations(task)
        text = annotations.get(GPU_INDEX)
        if text is None or task.uid in self.charges:
            return
        where = f"pod {task.key} on node {self.node_name}"
        read = read_index_list(text)
        if not read.indices:
            self._warn(task, f"{where} has an unreadable {GPU_INDEX} annotation "
                             f"({'; '.join(read.skipped)}); its GPU usage is not counted",
                       reason=INVALID_ANNOTATION)
            return
        if read.skipped:
            self._warn(task, f"{where}: annotation {GPU_INDEX} {text!r}: "
                             f"{'; '.join(read.skipped)}; that item is not counted, cards "
                             f"{','.join(map(str, read.indices))} are", reason=INVALID_ANNOTATION)
        try:
            request = gpushare_request(task, sharing=True, number=True)
        except ValueError as exc:
            request = None
            self._warn(task, f"{where} holds cards ({GPU_INDEX}) but its GPU request is not "
                             f"valid ({exc}); each card it holds is counted whole",
                       reason=INVALID_ANNOTATION)
        charges = []
        for index in dict.fromkeys(read.indices):
            if index >= len(self.cards):
                self._warn(task, f"pod {task.key} on node {self.node_name} records GPU index "
                                 f"{index} but the node has {len(self.cards)} card(s); that "
                                 f"usage is ignored", reason="GPUIndexOutOfRange")
                continue
            card = self.cards[index]
            whole = request is None or not request.memory
            charges.append((index, card.memory if whole else request.memory))  # type: ignore[union-attr]
        before = {index: self.cards[index].used > self.cards[index].memory
                  for index, _ in charges}
        self._charge(task, tuple(charges))
        for index, over in before.items():
            if not over:
                self._report_overbooked(index)

    def _report_overbooked(self, index: int) -> None:
        card = self.cards[index]
        if card.used <= card.memory or self.reporter is None:
            return
        pods = sorted(self.pods[uid] for uid, charges in self.charges.items()
                      if uid in self.pods and any(i == index for i, _ in charges))
        self.reporter.warn(DeviceWarning(
            kind="Node", name=self.node_name, reason=OVERBOOKED,
            message=f"node {self.node_name}: GPU card {index} is overbooked by the pods bound "
                    f"to it (memory {card.used}/{card.memory}; pods {', '.join(pods)}); every "
                    f"pod keeps its usage, so the card takes no new pod until enough of them "
                    f"end"))

    def sub_task(self, task: TaskInfo) -> None:
        self.pods.pop(task.uid, None)
        for index, memory in self.charges.pop(task.uid, ()):
            card = self.cards[index]
            card.used -= memory
            card.holders -= 1

    def _charge(self, task: TaskInfo, charges: tuple[tuple[int, int], ...]) -> None:
        for index, memory in charges:
            self.cards[index].used += memory
            self.cards[index].holders += 1
        self.charges[task.uid] = charges
        self.pods[task.uid] = task.key

    def _warn(self, task: TaskInfo, message: str, *, reason: str = "DeviceWarning") -> None:
        if self.reporter is not None:
            self.reporter.warn(DeviceWarning(kind="Pod", name=task.name, namespace=task.namespace,
                                             uid=str(task.uid), message=message, reason=reason))

    # -- choosing -----------------------------------------------------------------------
    def _usable(self) -> list[GpuCard]:
        return [card for card in self.cards if card.healthy]

    def _choose_card(self, memory: int) -> GpuCard | None:
        fitting = [card for card in self._usable() if card.free >= memory]
        if not fitting:
            return None
        if self.policy == "spread":
            return min(fitting, key=lambda c: (c.used, c.index))
        if self.policy == "binpack":
            return min(fitting, key=lambda c: (c.free - memory, c.index))
        return fitting[0]  # Volcano's predicateGPUbyMemory: the lowest index that fits

    def _score(self, fullness: float) -> float:
        """Node score from the chosen cards' fullness; Volcano's GPU share scores 0."""
        if self.policy == "binpack":
            return 100.0 * fullness
        if self.policy == "spread":
            return 100.0 * (1.0 - fullness)
        return 0.0

    def _idle_cards(self) -> list[GpuCard]:
        return [card for card in self._usable() if card.holders == 0 and card.used <= 0]

    def filter_node(self, task: TaskInfo, request: GpuShareRequest) -> DeviceFit:
        if request.memory:
            card = self._choose_card(request.memory)
            if card is None:
                return DeviceFit(Status.unschedulable(self._memory_reason(request.memory)))
            fullness = min((card.used + request.memory) / max(card.memory, 1), 1.0)
            return DeviceFit(score=self._score(fullness))
        idle = self._idle_cards()
        if len(idle) < request.number:
            return DeviceFit(Status.unschedulable(
                f"GpuNumber no enough gpu number on node {self.node_name}: {len(idle)} idle "
                f"healthy card(s), pod {task.key} asks for {request.number} {GPU_NUMBER}"))
        usable = max(len(self._usable()), 1)
        fullness = (usable - len(idle) + request.number) / usable
        return DeviceFit(score=self._score(fullness))

    def _memory_reason(self, memory: int) -> str:
        usable = self._usable()
        if not usable:
            return f"GpuShare no enough gpu memory on node {self.node_name}: no healthy GPU card"
        largest = max(card.memory for card in usable)
        if memory > largest:
            return (f"GpuShare no enough gpu memory on node {self.node_name}: {memory} "
                    f"{GPU_MEMORY} asked, more than a whole card holds ({largest})")
        return (f"GpuShare no enough gpu memory on node {self.node_name}: {memory} "
                f"{GPU_MEMORY} asked, the most free on one card is "
                f"{max(card.free for card in usable)}")

    def allocate(self, task: TaskInfo, request: GpuShareRequest, *, now: float) -> dict[str, str]:
        fit = self.filter_node(task, request)
        if fit.status is not None:
            raise DeviceError(fit.status.message)
        if request.memory:
            chosen = self._choose_card(request.memory)
            assert chosen is not None
            charges: tuple[tuple[int, int], ...] = ((chosen.index, request.memory),)
        else:
            cards = self._idle_cards()[:request.number]
            charges = tuple((card.index, card.memory) for card in cards)
        self.sub_task(task)
        self._charge(task, charges)
        return {GPU_INDEX: ",".join(str(index) for index, _ in charges),
                PREDICATE_TIME: str(int(Decimal(repr(now)) * 1_000_000_000))}

    def release(self, task: TaskInfo) -> tuple[str, ...]:
        return (GPU_INDEX, PREDICATE_TIME)

    # -- summaries ----------------------------------------------------------------------
    def summary(self) -> tuple[float, ...]:
        usable = self._usable()
        return (float(max((card.free for card in usable), default=0)),
                float(len(self._idle_cards())),
                float(max((card.memory for card in usable), default=0)),
                float(len(usable)))

    def status(self) -> str:
        cards = ", ".join(f"{c.index}:{c.used}/{c.memory}{'' if c.healthy else ' unhealthy'}"
                          for c in self.cards)
        return f"{NAME} node {self.node_name}: {cards or 'no cards'}"

    def clone(self) -> GpuShareDevices:
        return GpuShareDevices(
            node_name=self.node_name, policy=self.policy, reporter=self.reporter,
            cards=[GpuCard(c.index, c.memory, c.used, c.holders, c.healthy) for c in self.cards],
            charges=dict(self.charges), pods=dict(self.pods))


def _node_quantity(node: Mapping[str, object], name: str) -> int:
    status = node.get("status") or {}
    assert isinstance(status, Mapping)
    values = status.get("allocatable") or status.get("capacity") or {}
    raw = values.get(name) if isinstance(values, Mapping) else None
    if raw is None:
        return 0
    value = parse_quantity(raw)
    return max(int(value), 0)


@dataclass(frozen=True, slots=True)
class GpuShareFamily:
    """GPU share as configured (memory mode, number mode, or both)."""

    config: DeviceConfig
    reporter: Reporter
    NAME: ClassVar[str] = NAME
    COLUMNS: ClassVar[tuple[str, ...]] = (COL_MAX_FREE, COL_IDLE, COL_MAX_CARD, COL_HEALTHY)

    def build(self, node: NodeInfo) -> GpuShareDevices | None:
        try:
            total = _node_quantity(node.node, GPU_MEMORY)
            count = _node_quantity(node.node, GPU_NUMBER)
        except QuantityError as exc:
            self._node_warning(node.name, f"node {node.name} reports an unreadable GPU "
                                          f"quantity ({exc}); it is treated as having no GPUs")
            return None
        if count <= 0:
            return None
        per_card = total // count
        cards = [GpuCard(index=i, memory=per_card) for i in range(count)]
        unhealthy = node.annotations.get(GPU_UNHEALTHY_IDS, "").strip()
        if unhealthy:
            try:
                ids = decode_index_list(unhealthy)
            except CodecError as exc:
                self._node_warning(node.name, f"node {node.name} has an unreadable "
                                              f"{GPU_UNHEALTHY_IDS} annotation ({exc}); "
                                              f"all its cards are treated as unhealthy")
                ids = list(range(count))
            for index in ids:
                if 0 <= index < count:
                    cards[index].healthy = False
        return GpuShareDevices(node_name=node.name, cards=cards, policy=self.config.policy,
                               reporter=self.reporter)

    def _node_warning(self, node: str, message: str) -> None:
        self.reporter.warn(DeviceWarning(kind="Node", name=node, message=message))

    def parse_request(self, task: TaskInfo) -> GpuShareRequest | None:
        return gpushare_request(task, sharing=self.config.gpu_sharing,
                                number=self.config.gpu_number)

    def vector_fit(self, request: GpuShareRequest,
                   columns: Mapping[str, np.ndarray]) -> np.ndarray:
        if request.memory:
            return np.asarray(columns[COL_MAX_FREE] >= request.memory)
        return np.asarray(columns[COL_IDLE] >= request.number)

    def vector_reasons(self, request: GpuShareRequest, columns: Mapping[str, np.ndarray]
                       ) -> list[tuple[np.ndarray, str]]:
        healthy = columns[COL_HEALTHY]
        if request.memory:
            memory = request.memory
            return [
                (healthy <= 0, f"GpuShare no enough gpu memory: node(s) had no healthy GPU card "
                               f"({GPU_NUMBER})"),
                (columns[COL_MAX_CARD] < memory,
                 f"GpuShare no enough gpu memory: {memory} {GPU_MEMORY} is more than one card "
                 f"of the node holds"),
                (columns[COL_MAX_FREE] < memory,
                 f"GpuShare no enough gpu memory: no card of the node has {memory} "
                 f"{GPU_MEMORY} free"),
            ]
        number = request.number
        return [
            (healthy < number, f"GpuNumber no enough gpu number: node(s) had fewer than "
                               f"{number} healthy GPU card(s)"),
            (columns[COL_IDLE] < number, f"GpuNumber no enough gpu number: node(s) had fewer "
                                         f"than {number} idle GPU card(s)"),
        ]

    def lock_name(self, request: GpuShareRequest) -> str | None:
        return GPUSHARE_LOCK if self.config.node_lock and request.memory else None

    @property
    def binding_keys(self) -> tuple[str, ...]:
        return (GPU_INDEX, PREDICATE_TIME)

    @property
    def ignored_resources(self) -> frozenset[str]:
        return frozenset()

    @property
    def resource_dims(self) -> frozenset[str]:
        return frozenset({GPU_MEMORY, GPU_NUMBER})
