"""A fake kubelet for the DRA plugin's tests: the plugin manager and DRA manager sides.

``discover`` does what kubelet's plugin watcher does with a socket that appears in the
registry directory: dial it, ``GetInfo``, check the type, pick the newest DRA service kubelet
knows from ``supported_versions`` (``versions``: what this kubelet speaks, newest first, as
``k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin/registration.go`` chooses), dial the endpoint and
``NotifyRegistrationStatus``. ``prepare`` / ``unprepare`` call the chosen service with claims
given as (namespace, name, uid).
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass, field
from typing import Any

import grpc

from scheduler.devices.node.dra.kubeletapi import dra_v1_pb2 as v1
from scheduler.devices.node.dra.kubeletapi import dra_v1_pb2_grpc as v1_grpc
from scheduler.devices.node.dra.kubeletapi import dra_v1beta1_pb2 as v1beta1
from scheduler.devices.node.dra.kubeletapi import dra_v1beta1_pb2_grpc as v1beta1_grpc
from scheduler.devices.node.dra.kubeletapi import registration_pb2 as reg
from scheduler.devices.node.dra.kubeletapi import registration_pb2_grpc as reg_grpc

APIS = {"v1.DRAPlugin": (v1, v1_grpc), "v1beta1.DRAPlugin": (v1beta1, v1beta1_grpc)}


@dataclass
class FakeDraKubelet:
    registry_dir: str
    versions: tuple[str, ...] = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
    info: Any = None
    service: str = ""
    _channels: list[grpc.Channel] = field(default_factory=list)
    _stub: Any = None
    _api: Any = None

    def discover(self, timeout: float = 5.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := glob.glob(os.path.join(self.registry_dir, "*-reg.sock"))):
            if time.monotonic() > deadline:
                raise AssertionError(f"no registration socket in {self.registry_dir}")
            time.sleep(0.01)
        channel = grpc.insecure_channel(f"unix://{found[0]}")
        self._channels.append(channel)
        registration = reg_grpc.RegistrationStub(channel)
        self.info = registration.GetInfo(reg.InfoRequest(), timeout=5.0)
        chosen = next((v for v in self.versions if v in self.info.supported_versions), "")
        ok = self.info.type == "DRAPlugin" and bool(chosen)
        registration.NotifyRegistrationStatus(reg.RegistrationStatus(
            plugin_registered=ok, error="" if ok else "no common DRA service"), timeout=5.0)
        if ok:
            self.service = chosen
            self._api, stubs = APIS[chosen]
            dra = grpc.insecure_channel(f"unix://{self.info.endpoint}")
            self._channels.append(dra)
            self._stub = stubs.DRAPluginStub(dra)
        return self.info

    def _claims(self, claims: list[tuple[str, str, str]]) -> list[Any]:
        return [self._api.Claim(namespace=ns, name=name, uid=uid) for ns, name, uid in claims]

    def prepare(self, *claims: tuple[str, str, str]) -> dict[str, Any]:
        answer = self._stub.NodePrepareResources(
            self._api.NodePrepareResourcesRequest(claims=self._claims(list(claims))), timeout=5.0)
        return dict(answer.claims)

    def unprepare(self, *claims: tuple[str, str, str]) -> dict[str, Any]:
        answer = self._stub.NodeUnprepareResources(
            self._api.NodeUnprepareResourcesRequest(claims=self._claims(list(claims))),
            timeout=5.0)
        return dict(answer.claims)

    def close(self) -> None:
        for channel in self._channels:
            channel.close()
        self._channels = []
