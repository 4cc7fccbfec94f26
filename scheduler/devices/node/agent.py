"""``lahar node-agent``'s core: the device plugin endpoints, the health loop and the reporter.

:class:`NodeAgent` starts one device-plugin server per enabled resource and registers them
with kubelet (:mod:`~scheduler.devices.node.plugin`), then checks device health every
``health_interval`` seconds: a change wakes every ``ListAndWatch`` stream and reports the node
at once; otherwise it reports every ``report_period`` seconds
(:mod:`~scheduler.devices.node.reporter`). Every API server call goes through ``access``
(:class:`AgentAccess`), which ``scheduler.cluster.kube.nodeaccess`` implements over the
Kubernetes client and the tests implement in memory.

With an event source (NVML's, or a fake) a :class:`~scheduler.devices.node.xid.XidMonitor`
marks cards with critical XIDs unhealthy over what the source reads. :meth:`NodeAgent.restart`
(SIGHUP) is the peers' plugin restart: the XID marks are forgotten, the cards watched again,
and every endpoint served and registered with kubelet again; the process goes on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from scheduler.devices.node.allocate import Allocator
from scheduler.devices.node.handshake import HandshakeAccess
from scheduler.devices.node.inventory import DeviceSource
from scheduler.devices.node.modes import mode_answer
from scheduler.devices.node.plugin import DevicePlugins, DeviceState
from scheduler.devices.node.reporter import ReportAccess, Reporter
from scheduler.devices.node.resources import GPUSHARE, AgentConfig, endpoints
from scheduler.devices.node.xid import (
    APPLICATION_XIDS,
    GPUSHARE_APPLICATION_XIDS,
    EventSource,
    XidMonitor,
    XidPolicy,
    XidSource,
)

__all__ = ["AgentAccess", "NodeAgent"]

log = structlog.get_logger("lahar.nodeagent")


class AgentAccess(HandshakeAccess, ReportAccess, Protocol):
    """Everything the agent asks of the API server."""


@dataclass(slots=True)
class NodeAgent:
    config: AgentConfig
    source: DeviceSource
    access: AgentAccess
    kubelet_dir: str
    checkpoint_path: str = ""
    health_interval: float = 0.5
    report_period: float = 60.0
    clock: Callable[[], float] = time.time
    new_id: Callable[[], str] | None = None
    events: EventSource | None = None
    """XID events of the cards (None: health by polling the source only)."""
    xid_recovery: float = 0.0
    """Seconds without a critical XID after which a card is healthy again (0: never)."""
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    monitor: XidMonitor | None = None
    state: DeviceState | None = None
    allocator: Allocator | None = None
    plugins: DevicePlugins | None = None
    reporter: Reporter | None = None
    mig: Any = None
    """vGPU ``mig`` mode: where the cards' MIG devices come from (:mod:`.modes`)."""
    driver_root: str = "/"
    cdi: Any = None
    """The CDI spec writer (``--cdi``, :mod:`.cdi`)."""
    metrics: Any = None
    """The ``/metrics`` server (``--metrics-address``, :mod:`.metrics`)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    reported: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self.config.check()
        served = endpoints(self.config)
        source: DeviceSource = self.source
        if self.events is not None:
            ignored = (GPUSHARE_APPLICATION_XIDS
                       if all(e.family == GPUSHARE for e in served) else APPLICATION_XIDS)
            self.monitor = XidMonitor(events=self.events,
                                      policy=XidPolicy.from_env(self.environ, ignored),
                                      recover_after=self.xid_recovery)
            self.monitor.start([gpu.uuid for gpu in self.source.read().gpus])
            source = XidSource(self.source, self.monitor)
        self.state = state = DeviceState(source)
        self.allocator = Allocator(access=self.access, config=self.config,
                                   inventory=state.inventory, clock=self.clock)
        if self.new_id is not None:
            self.allocator.new_id = self.new_id
        self.allocator.mig = self.mig
        self.allocator.mode_answer = mode_answer
        self._start_extras(state)
        self.reporter = Reporter(access=self.access, config=self.config, endpoints=served,
                                 checkpoint_path=self.checkpoint_path, clock=self.clock)
        self.plugins = DevicePlugins(endpoints=served, state=state, allocator=self.allocator,
                                     config=self.config, kubelet_dir=self.kubelet_dir)
        self.plugins.start()
        self._thread = threading.Thread(target=self._loop, name="node-agent", daemon=True)
        self._thread.start()
        log.info("node agent started", node=self.config.node_name,
                 resources=[e.resource for e in served],
                 gpus=len(state.inventory().gpus), nics=len(state.inventory().nics))

    def _start_extras(self, state: DeviceState) -> None:
        """The CDI spec (written now and whenever the inventory changes)."""
        if self.config.cdi and self.cdi is None:
            from scheduler.devices.node.cdi import CdiSpecWriter
            from scheduler.devices.node.modes import mig_by_card

            mig = self.mig
            self.cdi = CdiSpecWriter(cdi_root=self.config.cdi_root, driver_root=self.driver_root,
                                     mig=(lambda inv: mig_by_card(mig, inv)) if mig else None)
        if self.cdi is not None:
            self._sync_cdi(state.inventory())

    def _sync_cdi(self, inventory: Any) -> None:
        try:
            if self.cdi.sync(inventory):
                log.info("CDI spec written", path=self.cdi.path)
        except OSError as exc:
            log.warning("could not write the CDI spec", path=self.cdi.path, error=str(exc))

    def stop(self) -> None:
        if self.metrics is not None:
            self.metrics.stop()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        if self.plugins is not None:
            self.plugins.stop()
        if self.monitor is not None:
            self.monitor.stop()

    def restart(self) -> None:
        """Fresh device health and every endpoint served and registered again."""
        log.info("restarting the device plugin", node=self.config.node_name)
        if self.monitor is not None:
            self.monitor.reset()
        if self.state is not None:
            try:
                self.state.refresh()
            except Exception as exc:  # NVML hiccup: the health loop reads it again
                log.warning("health check failed", error=str(exc))
        if self.plugins is not None:
            self.plugins.restart()

    def wait(self, stop: threading.Event, restart: threading.Event | None = None) -> None:
        """Run until ``stop`` is set; restart the plugin whenever ``restart`` is set (signal
        handlers set both)."""
        try:
            while not stop.wait(0.2):
                if restart is not None and restart.is_set():
                    restart.clear()
                    self.restart()
        finally:
            self.stop()

    def _loop(self) -> None:
        assert self.state is not None and self.reporter is not None
        last = float("-inf")
        while not self._stop.is_set():
            changed = False
            try:
                changed = self.state.refresh()
            except Exception as exc:  # NVML hiccup: keep the last inventory
                log.warning("health check failed", error=str(exc))
            if changed and self.cdi is not None:
                self._sync_cdi(self.state.inventory())
            if changed:
                log.info("device health changed", unhealthy=[
                    device for device, healthy in self.state.inventory().health() if not healthy])
            now = time.monotonic()
            if changed or now - last >= self.report_period:
                self.reporter.report(self.state.inventory())
                self.reported.set()
                last = now
            self._stop.wait(self.health_interval)
