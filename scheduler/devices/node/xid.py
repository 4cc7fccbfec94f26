"""GPU health from NVML's XID events, as the peers' device plugins watch it.

Polling NVML only notices a card that stopped answering; a card that answers but reports a
critical XID (an uncorrectable ECC error, a fallen-off bus, a GPU that needs a reset) is just
as unusable. :class:`XidMonitor` waits on an :class:`EventSource` in a thread of its own and
marks the card an event names unhealthy; :class:`XidSource` lays those marks over the
inventory the agent reads every health interval, so ``ListAndWatch``, the register
annotations and the ``Device`` object all see them.

What counts, as HAMi ``pkg/device-plugin/nvidiadevice/nvinternal/rm/health.go`` (NVIDIA's
device plugin) classifies it: only ``XidCriticalError`` events (ECC events are registered but
skipped); the application XIDs 13, 31, 43, 45, 68 and 109 are ignored (volcano-sh/devices'
GPU share plugin ignores 31, 43 and 45); ``DP_DISABLE_HEALTHCHECKS`` (``all``/``xids``, or a
list of XIDs) and ``DP_ENABLE_HEALTHCHECKS`` (XIDs that count even so) adjust the list. An
event whose device cannot be told, and a failed wait, mark every card; a card whose events
cannot be registered is unhealthy from the start, one too old to have events is watched by
polling only.

The peers never bring a card back (HAMi: "there is no way to recover from the Unhealthy
state") until the plugin restarts, which SIGHUP does; :meth:`XidMonitor.reset` is that
restart. ``recover_after`` (``--xid-recovery``, off by default) is Lahar's own: a card is
healthy again once that many seconds passed without a new critical XID.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import structlog

from scheduler.devices.node.inventory import DeviceSource, Inventory

__all__ = [
    "APPLICATION_XIDS",
    "GPUSHARE_APPLICATION_XIDS",
    "XID_CRITICAL",
    "EventSource",
    "FakeEvents",
    "NvmlEvents",
    "XidEvent",
    "XidMonitor",
    "XidPolicy",
    "XidSource",
]

log = structlog.get_logger("lahar.nodeagent")

XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
_ECC = 0x1 | 0x2  # single and double bit ECC errors: registered, then skipped
APPLICATION_XIDS = (13, 31, 43, 45, 68, 109)
"""Errors of the application, not the card (HAMi/NVIDIA ``getHealthCheckXids``)."""
GPUSHARE_APPLICATION_XIDS = (31, 43, 45)
"""volcano-sh/devices ``pkg/plugin/nvidia/nvidia.go`` ``checkHealth``."""
_NVML_TIMEOUT = 10
_NVML_NOT_SUPPORTED = 3


@dataclass(frozen=True, slots=True)
class XidEvent:
    uuid: str | None
    """The card's UUID; None when NVML could not say which card."""
    xid: int
    event_type: int = XID_CRITICAL


@dataclass(frozen=True, slots=True)
class XidPolicy:
    """Which XIDs leave a card healthy: XID → disabled; key 0 stands for all."""

    disabled: Mapping[int, bool]

    @classmethod
    def from_env(cls, environ: Mapping[str, str],
                 ignored: Sequence[int] = APPLICATION_XIDS) -> XidPolicy:
        disabled = _xids(environ.get("DP_DISABLE_HEALTHCHECKS", ""))
        for xid in ignored:
            disabled[xid] = True
        for xid in _xids(environ.get("DP_ENABLE_HEALTHCHECKS", "")):
            disabled[xid] = False
        return cls(disabled)

    @property
    def all_disabled(self) -> bool:
        return self.disabled.get(0, False)

    def counts(self, xid: int) -> bool:
        """Whether a critical XID of this number makes the card unhealthy."""
        if self.disabled.get(0) is False:  # DP_ENABLE_HEALTHCHECKS=all
            return True
        return not self.disabled.get(xid, self.all_disabled)


def _xids(text: str) -> dict[int, bool]:
    out: dict[int, bool] = {}
    for word in text.lower().split(","):
        word = word.strip()
        if word in ("all", "xids"):
            return {0: True}
        if word.isdigit():
            out[int(word)] = True
    return out


class EventSource(Protocol):
    def register(self, uuids: Sequence[str]) -> list[str]:
        """Watch these cards; the ones that cannot be watched (to be marked unhealthy)."""
        ...

    def wait(self, timeout: float) -> XidEvent | None:
        """The next event, None after ``timeout`` seconds without one; raises when NVML
        cannot wait."""
        ...

    def close(self) -> None: ...


