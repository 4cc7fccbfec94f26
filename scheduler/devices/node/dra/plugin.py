"""The DRA kubelet plugin's two gRPC servers: registration and the DRA node service.

Kubelet's plugin watcher finds ``<registry dir>/<driver>-reg.sock`` (``pluginregistration``),
calls ``GetInfo`` (type ``DRAPlugin``, the driver name, the DRA socket and the services
served: ``v1.DRAPlugin`` and ``v1beta1.DRAPlugin``, newest first as the kubelet plugin helper
of ``k8s.io/dynamic-resource-allocation/kubeletplugin`` lists them) and then
``NotifyRegistrationStatus``. It then calls ``NodePrepareResources`` /
``NodeUnprepareResources`` on ``<plugins dir>/<driver>/dra.sock`` in the version it chose;
both versions have the same messages and are served by the same code.

A claim that cannot be prepared gets its ``error`` in the answer (kubelet retries it and reports
the text on the pod); the call itself succeeds, so the other claims of the call are answered.
When a socket disappears (kubelet wiped its plugin directories) the servers are started again.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import structlog

from scheduler.devices.node.dra.kubeletapi import dra_v1_pb2 as v1
from scheduler.devices.node.dra.kubeletapi import dra_v1_pb2_grpc as v1_grpc
from scheduler.devices.node.dra.kubeletapi import dra_v1beta1_pb2 as v1beta1
from scheduler.devices.node.dra.kubeletapi import dra_v1beta1_pb2_grpc as v1beta1_grpc
from scheduler.devices.node.dra.kubeletapi import registration_pb2 as reg
from scheduler.devices.node.dra.kubeletapi import registration_pb2_grpc as reg_grpc
from scheduler.devices.node.dra.prepare import PrepareError, Preparer

__all__ = ["DEFAULT_PLUGINS_DIR", "DEFAULT_REGISTRY_DIR", "SERVICES", "DraPlugin"]

log = structlog.get_logger("lahar.nodeagent")

DEFAULT_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
DEFAULT_PLUGINS_DIR = "/var/lib/kubelet/plugins"
PLUGIN_TYPE = "DRAPlugin"
SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")


class _Registration(reg_grpc.RegistrationServicer):
    def __init__(self, plugin: DraPlugin) -> None:
        self.plugin = plugin

    def GetInfo(self, request: reg.InfoRequest, context: Any) -> reg.PluginInfo:
        return reg.PluginInfo(type=PLUGIN_TYPE, name=self.plugin.driver,
                              endpoint=self.plugin.dra_socket,
                              supported_versions=list(SERVICES))

    def NotifyRegistrationStatus(self, request: reg.RegistrationStatus, context: Any
                                 ) -> reg.RegistrationStatusResponse:
        if request.plugin_registered:
            log.info("registered with kubelet as a DRA plugin", driver=self.plugin.driver)
            self.plugin.registered.set()
        else:
            log.error("kubelet refused the DRA plugin", driver=self.plugin.driver,
                      error=request.error)
            self.plugin.registration_error = request.error
        return reg.RegistrationStatusResponse()


def _servicer(api: Any, base: type, preparer: Preparer) -> Any:
    class Servicer(base):
        def NodePrepareResources(self, request: Any, context: Any) -> Any:
            response = api.NodePrepareResourcesResponse()
            for claim in request.claims:
                entry = response.claims[claim.uid]
                try:
                    prepared = preparer.prepare(claim.namespace, claim.name, claim.uid)
                except PrepareError as exc:
                    log.warning("cannot prepare claim", claim=f"{claim.namespace}/{claim.name}",
                                error=str(exc))
                    entry.error = str(exc)
                    continue
                for device in prepared:
                    entry.devices.append(api.Device(
                        request_names=list(device.requests), pool_name=device.pool,
                        device_name=device.device, cdi_device_ids=list(device.cdi_ids),
                        share_id=device.share_id))
            return response

        def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
            response = api.NodeUnprepareResourcesResponse()
            for claim in request.claims:
                entry = response.claims[claim.uid]
                try:
                    preparer.unprepare(claim.uid)
                except OSError as exc:
                    entry.error = f"ResourceClaim {claim.namespace}/{claim.name}: {exc}"
            return response

    return Servicer()


@dataclass(slots=True)
class DraPlugin:
    driver: str
    preparer: Preparer
    registry_dir: str = DEFAULT_REGISTRY_DIR
    plugins_dir: str = DEFAULT_PLUGINS_DIR
    poll: float = 0.5
    on_start: Callable[[], None] | None = None
    registered: threading.Event = field(default_factory=threading.Event)
    registration_error: str = ""
    starts: int = 0
    _servers: list[grpc.Server] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def registration_socket(self) -> str:
        return os.path.join(self.registry_dir, f"{self.driver}-reg.sock")

    @property
    def dra_socket(self) -> str:
        return os.path.join(self.plugins_dir, self.driver, "dra.sock")

    def start(self) -> None:
        self._serve()
        self._thread = threading.Thread(target=self._watch, name="dra-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._stop_servers()

    def _stop_servers(self) -> None:
        for server in self._servers:
            server.stop(grace=None)
        self._servers = []
        for path in (self.registration_socket, self.dra_socket):
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _serve(self) -> None:
        self._stop_servers()
        self.registered.clear()
        os.makedirs(os.path.dirname(self.dra_socket), exist_ok=True)
        os.makedirs(self.registry_dir, exist_ok=True)
        dra = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="dra"))
        v1_grpc.add_DRAPluginServicer_to_server(
            _servicer(v1, v1_grpc.DRAPluginServicer, self.preparer), dra)
        v1beta1_grpc.add_DRAPluginServicer_to_server(
            _servicer(v1beta1, v1beta1_grpc.DRAPluginServicer, self.preparer), dra)
        dra.add_insecure_port(f"unix://{self.dra_socket}")
        dra.start()
        registration = grpc.server(futures.ThreadPoolExecutor(max_workers=1,
                                                              thread_name_prefix="dra-reg"))
        reg_grpc.add_RegistrationServicer_to_server(_Registration(self), registration)
        registration.add_insecure_port(f"unix://{self.registration_socket}")
        registration.start()  # last: kubelet dials the DRA socket once it sees this one
        self._servers = [dra, registration]
        self.starts += 1
        log.info("serving the DRA plugin", driver=self.driver, socket=self.dra_socket,
                 registration=self.registration_socket)
        if self.on_start is not None:
            self.on_start()

    def _watch(self) -> None:
        while not self._stopped.wait(self.poll):
            if not (os.path.exists(self.registration_socket)
                    and os.path.exists(self.dra_socket)):
                log.info("a DRA plugin socket is gone: serving again", driver=self.driver)
                self._serve()
