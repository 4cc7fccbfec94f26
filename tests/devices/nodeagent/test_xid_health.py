"""GPU health from XID events, and SIGHUP restarting the plugin.

Matches HAMi ``pkg/device-plugin/nvidiadevice/nvinternal/rm/health.go`` (NVIDIA's
``checkHealth``: lines 94-128 register the events, 142-191 classify them, 238-271
``getHealthCheckXids``), volcano-sh/devices ``pkg/plugin/nvidia/nvidia.go:105-178`` (GPU
share's ignored XIDs) and HAMi ``cmd/device-plugin/nvidia/main.go:324-335`` (SIGHUP restarts
the plugins; other signals end the process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.node.inventory import FakeSource, Inventory
from scheduler.devices.node.xid import (
    APPLICATION_XIDS,
    GPUSHARE_APPLICATION_XIDS,
    FakeEvents,
    NvmlEvents,
    XidMonitor,
    XidPolicy,
    XidSource,
)
from tests.apiserver import start_standalone
from tests.devices.nodeagent.conftest import Running, inventory
from tests.devices.nodeagent.fakekubelet import FakeKubelet

ROOT = Path(__file__).resolve().parents[3]
INV = inventory(gpus=2)
A, B = INV.gpus[0].uuid, INV.gpus[1].uuid


# -- which XIDs count ------------------------------------------------------------------------
@pytest.mark.parametrize(("env", "xid", "counts"), [
    ({}, 79, True), ({}, 48, True), ({}, 13, False), ({}, 31, False), ({}, 43, False),
    ({}, 45, False), ({}, 68, False), ({}, 109, False),
    ({"DP_DISABLE_HEALTHCHECKS": "48,79"}, 79, False),
    ({"DP_DISABLE_HEALTHCHECKS": "48, bogus"}, 63, True),
    ({"DP_ENABLE_HEALTHCHECKS": "31"}, 31, True),
    ({"DP_ENABLE_HEALTHCHECKS": "all"}, 13, True),
])
def test_which_xids_make_a_card_unhealthy(env: dict[str, str], xid: int, counts: bool) -> None:
    """health.go:238-298: application XIDs skipped, DP_DISABLE_HEALTHCHECKS adds to them,
    DP_ENABLE_HEALTHCHECKS wins over both."""
    assert XidPolicy.from_env(env).counts(xid) is counts


def test_all_disabled_watches_nothing() -> None:
    """health.go:61-64: ``all``/``xids`` disable the check; no event set is made."""
    for value in ("all", "xids", "XIDS"):
        policy = XidPolicy.from_env({"DP_DISABLE_HEALTHCHECKS": value})
        events = FakeEvents()
        XidMonitor(events=events, policy=policy).start([A])
        assert policy.all_disabled and events.registered == []


def test_gpu_share_ignores_only_volcano_s_three() -> None:
    """volcano-sh/devices nvidia.go:153: 31, 43 and 45 are the application errors."""
    policy = XidPolicy.from_env({}, GPUSHARE_APPLICATION_XIDS)
    assert [x for x in APPLICATION_XIDS if policy.counts(x)] == [13, 68, 109]


# -- the monitor -----------------------------------------------------------------------------
def _monitor(events: FakeEvents, *, recover_after: float = 0.0,
             clock: Callable[[], float] = time.monotonic) -> XidMonitor:
    monitor = XidMonitor(events=events, policy=XidPolicy.from_env({}),
                         recover_after=recover_after, clock=clock, wait_timeout=0.01)
    monitor.start([A, B])
    return monitor


def _until(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_critical_xid_marks_the_card_application_and_ecc_events_do_not() -> None:
    """health.go:154-162 (non-XID events and disabled XIDs skipped), 175-191 (the card the
    event names is unhealthy)."""
    events = FakeEvents()
    monitor = _monitor(events)
    try:
        events.emit(A, 31)
        events.emit(B, 0, event_type=0x2)  # double bit ECC: registered, then skipped
        events.emit(A, 79)
        assert _until(lambda: monitor.unhealthy() == {A: 79})
        read = XidSource(FakeSource(INV), monitor).read()
        assert [g.healthy for g in read.gpus] == [False, True]
    finally:
        monitor.stop()


def test_an_event_without_a_card_and_a_failed_wait_mark_every_card() -> None:
    """health.go:146-151 (wait error) and 165-173 (no UUID): every device unhealthy."""
    events = FakeEvents()
    monitor = _monitor(events)
    try:
        events.emit(None, 79)
        assert _until(lambda: set(monitor.unhealthy()) == {A, B})
        monitor.reset()
        assert monitor.unhealthy() == {} and len(events.registered) == 2
        events.fail(OSError("NVML gone"))
        assert _until(lambda: set(monitor.unhealthy()) == {A, B})
    finally:
        monitor.stop()


def test_a_card_whose_events_cannot_be_registered_is_unhealthy() -> None:
    """health.go:106-127: no handle, no supported types or a failed registration."""
    monitor = _monitor(FakeEvents(unwatchable=[B]))
    try:
        assert monitor.unhealthy() == {B: -1}
    finally:
        monitor.stop()


def test_recovery_only_when_asked_and_after_quiet_seconds() -> None:
    """The peers never recover (HAMi ``nvinternal/plugin/server.go:619``); with
    ``recover_after`` a card is healthy again after that long without a critical XID."""
    now = [100.0]
    events = FakeEvents()
    never, later = _monitor(events), _monitor(FakeEvents(), recover_after=30.0,
                                              clock=lambda: now[0])
    try:
        events.emit(A, 79)
        later.events.emit(A, 79)  # type: ignore[attr-defined]
        assert _until(lambda: A in never.unhealthy() and A in later.unhealthy())
        now[0] += 29
        assert A in later.unhealthy()
        now[0] += 1
        assert later.unhealthy() == {} and A in never.unhealthy()
    finally:
        never.stop()
        later.stop()


# -- NVML's event set ------------------------------------------------------------------------
class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNvml:
    """The pynvml calls the event source makes, over a scripted list of events."""

    def __init__(self, *, old: set[str] = frozenset(), broken: set[str] = frozenset()) -> None:
        self.old, self.broken = old, broken
        self.registered: dict[str, int] = {}
        self.pending: list[tuple[str | None, int, int]] = []
        self.calls: list[str] = []

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlEventSetCreate(self) -> str:
        return "set"

    def nvmlEventSetFree(self, event_set: str) -> None:
        self.calls.append("free")

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        if uuid in self.broken:
            raise NVMLError(2)
        return f"handle:{uuid}"

    def nvmlDeviceGetSupportedEventTypes(self, handle: str) -> int:
        return 0x1 | 0x2 | 0x8 | 0x10

    def nvmlDeviceRegisterEvents(self, handle: str, mask: int, event_set: str) -> None:
        uuid = handle.removeprefix("handle:")
        if uuid in self.old:
            raise NVMLError(3)  # NVML_ERROR_NOT_SUPPORTED
        self.registered[uuid] = mask

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> Any:
        if not self.pending:
            raise NVMLError(10)  # NVML_ERROR_TIMEOUT
        uuid, event_type, data = self.pending.pop(0)
        return type("Data", (), {"device": f"handle:{uuid}" if uuid else None,
                                 "eventType": event_type, "eventData": data})()

    def nvmlDeviceGetUUID(self, handle: str | None) -> bytes:
        if handle is None:
            raise NVMLError(999)
        return handle.removeprefix("handle:").encode()


def test_nvml_events_register_xid_and_ecc_and_read_events() -> None:
    """health.go:94 (mask: XID critical and both ECC types, as far as supported), 120-127
    (too old: watched by polling only; other errors: unhealthy), 142-145 (timeout)."""
    nvml = FakeNvml(old={B}, broken={"GPU-gone"})
    events = NvmlEvents(nvml=nvml, error=NVMLError)
    assert events.register([A, B, "GPU-gone"]) == ["GPU-gone"]
    assert nvml.registered == {A: 0x8 | 0x1 | 0x2}
    assert events.wait(0.01) is None
    nvml.pending += [(A, 0x8, 79), (None, 0x8, 48)]
    first, second = events.wait(0.01), events.wait(0.01)
    assert first is not None and (first.uuid, first.xid) == (A, 79)
    assert second is not None and second.uuid is None
    nvml.pending.append(("x", 0x8, 1))
    nvml.nvmlEventSetWait_v2 = lambda *_: (_ for _ in ()).throw(NVMLError(999))  # type: ignore[method-assign]
    with pytest.raises(NVMLError):
        events.wait(0.01)
    events.close()
    assert nvml.calls == ["init", "free", "shutdown"]


# -- the agent -------------------------------------------------------------------------------
def test_agent_reports_an_xid_card_unhealthy_and_sighup_restart_brings_it_back(
        start_agent: Callable[..., Running], kubelet: FakeKubelet) -> None:
    """The card leaves ``ListAndWatch`` within the health interval; the restart (HAMi
    main.go:329-331 ``goto restart``) registers every endpoint again with fresh health."""
    events = FakeEvents()
    running = start_agent(DeviceConfig(vgpu=True), events=events, split_count=2)
    resource = "volcano.sh/vgpu-number"
    assert kubelet.wait_registered({resource})
    assert len(kubelet.healthy(resource)) == 4
    events.emit(A, 79)
    assert kubelet.wait(lambda: len(kubelet.healthy(resource)) == 2, timeout=3)
    assert all(not i.startswith(A) for i in kubelet.healthy(resource))
    before = len(kubelet.registrations)
    running.agent.restart()
    assert kubelet.wait(lambda: len(kubelet.registrations) > before
                        and len(kubelet.healthy(resource)) == 4, timeout=5)
    assert events.registered == [[A, B], [A, B]]


@pytest.fixture
def agent_process(tmp_path: Path, socket_dir: str) -> Iterator[tuple[subprocess.Popen[bytes],
                                                                     FakeKubelet, Path]]:
    kubeconfig = tmp_path / "kubeconfig"
    double = start_standalone(kubeconfig)
    kubelet = FakeKubelet(socket_dir)
    kubelet.start()
    log = tmp_path / "agent.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "scheduler", "node-agent", "--kubeconfig", str(kubeconfig),
             "--node-name", "gpu-1", "--kubelet-dir", socket_dir, "--gpu-share",
             "--fake-gpus", "1", "--fake-gpu-memory", "1Gi"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield process, kubelet, log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
        kubelet.stop()
        double.stop()


def test_sighup_restarts_the_plugin_and_the_agent_goes_on(
        agent_process: tuple[subprocess.Popen[bytes], FakeKubelet, Path]) -> None:
    process, kubelet, log = agent_process
    assert kubelet.wait_registered({"volcano.sh/gpu-memory"}, timeout=20), log.read_text()
    before = len(kubelet.registrations)
    process.send_signal(signal.SIGHUP)
    assert kubelet.wait(lambda: len(kubelet.registrations) > before, timeout=10), \
        log.read_text()
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(10) == 0, log.read_text()


def test_xid_source_leaves_an_inventory_without_marks_alone() -> None:
    monitor = _monitor(FakeEvents())
    try:
        source = FakeSource(INV)
        assert XidSource(source, monitor).read() == source.read()
        assert isinstance(source.read(), Inventory)
    finally:
        monitor.stop()
