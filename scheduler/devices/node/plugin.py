"""The kubelet device plugin (API ``v1beta1``) over gRPC on unix sockets.

One gRPC server per extended resource, each on its own socket in the kubelet's device
plugin directory, registered with ``kubelet.sock`` (the peers do the same: one
``NvidiaDevicePlugin`` per resource, ``Serve`` then ``Register``). ``ListAndWatch`` sends the
resource's virtual devices and sends them again whenever a device's health changes
(:class:`DeviceState` wakes every stream); ``Allocate`` and ``GetPreferredAllocation`` are
answered by :class:`~scheduler.devices.node.allocate.Allocator`.

Kubelet deletes every socket in the directory when it starts and recreates ``kubelet.sock``;
:class:`DevicePlugins` watches for that (the socket's identity changes, or one of ours
vanished) and restarts its servers and registers again, as volcano-device-plugin's ``start``
loop does on the fsnotify ``Create`` of ``kubelet.sock``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import structlog

from scheduler.devices.node.allocate import AllocationError, Allocator, ContainerAnswer
from scheduler.devices.node.inventory import DeviceSource, Inventory
from scheduler.devices.node.kubeletapi import api_pb2 as api
from scheduler.devices.node.kubeletapi import api_pb2_grpc as api_grpc
from scheduler.devices.node.resources import AgentConfig, Endpoint, virtual_devices

__all__ = ["API_VERSION", "DevicePlugins", "DeviceState", "PluginServicer", "to_response"]

log = structlog.get_logger("lahar.nodeagent")

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"


class DeviceState:
    """The current inventory; a health change wakes every ``ListAndWatch`` stream."""

    def __init__(self, source: DeviceSource) -> None:
        self.source = source
        self._inventory = source.read()
        self._version = 0
        self._changed = threading.Condition()

    def inventory(self) -> Inventory:
        return self._inventory

    @property
    def version(self) -> int:
        return self._version

    def refresh(self) -> bool:
        """Read the source again; True (and every stream woken) when health changed."""
        inventory = self.source.read()
        with self._changed:
            changed = inventory.health() != self._inventory.health()
            self._inventory = inventory
            if changed:
                self._version += 1
                self._changed.notify_all()
        return changed

    def wait(self, version: int, timeout: float) -> int:
        with self._changed:
            self._changed.wait_for(lambda: self._version != version, timeout=timeout)
            return self._version


def to_response(answers: Sequence[ContainerAnswer]) -> api.AllocateResponse:
    return api.AllocateResponse(container_responses=[
        api.ContainerAllocateResponse(
            envs=dict(answer.envs),
            mounts=[api.Mount(container_path=m.container_path, host_path=m.host_path,
                              read_only=m.read_only) for m in answer.mounts],
            devices=[api.DeviceSpec(container_path=d.container_path, host_path=d.host_path,
                                    permissions=d.permissions) for d in answer.devices],
            cdi_devices=[api.CDIDevice(name=name) for name in answer.cdi_devices])
        for answer in answers])


class PluginServicer(api_grpc.DevicePluginServicer):
    """``DevicePlugin`` for one endpoint."""

    def __init__(self, endpoint: Endpoint, state: DeviceState, allocator: Allocator,
                 config: AgentConfig, stopped: threading.Event) -> None:
        self.endpoint, self.state, self.allocator = endpoint, state, allocator
        self.config, self.stopped = config, stopped

    def devices(self) -> api.ListAndWatchResponse:
        """Every virtual device with its health; its NUMA node only with ``numa_topology``
        (HAMi's ``enableNumaTopology``, off by default: a hint changes what kubelet's
        TopologyManager admits)."""
        numa = self.config.numa_topology
        return api.ListAndWatchResponse(devices=[
            api.Device(ID=d.id, health=HEALTHY if d.healthy else UNHEALTHY,
                       topology=api.TopologyInfo(nodes=[api.NUMANode(ID=d.numa)])
                       if numa and d.numa >= 0 else None)
            for d in virtual_devices(self.endpoint, self.state.inventory(), self.config)])

    def GetDevicePluginOptions(self, request: api.Empty, context: Any
                               ) -> api.DevicePluginOptions:
        return api.DevicePluginOptions(pre_start_required=False,
                                       get_preferred_allocation_available=True)

    def ListAndWatch(self, request: api.Empty, context: Any
                     ) -> Iterator[api.ListAndWatchResponse]:
        version = self.state.version
        yield self.devices()
        while not self.stopped.is_set() and context.is_active():
            current = self.state.wait(version, timeout=0.25)
            if current != version:
                version = current
                yield self.devices()

    def Allocate(self, request: api.AllocateRequest, context: Any) -> api.AllocateResponse:
        requests = [list(r.devices_ids) for r in request.container_requests]
        try:
            answers = self.allocator.allocate(self.endpoint, requests)
        except AllocationError as exc:
            log.warning("allocate refused", resource=self.endpoint.resource, reason=str(exc))
            return _abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except Exception as exc:  # the API server is away: kubelet retries the pod later
            log.warning("allocate failed", resource=self.endpoint.resource, error=str(exc))
            return _abort(context, grpc.StatusCode.UNAVAILABLE,
                          f"node {self.config.node_name}: {self.endpoint.resource}: {exc}")
        for answer in answers:
            log.info("allocated", resource=self.endpoint.resource, pod=answer.pod,
                     container=answer.container)
        return to_response(answers)

    def GetPreferredAllocation(self, request: api.PreferredAllocationRequest, context: Any
                               ) -> api.PreferredAllocationResponse:
        return api.PreferredAllocationResponse(container_responses=[
            api.ContainerPreferredAllocationResponse(deviceIDs=self.allocator.preferred(
                self.endpoint, list(r.available_deviceIDs), list(r.must_include_deviceIDs),
                int(r.allocation_size)))
            for r in request.container_requests])

    def PreStartContainer(self, request: api.PreStartContainerRequest, context: Any
                          ) -> api.PreStartContainerResponse:
        return api.PreStartContainerResponse()


def _abort(context: Any, code: grpc.StatusCode, message: str) -> api.AllocateResponse:
    context.abort(code, message)  # raises
    raise AssertionError("unreachable")


def _identity(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


@dataclass(slots=True)
class DevicePlugins:
    """Every endpoint's server, their registration, and re-registration after a kubelet
    restart."""

    endpoints: tuple[Endpoint, ...]
    state: DeviceState
    allocator: Allocator
    config: AgentConfig
    kubelet_dir: str
    poll: float = 0.2
    on_registered: Callable[[], None] | None = None
    _servers: list[grpc.Server] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event)
    _streams_stop: threading.Event = field(default_factory=threading.Event)
    _kubelet: tuple[int, int] | None = None
    _thread: threading.Thread | None = None
    registered: threading.Event = field(default_factory=threading.Event)
    registrations: int = 0

    @property
    def kubelet_socket(self) -> str:
        return os.path.join(self.kubelet_dir, KUBELET_SOCKET)

    def start(self) -> None:
        self._restart()
        self._thread = threading.Thread(target=self._watch, name="kubelet-watch", daemon=True)
        self._thread.start()

    def restart(self) -> None:
        """Serve and register every endpoint again (SIGHUP, as the peers' restart loop)."""
        log.info("restarting the device plugin servers")
        self._restart()

    def stop(self) -> None:
        self._stopped.set()
        self._stop_servers()
        if self._thread is not None:
            self._thread.join(5.0)

    def _stop_servers(self) -> None:
        self._streams_stop.set()
        for server in self._servers:
            server.stop(grace=None)
        self._servers = []
        for endpoint in self.endpoints:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.kubelet_dir, endpoint.socket))

    def _serve(self) -> None:
        self._streams_stop = threading.Event()
        for endpoint in self.endpoints:
            path = os.path.join(self.kubelet_dir, endpoint.socket)
            with contextlib.suppress(OSError):
                os.unlink(path)
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4,
                                                            thread_name_prefix="plugin"))
            api_grpc.add_DevicePluginServicer_to_server(PluginServicer(
                endpoint, self.state, self.allocator, self.config, self._streams_stop), server)
            server.add_insecure_port(f"unix://{path}")
            server.start()
            self._servers.append(server)

    def _register(self) -> bool:
        """Register every endpoint; False when kubelet cannot be reached (retried later)."""
        try:
            with grpc.insecure_channel(f"unix://{self.kubelet_socket}") as channel:
                stub = api_grpc.RegistrationStub(channel)
                for endpoint in self.endpoints:
                    stub.Register(api.RegisterRequest(
                        version=API_VERSION, endpoint=endpoint.socket,
                        resource_name=endpoint.resource,
                        options=api.DevicePluginOptions(get_preferred_allocation_available=True)),
                        timeout=5.0)
        except grpc.RpcError as exc:
            log.warning("could not register with kubelet", socket=self.kubelet_socket,
                        error=str(exc.details() if hasattr(exc, "details") else exc))
            return False
        self.registrations += 1
        self.registered.set()
        log.info("registered with kubelet", resources=[e.resource for e in self.endpoints])
        if self.on_registered is not None:
            self.on_registered()
        return True

    def _restart(self) -> None:
        self.registered.clear()
        self._stop_servers()
        self._serve()
        self._kubelet = _identity(self.kubelet_socket)
        if self._kubelet is not None:
            self._register()
        else:  # said once per absence: the watch registers as soon as the socket appears
            log.info("waiting for kubelet", socket=self.kubelet_socket)

    def _ours_gone(self) -> bool:
        return any(not os.path.exists(os.path.join(self.kubelet_dir, e.socket))
                   for e in self.endpoints)

    def _watch(self) -> None:
        while not self._stopped.wait(self.poll):
            identity = _identity(self.kubelet_socket)
            if identity is None:
                continue
            if identity != self._kubelet or self._ours_gone():
                log.info("kubelet restarted: serving and registering again")
                self._restart()
            elif not self.registered.is_set():
                self._register()


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True
