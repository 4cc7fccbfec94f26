"""The device-family contract, its configuration, and the warning reporter.

A *family* (GPU share, vGPU, ...) has two parts. Its :class:`DeviceFamily` object is built once
from the conf and knows how to read a pod's request, how to build a node's device ledger, and
which per-node summary numbers let the session pre-filter nodes with one vector comparison.
Its :class:`Devices` objects, one per node in ``NodeInfo.others``, are that node's ledger: they
follow Volcano's ``Devices`` interface (add/sub a pod, filter, score, allocate, release,
status, deep copy). Ledgers are rebuilt from bound pods' annotations, never persisted, so a
restarted scheduler sees exactly what node-side plugins were told.
"""

from __future__ import annotations

import threading
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import structlog

from scheduler.api.node import NodeInfo
from scheduler.api.resource import Resource
from scheduler.api.status import Status
from scheduler.api.task import TaskInfo
from scheduler.devices.mig import DEFAULT_CONFIG_MAP, VGpuSettings
from scheduler.devices.names import GPUSHARE_LOCK, PROFILES, VGpuNames

__all__ = [
    "POLICIES",
    "DeviceConfig",
    "DeviceError",
    "DeviceFamily",
    "DeviceFit",
    "DeviceRequestError",
    "DeviceWarning",
    "Devices",
    "QueueCharged",
    "Reporter",
    "config_from_args",
    "lock_owner",
    "queue_device_usage",
    "task_annotations",
]

log = structlog.get_logger("lahar.devices")

POLICIES = ("", "binpack", "spread")
"""``deviceshare.SchedulePolicy`` values; "" (unset) is Volcano's default, which is neither."""


class DeviceRequestError(ValueError):
    """A pod's device request that can never be satisfied as written (bad quantity...)."""


class DeviceError(Exception):
    """An allocation that could not be made on the node it was tried on."""


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """Which families are on and how they choose, derived from the scheduler conf."""

    gpu_sharing: bool = False
    gpu_number: bool = False
    vgpu: bool = False
    node_lock: bool = False
    policy: str = ""
    weight: int = 0
    profile: str = "volcano"
    vgpu_legacy_register: bool = False
    """Read five-field register entries too (``deviceshare.VGPURegisterLegacyFields``)."""
    finegrained: bool = False
    finegrained_scoring: str = "LeastAllocated"
    finegrained_weights: tuple[tuple[str, int], ...] = ()
    """Scored resource → weight; empty means Koordinator's defaults."""
    finegrained_unsupported: tuple[tuple[str, str], ...] = ()
    """(vendor, model) of nodes whose GPUs are never shared."""
    finegrained_policy: str = ""
    """A placement policy of the FGD paper scoring nodes and cards; empty: Koordinator's."""
    finegrained_tie_break: str = "random"
    """``first``: equal scores go to the first node of the node table; ``random``: Volcano."""
    finegrained_target: tuple[Any, ...] = ()
    """The target workload of ``fgd``: ``{cpu, gpuMilli, gpus, models, count}`` entries."""
    finegrained_policy_args: tuple[tuple[str, Any], ...] = ()
    """The arguments of a policy that takes some (``fgd-learned``), as (name, value)."""
    exclusive_rules: tuple[tuple[tuple[str, str], ...], ...] = ()
    """vGPU exclusivity rules (``deviceshare.GPUExclusiveRules``), each as sorted label pairs."""
    geometries_config_map: tuple[str, str] = DEFAULT_CONFIG_MAP
    """(namespace, name) of Volcano's device ConfigMap (``deviceshare.KnownGeometriesCM*``)."""
    vgpu_settings: VGpuSettings = VGpuSettings()
    """What that ConfigMap says about vGPU (MIG geometries, memory factor)."""

    @property
    def names(self) -> VGpuNames:
        return PROFILES[self.profile]

    @property
    def any_enabled(self) -> bool:
        return self.gpu_sharing or self.gpu_number or self.vgpu or self.finegrained


def config_from_args(*args: Any) -> DeviceConfig:
    """Merge plugin ``Args`` objects (``deviceshare`` first, then legacy ``predicates``).

    Switches are OR-ed; policy, weight and profile come from the first object that has them.
    """
    present = [a for a in args if a is not None]

    def flag(name: str) -> bool:
        return any(bool(getattr(a, name, False)) for a in present)

    def first(name: str, default: Any) -> Any:
        return next((getattr(a, name) for a in present if hasattr(a, name)), default)

    return DeviceConfig(
        gpu_sharing=flag("gpu_sharing"), gpu_number=flag("gpu_number"), vgpu=flag("vgpu"),
        node_lock=flag("node_lock"), policy=first("policy", ""),
        weight=first("weight", 0), profile=first("profile", "volcano"),
        vgpu_legacy_register=flag("vgpu_legacy_register"),
        finegrained=flag("finegrained"),
        finegrained_scoring=first("finegrained_scoring", "LeastAllocated"),
        finegrained_weights=tuple(first("finegrained_weights", ())),
        finegrained_unsupported=tuple(first("finegrained_unsupported", ())),
        finegrained_policy=first("finegrained_policy", ""),
        finegrained_tie_break=first("finegrained_tie_break", "random"),
        finegrained_target=tuple(first("finegrained_target", ())),
        finegrained_policy_args=tuple(sorted(
            (first("finegrained_policy_args", None) or {}).items())),
        exclusive_rules=tuple(first("exclusive_rules", None) or ()),
        geometries_config_map=(first("geometries_cm_namespace", DEFAULT_CONFIG_MAP[0]),
                               first("geometries_cm_name", DEFAULT_CONFIG_MAP[1])),
    )


