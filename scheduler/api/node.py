"""NodeInfo: one node's capacity and the tasks placed on it.

Accounting follows Volcano: a Releasing task keeps using its resources but also counts as
``releasing``; a Pipelined task only reserves ``pipelined`` (it has no resources yet); every
other task moves its request from ``idle`` to ``used``. ``future_idle`` is what will be free
once releasing tasks leave and pipelined tasks arrive.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.api.errors import ObjectError
from scheduler.api.pod import HostPort
from scheduler.api.resource import PODS, QuantityError, Resource, resource_from_list
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskID, TaskStatus

__all__ = ["NodeDevices", "NodeInfo", "Taint", "node_from_object"]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


class NodeDevices(Protocol):
    """The part of a device family's per-node object that node accounting calls."""

    def add_task(self, task: TaskInfo) -> None: ...

    def sub_task(self, task: TaskInfo) -> None: ...

    def clone(self) -> NodeDevices: ...


@dataclass(slots=True)
class NodeInfo:
    name: str
    allocatable: Resource
    capacity: Resource
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    idle: Resource = field(default_factory=Resource)
    used: Resource = field(default_factory=Resource)
    releasing: Resource = field(default_factory=Resource)
    pipelined: Resource = field(default_factory=Resource)
    tasks: dict[TaskID, TaskInfo] = field(default_factory=dict)
    others: dict[str, Any] = field(default_factory=dict)
    """Device family name → that family's per-node device object."""
    host_ports: Counter[HostPort] = field(default_factory=Counter)
    node: Mapping[str, Any] = field(default_factory=dict)
    index: int = -1
    """Row of this node in the session's node table."""

    @property
    def future_idle(self) -> Resource:
        return self.idle.clone().add(self.releasing).sub(self.pipelined)

    @property
    def pod_count(self) -> int:
        return len(self.tasks)

    # -- task accounting ------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        """Place ``task`` (already carrying its status) on this node."""
        if task.uid in self.tasks:
            raise ValueError(f"task {task.key} already on node {self.name}")
        self._account(task, +1)
        self.tasks[task.uid] = task
        for device in self.others.values():
            device.add_task(task)

    def remove_task(self, task: TaskInfo) -> None:
        existing = self.tasks.pop(task.uid, None)
        if existing is None:
            return
        self._account(existing, -1)
        for device in self.others.values():
            device.sub_task(existing)

    def update_task(self, task: TaskInfo) -> None:
        self.remove_task(task)
        self.add_task(task)

    def _account(self, task: TaskInfo, sign: int) -> None:
        request = task.resreq
        status = task.status
        if status is TaskStatus.PIPELINED:
            _apply(self.pipelined, request, sign)
        elif sign > 0:
            self.idle.sub(request)
            self.used.add(request)
            if status is TaskStatus.RELEASING:
                self.releasing.add(request)
        else:
            self.idle.add(request)
            self.used.sub(request)
            if status is TaskStatus.RELEASING:
                self.releasing.sub(request)
        for port in task.spec.host_ports:
            self.host_ports[port] += sign
            if self.host_ports[port] <= 0:
                del self.host_ports[port]

    def clone(self, tasks: Mapping[TaskID, TaskInfo] | None = None) -> NodeInfo:
        """A copy for a snapshot; ``tasks`` maps this node's task UIDs to the clones to use."""
        copy = NodeInfo(
            name=self.name,
            allocatable=self.allocatable,
            capacity=self.capacity,
            labels=self.labels,
            annotations=self.annotations,
            taints=self.taints,
            unschedulable=self.unschedulable,
            ready=self.ready,
            idle=self.idle.clone(),
            used=self.used.clone(),
            releasing=self.releasing.clone(),
            pipelined=self.pipelined.clone(),
            node=self.node,
            index=self.index,
        )
        if tasks is None:
            copy.tasks = {uid: task.clone() for uid, task in self.tasks.items()}
        else:
            copy.tasks = {uid: tasks[uid] for uid in self.tasks}
        copy.others = {name: device.clone() for name, device in self.others.items()}
        copy.host_ports = Counter(self.host_ports)
        return copy


def _apply(target: Resource, delta: Resource, sign: int) -> None:
    if sign > 0:
        target.add(delta)
    else:
        target.sub(delta)


def node_from_object(obj: Mapping[str, Any], *, ignored: frozenset[str] = frozenset()) -> NodeInfo:
    """Build an empty NodeInfo from a Node object; raises :class:`ObjectError`."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta.get("name") or "")
    if not name:
        raise ObjectError(
            kind="Node", name="<unnamed>", field="metadata.name", problem="is required"
        )
    try:
        capacity = resource_from_list(status.get("capacity"), ignored=ignored)
        allocatable = resource_from_list(
            status.get("allocatable") or status.get("capacity"), ignored=ignored
        )
    except QuantityError as exc:
        raise ObjectError(
            kind="Node", name=name, field="status.allocatable", problem=str(exc)
        ) from None
    for resource in (capacity, allocatable):
        resource.scalars.setdefault(PODS, 110.0)  # the kubelet's default when a manifest omits it
    taints = []
    for i, taint in enumerate(spec.get("taints") or []):
        if not isinstance(taint, Mapping) or not taint.get("key") or not taint.get("effect"):
            raise ObjectError(
                kind="Node",
                name=name,
                field=f"spec.taints[{i}]",
                problem="a taint needs a key and an effect",
            )
        taints.append(Taint(str(taint["key"]), str(taint.get("value") or ""), str(taint["effect"])))
    ready = True
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
    return NodeInfo(
        name=name,
        allocatable=allocatable,
        capacity=capacity,
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        idle=allocatable.clone(),
        node=obj,
    )
