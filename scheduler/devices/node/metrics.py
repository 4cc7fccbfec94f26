"""Per-container vGPU usage as Prometheus metrics, under the names HAMi's vGPUmonitor uses.

With ``--metrics-address HOST:PORT`` the agent serves ``/metrics``. At every scrape it reads
the HAMi-core shared region of each container (:mod:`.sharedregion`; the ``.cache`` file in
``<hook>/vgpu/containers/<pod UID>_<container>/``, where the agent's ``Allocate`` mounts it)
whose pod is still bound to the node, and exports what HAMi's ``cmd/vGPUmonitor/metrics.go``
exports for it, so HAMi's Grafana dashboards and WebUI read the agent unchanged:

* ``hami_vgpu_memory_used_bytes``, ``hami_vgpu_memory_limit_bytes``,
  ``hami_container_device_memory_bytes``, ``hami_container_device_utilization_ratio``,
  ``hami_vgpu_memory_context_bytes``, ``hami_vgpu_memory_module_bytes``,
  ``hami_vgpu_memory_buffer_bytes`` and, once a kernel ran,
  ``hami_container_last_kernel_elapsed_seconds``; labels ``namespace``, ``pod``,
  ``container``, ``vdevice_index``, ``device_uuid``;
* with NVML, per card ``hami_host_gpu_memory_used_bytes`` and
  ``hami_host_gpu_utilization_ratio`` (labels ``device_index``, ``device_uuid``,
  ``device_type``).

A cache file that cannot be read is skipped and counted in
``lahar_nodeagent_region_errors`` (a scrape never fails because of one container).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from scheduler.devices.node.sharedregion import RegionError, RegionUsage, read_region

__all__ = ["HostGpuStat", "MetricsServer", "VgpuCollector", "nvml_host_stats",
           "parse_address"]

log = structlog.get_logger("lahar.nodeagent")

CONTAINER_LABELS = ("namespace", "pod", "container", "vdevice_index", "device_uuid")
HOST_LABELS = ("device_index", "device_uuid", "device_type")


@dataclass(frozen=True, slots=True)
class HostGpuStat:
    index: int
    uuid: str
    type: str
    memory_used: int
    utilization: int


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


@dataclass(slots=True, eq=False)  # the registry keys collectors by identity
class VgpuCollector:
    """A prometheus-client collector over the containers directory and the node's pods."""

    containers_dir: str
    pods: Callable[[], list[dict[str, Any]]]
    host: Callable[[], list[HostGpuStat]] | None = None
    clock: Callable[[], float] = time.time
    errors: int = field(default=0)

    def usages(self) -> Iterator[tuple[Mapping[str, Any], str, RegionUsage]]:
        """(pod, container, usage) of every readable cache of a container the pod has."""
        try:
            entries = sorted(os.listdir(self.containers_dir))
        except OSError:
            return
        by_uid = {str(_meta(p).get("uid")): p for p in self.pods()}
        for entry in entries:
            uid, _, container = entry.partition("_")
            pod = by_uid.get(uid)
            names = {str(c.get("name")) for c in (pod or {}).get("spec", {}).get("containers")
                     or []}
            if pod is None or container not in names:
                continue
            directory = os.path.join(self.containers_dir, entry)
            try:
                caches = sorted(n for n in os.listdir(directory) if n.endswith(".cache"))
            except OSError:
                continue
            if not caches:
                continue  # no CUDA call yet
            path = os.path.join(directory, caches[0])
            try:
                yield pod, container, read_region(path)
            except (RegionError, OSError) as exc:
                self.errors += 1
                log.debug("vGPU cache unreadable", path=path, error=str(exc))

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> Any:
            return GaugeMetricFamily(name, doc, labels=labels)

        used = gauge("hami_vgpu_memory_used_bytes", "vGPU device memory usage in bytes",
                     CONTAINER_LABELS)
        limit = gauge("hami_vgpu_memory_limit_bytes", "vGPU device memory limit in bytes",
                      CONTAINER_LABELS)
        memory = gauge("hami_container_device_memory_bytes",
                       "Container device memory usage in bytes", CONTAINER_LABELS)
        util = gauge("hami_container_device_utilization_ratio",
                     "Container device SM utilization ratio", CONTAINER_LABELS)
        context = gauge("hami_vgpu_memory_context_bytes",
                        "Container device memory context size in bytes", CONTAINER_LABELS)
        module = gauge("hami_vgpu_memory_module_bytes",
                       "Container device memory module size in bytes", CONTAINER_LABELS)
        buffer = gauge("hami_vgpu_memory_buffer_bytes",
                       "Container device memory buffer size in bytes", CONTAINER_LABELS)
        kernel = gauge("hami_container_last_kernel_elapsed_seconds",
                       "Seconds since last kernel execution in container", CONTAINER_LABELS)
        now = int(self.clock())
        for pod, container, usage in self.usages():
            meta = _meta(pod)
            for device in usage.devices:
                labels = [str(meta.get("namespace") or "default"), str(meta.get("name")),
                          container, str(device.index), device.uuid]
                used.add_metric(labels, device.used)
                limit.add_metric(labels, device.limit)
                memory.add_metric(labels, device.used)
                util.add_metric(labels, device.sm_util)
                context.add_metric(labels, device.context)
                module.add_metric(labels, device.module)
                buffer.add_metric(labels, device.buffer)
                if usage.last_kernel_time > 0:
                    kernel.add_metric(labels, max(now - usage.last_kernel_time, 0))
        yield from (used, limit, memory, util, context, module, buffer, kernel)
        if self.host is not None:
            host_memory = gauge("hami_host_gpu_memory_used_bytes",
                                "GPU device memory usage in bytes", HOST_LABELS)
            host_util = gauge("hami_host_gpu_utilization_ratio",
                              "GPU core utilization ratio (0-100)", HOST_LABELS)
            try:
                stats = self.host()
            except Exception as exc:  # NVML hiccup: the container metrics still go out
                log.debug("host GPU stats unreadable", error=str(exc))
                stats = []
            for stat in stats:
                labels = [str(stat.index), stat.uuid, stat.type]
                host_memory.add_metric(labels, stat.memory_used)
                host_util.add_metric(labels, stat.utilization)
            yield from (host_memory, host_util)
        errors = CounterMetricFamily("lahar_nodeagent_region_errors",
                                     "HAMi-core cache files that could not be read")
        errors.add_metric([], self.errors)
        yield errors


def nvml_host_stats(nvml: Any) -> Callable[[], list[HostGpuStat]]:
    """Per card memory in use and utilisation from NVML (started by the device source)."""

    def read() -> list[HostGpuStat]:
        out = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            out.append(HostGpuStat(
                index=index, uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                type="NVIDIA-" + (name.decode() if isinstance(name, bytes) else str(name)),
                memory_used=int(nvml.nvmlDeviceGetMemoryInfo(handle).used),
                utilization=int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)))
        return out

    return read


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (all interfaces); raises ValueError naming the flag."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--metrics-address {text!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass(slots=True)
class MetricsServer:
    """``/metrics`` over the collector, in a thread (prometheus-client's HTTP server)."""

    collector: VgpuCollector
    address: str
    _server: Any = None
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1]) if self._server is not None else 0

    def start(self) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        host, port = parse_address(self.address)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector)
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        log.info("serving metrics", address=f"{host}:{self.port}")

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