def lock_owner(config: DeviceConfig, key: str, task: TaskInfo) -> str | None:
    """The owner recorded in node lock ``key`` for ``task``: HAMi's vGPU lock names the pod,
    Volcano's locks (and GPU share's ``gpu``) hold only the time."""
    return task.key if config.names.lock_with_owner and key != GPUSHARE_LOCK else None


def task_annotations(task: TaskInfo) -> Mapping[str, str]:
    """The pod's annotations overlaid with those its pending Binding will add."""
    if not task.bind_annotations:
        return task.annotations
    return ChainMap(task.bind_annotations, dict(task.annotations))


@dataclass(frozen=True, slots=True)
class DeviceWarning:
    """Something wrong in the cluster's device data, reported once as a log line and Event."""

    kind: str
    name: str
    message: str
    namespace: str = ""
    uid: str = ""
    reason: str = "DeviceWarning"


class Reporter:
    """Logs each distinct warning once and hands it to an optional sink (an Event writer).

    Ledgers are rebuilt often (every node update, every snapshot of a changed node), so the
    same stale annotation would otherwise be reported over and over.
    """

    def __init__(self, sink: Callable[[DeviceWarning], None] | None = None) -> None:
        self.sink = sink
        self.seen: set[DeviceWarning] = set()
        self._lock = threading.Lock()

    def warn(self, warning: DeviceWarning) -> None:
        with self._lock:
            if warning in self.seen:
                return
            self.seen.add(warning)
        log.warning("device data problem", object=f"{warning.kind} {warning.namespace}/"
                    f"{warning.name}".replace(" /", " "), message=warning.message)
        if self.sink is not None:
            try:
                self.sink(warning)
            except Exception as exc:  # a failed Event must never break scheduling
                log.warning("could not record device warning", error=str(exc))


@dataclass(slots=True)
class DeviceFit:
    """A family's verdict on one node: ``status`` None means it fits, with ``score``."""

    status: Status | None = None
    score: float = 0.0


class Devices(Protocol):
    """One node's ledger for one family (``NodeInfo.others[family]``), Volcano's interface."""

    node_name: str
    policy: str

    def add_task(self, task: TaskInfo) -> None:
        """Account a pod placed on this node from its (binding) annotations."""

    def sub_task(self, task: TaskInfo) -> None:
        """Remove whatever :meth:`add_task` or :meth:`allocate` charged for this pod."""

    def filter_node(self, task: TaskInfo, request: Any) -> DeviceFit: ...

    def allocate(self, task: TaskInfo, request: Any, *, now: float) -> dict[str, str]:
        """Choose devices, charge them, and return the annotations for the Binding;
        raises :class:`DeviceError` when nothing fits."""

    def release(self, task: TaskInfo) -> tuple[str, ...]:
        """Annotation keys to strip from the task's pending Binding after a rollback."""

    def summary(self) -> tuple[float, ...]:
        """The family's vector pre-filter columns for this node."""

    def status(self) -> str: ...

    def clone(self) -> Devices: ...


class DeviceFamily(Protocol):
    """A device family as configured for this scheduler (see the module docstring)."""

    NAME: ClassVar[str]
    COLUMNS: ClassVar[tuple[str, ...]]

    def build(self, node: NodeInfo) -> Devices | None:
        """The node's ledger, or None when the node offers no devices of this family."""

    def parse_request(self, task: TaskInfo) -> Any | None:
        """The pod's request, None when it asks for nothing of this family; raises
        :class:`DeviceRequestError` for a request that can never be honoured."""

    def vector_fit(self, request: Any, columns: Mapping[str, Any]) -> Any:
        """A boolean mask over nodes from the family's summary columns (necessary, not
        sufficient: exact checks follow on candidates)."""

    def vector_reasons(self, request: Any, columns: Mapping[str, Any]) -> list[tuple[Any, str]]:
        """Why nodes fail :meth:`vector_fit`: ``(failed mask, reason)`` pairs in check order."""

    def lock_name(self, request: Any) -> str | None:
        """The node-lock annotation this request needs, if node locking is on."""

    @property
    def binding_keys(self) -> tuple[str, ...]:
        """The annotation keys :meth:`Devices.allocate` writes (the first one always)."""

    @property
    def ignored_resources(self) -> frozenset[str]: ...

    @property
    def resource_dims(self) -> frozenset[str]: ...


@runtime_checkable
class QueueCharged(Protocol):
    """A ledger whose pods hold quantities the generic resource model does not count, which
    Volcano still adds to the queue's ``status.allocated`` (``Devices.AddQueueResource``)."""

    def queue_resources(self, task: TaskInfo) -> Mapping[str, float]:
        """Resource name → value in the model's unit (milli) that ``task`` holds here."""


_queue_charged: dict[type, bool] = {}
"""Ledger class → whether it is :class:`QueueCharged`. A runtime ``Protocol`` check walks the
protocol's members on every call; session close asks it for every bound pod of every cycle."""


def _is_queue_charged(ledger: object) -> bool:
    kind = type(ledger)
    known = _queue_charged.get(kind)
    if known is None:
        known = _queue_charged[kind] = callable(getattr(kind, "queue_resources", None))
    return known


def queue_device_usage(node: NodeInfo | None, task: TaskInfo) -> Resource:
    """What ``task`` holds on ``node``'s device ledgers beyond its requests, for the queue's
    ``status.allocated`` (Volcano's ``addNodeSharableDeviceUsage`` at session close)."""
    usage = Resource()
    if node is None:
        return usage
    for ledger in node.others.values():
        if _is_queue_charged(ledger):
            for name, value in ledger.queue_resources(task).items():
                usage.set(name, usage.get(name) + value)
    return usage
