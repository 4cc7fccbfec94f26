"""A fake kubelet for the node agent's tests: the device manager's side of the v1beta1 API.

It serves ``Registration`` on ``<dir>/kubelet.sock``; for each registration it connects to the
plugin's endpoint, opens ``ListAndWatch`` and keeps the latest device list; ``allocate`` does
what kubelet's device manager does for one container: take as many healthy IDs it thinks free
(asking ``GetPreferredAllocation`` first when the plugin offers it), call ``Allocate`` and book
the IDs. ``restart`` is a kubelet restart: every socket in the directory is deleted and
``kubelet.sock`` comes back as a new file, which a plugin must notice and register again.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc

from scheduler.devices.node.kubeletapi import api_pb2 as api
from scheduler.devices.node.kubeletapi import api_pb2_grpc as api_grpc


@dataclass
class Plugin:
    """One registered resource as kubelet sees it."""

    resource: str
    endpoint: str
    options: api.DevicePluginOptions
    channel: grpc.Channel
    stub: api_grpc.DevicePluginStub
    devices: dict[str, str] = field(default_factory=dict)
    """ID → health, from the latest ListAndWatch answer."""
    updates: int = 0
    used: set[str] = field(default_factory=set)
    stream: Any = None


class _Registration(api_grpc.RegistrationServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self.kubelet = kubelet

    def Register(self, request: api.RegisterRequest, context: Any) -> api.Empty:
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"version {request.version}")
        self.kubelet._connect(request)
        return api.Empty()


class FakeKubelet:
    def __init__(self, directory: str,
                 on_devices: Callable[[str, int], None] | None = None) -> None:
        self.directory = directory
        self.on_devices = on_devices
        """Called with (resource, healthy count) after each ListAndWatch answer: what kubelet
        writes into the Node's capacity and allocatable."""
        self.plugins: dict[str, Plugin] = {}
        self.registrations: list[tuple[str, str, float]] = []
        self._lock = threading.Condition()
        self._server: grpc.Server | None = None

    @property
    def socket(self) -> str:
        return os.path.join(self.directory, "kubelet.sock")

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server

    def stop(self) -> None:
        for plugin in self.plugins.values():
            if plugin.stream is not None:
                plugin.stream.cancel()
            plugin.channel.close()
        self.plugins.clear()
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None

    def restart(self) -> None:
        """What a kubelet restart does to the plugin directory."""
        self.stop()
        for name in os.listdir(self.directory):
            if name.endswith(".sock") or name == "kubelet.sock":
                os.unlink(os.path.join(self.directory, name))
        self.start()

    # -- registration and ListAndWatch ----------------------------------------------------
    def _connect(self, request: api.RegisterRequest) -> None:
        channel = grpc.insecure_channel(f"unix://{os.path.join(self.directory, request.endpoint)}")
        plugin = Plugin(resource=request.resource_name, endpoint=request.endpoint,
                        options=request.options, channel=channel,
                        stub=api_grpc.DevicePluginStub(channel))
        with self._lock:
            old = self.plugins.get(request.resource_name)
            if old is not None:
                plugin.used = old.used  # kubelet keeps its books across re-registration
                if old.stream is not None:
                    old.stream.cancel()
            self.plugins[request.resource_name] = plugin
            self.registrations.append((request.resource_name, request.endpoint, time.monotonic()))
            self._lock.notify_all()
        threading.Thread(target=self._watch, args=(plugin,), daemon=True).start()

    def _watch(self, plugin: Plugin) -> None:
        try:
            plugin.stream = plugin.stub.ListAndWatch(api.Empty())
            for response in plugin.stream:
                healthy = sum(d.health == "Healthy" for d in response.devices)
                if self.on_devices is not None:
                    self.on_devices(plugin.resource, healthy)
                with self._lock:
                    plugin.devices = {d.ID: d.health for d in response.devices}
                    plugin.updates += 1
                    self._lock.notify_all()
        except grpc.RpcError:
            return  # the plugin went away or the stream was cancelled

    def wait(self, check: Callable[[], bool], timeout: float = 5.0) -> bool:
        with self._lock:
            return self._lock.wait_for(check, timeout=timeout)

    def wait_registered(self, resources: set[str], timeout: float = 5.0) -> bool:
        return self.wait(lambda: resources <= {r for r, p in self.plugins.items()
                                               if p.updates > 0}, timeout)

    def healthy(self, resource: str) -> list[str]:
        with self._lock:
            plugin = self.plugins[resource]
            return [i for i, health in plugin.devices.items() if health == "Healthy"]

    # -- admission ------------------------------------------------------------------------
    def allocate(self, resource: str, count: int, *, preferred: bool = True
                 ) -> api.ContainerAllocateResponse:
        """Allocate ``count`` devices of ``resource`` for one container; raises
        ``grpc.RpcError`` as the plugin answers."""
        with self._lock:
            plugin = self.plugins[resource]
            free = [i for i, h in plugin.devices.items() if h == "Healthy" and i not in plugin.used]
        if len(free) < count:
            raise AssertionError(f"kubelet: {resource}: {len(free)} free, {count} asked")
        chosen = free[:count]
        if preferred and plugin.options.get_preferred_allocation_available:
            answer = plugin.stub.GetPreferredAllocation(api.PreferredAllocationRequest(
                container_requests=[api.ContainerPreferredAllocationRequest(
                    available_deviceIDs=free, allocation_size=count)]), timeout=5)
            picked = list(answer.container_responses[0].deviceIDs)
            if len(picked) == count and set(picked) <= set(free):
                chosen = picked
        response = plugin.stub.Allocate(api.AllocateRequest(container_requests=[
            api.ContainerAllocateRequest(devices_ids=chosen)]), timeout=5)
        with self._lock:
            plugin.used.update(chosen)
        return response.container_responses[0]