@dataclass(slots=True)
class NvmlEvents:
    """An :class:`EventSource` over NVML's event set (``pynvml``, or a fake of it)."""

    nvml: Any
    error: type[BaseException] = Exception
    _set: Any = None

    def register(self, uuids: Sequence[str]) -> list[str]:
        self.close()
        self.nvml.nvmlInit()
        self._set = self.nvml.nvmlEventSetCreate()
        failed: list[str] = []
        for uuid in uuids:
            try:
                handle = self.nvml.nvmlDeviceGetHandleByUUID(uuid)
                supported = int(self.nvml.nvmlDeviceGetSupportedEventTypes(handle))
                self.nvml.nvmlDeviceRegisterEvents(handle, (XID_CRITICAL | _ECC) & supported,
                                                   self._set)
            except self.error as exc:
                if getattr(exc, "value", None) == _NVML_NOT_SUPPORTED:
                    log.warning("GPU too old for XID events: health by polling only",
                                gpu=uuid)
                    continue
                log.warning("cannot watch GPU events: marking it unhealthy", gpu=uuid,
                            error=str(exc))
                failed.append(uuid)
        return failed

    def wait(self, timeout: float) -> XidEvent | None:
        try:
            data = self.nvml.nvmlEventSetWait_v2(self._set, int(timeout * 1000))
        except self.error as exc:
            if getattr(exc, "value", None) == _NVML_TIMEOUT:
                return None
            raise
        try:
            uuid: str | None = _text(self.nvml.nvmlDeviceGetUUID(data.device))
        except self.error:
            uuid = None
        return XidEvent(uuid=uuid, xid=int(data.eventData), event_type=int(data.eventType))

    def close(self) -> None:
        if self._set is not None:
            with contextlib.suppress(self.error):
                self.nvml.nvmlEventSetFree(self._set)
            self._set = None
            self.nvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class FakeEvents:
    """Events a test (or a fake-GPU node) emits by hand."""

    def __init__(self, *, unwatchable: Sequence[str] = ()) -> None:
        self.unwatchable = list(unwatchable)
        self.registered: list[list[str]] = []
        self._queue: queue.Queue[XidEvent | BaseException] = queue.Queue()

    def emit(self, uuid: str | None, xid: int, event_type: int = XID_CRITICAL) -> None:
        self._queue.put(XidEvent(uuid=uuid, xid=xid, event_type=event_type))

    def fail(self, error: BaseException) -> None:
        """The next wait raises ``error``."""
        self._queue.put(error)

    def register(self, uuids: Sequence[str]) -> list[str]:
        self.registered.append(list(uuids))
        return [u for u in uuids if u in self.unwatchable]

    def wait(self, timeout: float) -> XidEvent | None:
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        pass


@dataclass(slots=True)
class XidMonitor:
    """Marks cards unhealthy on critical XIDs (see the module docstring)."""

    events: EventSource
    policy: XidPolicy
    recover_after: float = 0.0
    clock: Callable[[], float] = time.monotonic
    wait_timeout: float = 0.25
    _marks: dict[str, tuple[float, int]] = field(default_factory=dict)
    _uuids: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, uuids: Sequence[str]) -> None:
        self._uuids = list(uuids)
        if self.policy.all_disabled:
            log.info("XID health checks disabled (DP_DISABLE_HEALTHCHECKS)")
            return
        for uuid in self.events.register(self._uuids):
            self._mark(uuid, -1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="xid-events", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        self.events.close()

    def reset(self) -> None:
        """Forget every mark and watch the cards again (what a plugin restart does)."""
        self.stop()
        with self._lock:
            self._marks.clear()
        self.start(self._uuids)

    def unhealthy(self) -> dict[str, int]:
        """UUID → the XID that marked it (-1: its events cannot be watched)."""
        now = self.clock()
        with self._lock:
            if self.recover_after > 0:
                for uuid in [u for u, (at, xid) in self._marks.items()
                             if xid >= 0 and now - at >= self.recover_after]:
                    log.info("GPU healthy again: no critical XID", gpu=uuid,
                             seconds=self.recover_after)
                    del self._marks[uuid]
            return {uuid: xid for uuid, (_, xid) in self._marks.items()}

    def _mark(self, uuid: str, xid: int) -> None:
        with self._lock:
            self._marks[uuid] = (self.clock(), xid)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                event = self.events.wait(self.wait_timeout)
            except Exception as exc:
                log.warning("cannot wait for GPU events: marking every GPU unhealthy",
                            error=str(exc))
                for uuid in self._uuids:
                    self._mark(uuid, 0)
                self._stop.wait(self.wait_timeout)
                continue
            if event is None or event.event_type != XID_CRITICAL:
                continue
            if not self.policy.counts(event.xid):
                log.info("skipping XID", xid=event.xid, gpu=event.uuid)
                continue
            targets = self._uuids if event.uuid is None else [event.uuid]
            for uuid in targets:
                if uuid in self._uuids:
                    log.warning("critical XID: GPU unhealthy", xid=event.xid, gpu=uuid)
                    self._mark(uuid, event.xid)


@dataclass(slots=True)
class XidSource:
    """A :class:`DeviceSource` whose GPUs the monitor's marks make unhealthy."""

    inner: DeviceSource
    monitor: XidMonitor

    def read(self) -> Inventory:
        inventory = self.inner.read()
        marked = self.monitor.unhealthy()
        if not marked:
            return inventory
        return replace(inventory, gpus=tuple(replace(gpu, healthy=False) if gpu.uuid in marked
                                             else gpu for gpu in inventory.gpus))
