"""A node's ``Device`` object (``scheduling.koordinator.sh/v1alpha1``) built from NVML.

What koordlet reports for NVIDIA GPUs: per GPU its UUID (the allocation ``id``), NVML minor
number (``/dev/nvidiaN``, the ledger key), total memory, PCI bus id, NUMA node (sysfs; -1 is
reported as 0) and PCIe root complex (the ``pciXXXX:YY`` directory above the device in
sysfs), with ``gpu-core`` 100, ``gpu-memory`` in bytes and ``gpu-memory-ratio`` 100. A GPU
NVML cannot read is reported unhealthy. The object's labels carry the vendor, the model (NVML
name without a leading "NVIDIA ", spaces as dashes; empty when the GPUs differ) and the
driver version. NVML and sysfs come in through narrow seams so the logic is tested without a
GPU; the real ones are ``pynvml`` (package ``nvidia-ml-py``) and ``/sys``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from scheduler.devices.finegrained.names import (
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
)

__all__ = ["DRIVER_LABEL", "NoGpus", "Nvml", "Sysfs", "build_device_object",
           "keep_transition_times", "load_nvml", "normalise_bus_id", "unhealthy_condition"]

DRIVER_LABEL = "node.koordinator.sh/gpu-driver-version"


class NoGpus(Exception):
    """This machine has no NVIDIA GPU NVML can see (no driver, no device)."""


class Nvml(Protocol):
    """The part of ``pynvml`` the reporter uses."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...
    def nvmlSystemGetDriverVersion(self) -> str | bytes: ...


@dataclass(frozen=True, slots=True)
class Sysfs:
    """Reads the PCI topology of a device from ``root`` (``/sys`` on a real node)."""

    root: str = "/sys"

    def numa_node(self, bus_id: str) -> int:
        try:
            with open(os.path.join(self.root, "bus/pci/devices", bus_id, "numa_node")) as f:
                value = int(f.read().strip())
        except (OSError, ValueError):
            return 0
        return max(value, 0)  # -1 (no NUMA information) is reported as node 0

    def pcie_root(self, bus_id: str) -> str:
        """The root complex directory (``pci0000:3a``) above the device, or ''."""
        link = os.path.join(self.root, "bus/pci/devices", bus_id)
        try:
            target = os.path.realpath(link)
        except OSError:
            return ""
        parts = target.split(os.sep)
        for part in parts:
            if part.startswith("pci") and ":" in part:
                return part
        return ""


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def normalise_bus_id(bus_id: str | bytes) -> str:
    """NVML's ``00000000:3B:00.0`` as sysfs spells it: ``0000:3b:00.0``."""
    text = _text(bus_id).strip().lower()
    domain, _, rest = text.partition(":")
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:
        return text


def _model(name: str) -> str:
    return name.removeprefix("NVIDIA ").strip().replace(" ", "-")


def unhealthy_condition(*, reason: str, message: str, now: float) -> dict[str, str]:
    """A device's ``Healthy=False`` condition. The Device CRD (koordinator's
    ``apis/scheduling/v1alpha1/device_types.go``, ``Conditions []metav1.Condition``) requires
    ``type``, ``status``, ``lastTransitionTime``, ``reason`` and ``message``: without the time
    the API server refuses the whole object (422)."""
    stamp = datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": "Healthy", "status": "False", "lastTransitionTime": stamp,
            "reason": reason, "message": message}


def keep_transition_times(old: Sequence[Mapping[str, Any]], new: Sequence[dict[str, Any]]
                          ) -> None:
    """Give each condition of ``new`` the ``lastTransitionTime`` the same device's condition
    of that type had in ``old`` when its status is unchanged (``meta.SetStatusCondition``), so
    a card that stays broken does not rewrite its Device object every period."""
    before = {(str(d.get("type")), d.get("minor"), str(c.get("type"))): c
              for d in old if isinstance(d, Mapping)
              for c in d.get("conditions") or [] if isinstance(c, Mapping)}
    for device in new:
        for condition in device.get("conditions") or []:
            prior = before.get((str(device.get("type")), device.get("minor"),
                                str(condition.get("type"))))
            if (prior is not None and prior.get("status") == condition.get("status")
                    and prior.get("lastTransitionTime")):
                condition["lastTransitionTime"] = prior["lastTransitionTime"]


def build_device_object(node_name: str, nvml: Nvml, *, sysfs: Sysfs | None = None,
                        error: type[BaseException] = Exception,
                        now: float | None = None) -> dict[str, Any]:
    """The Device object of this node; raises :class:`NoGpus` when NVML sees none.

    ``error`` is the NVML error type (``pynvml.NVMLError``): a device that raises it is
    reported unhealthy, an init failure means no GPUs."""
    sysfs = sysfs or Sysfs()
    try:
        nvml.nvmlInit()
    except error as exc:
        raise NoGpus(f"NVML cannot start ({exc}): no NVIDIA driver or GPU") from None
    try:
        count = nvml.nvmlDeviceGetCount()
        if count <= 0:
            raise NoGpus("NVML reports no GPU")
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        devices: list[dict[str, Any]] = []
        models: set[str] = set()
        for index in range(count):
            devices.append(_gpu(nvml, index, sysfs, error, models,
                                now=time.time() if now is None else now))
    finally:
        nvml.nvmlShutdown()
    labels = {LABEL_GPU_VENDOR: "nvidia"}  # koordlet's fillGPUDevice: unknown values left out
    if len(models) == 1 and "" not in models:
        labels[LABEL_GPU_MODEL] = models.pop()
    if driver:
        labels[DRIVER_LABEL] = driver
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
            "metadata": {"name": node_name, "labels": labels},
            "spec": {"devices": sorted(devices, key=lambda d: d.get("minor", -1))}}


def _gpu(nvml: Nvml, index: int, sysfs: Sysfs, error: type[BaseException],
         models: set[str], *, now: float) -> dict[str, Any]:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
        memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
        bus_id = normalise_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId)
        models.add(_model(_text(nvml.nvmlDeviceGetName(handle))))
    except error as exc:
        return {"type": "gpu", "minor": index, "health": False,
                "conditions": [unhealthy_condition(reason="NVMLError", message=str(exc),
                                                   now=now)]}
    numa, pcie = sysfs.numa_node(bus_id), sysfs.pcie_root(bus_id)
    entry: dict[str, Any] = {
        "type": "gpu", "id": uuid, "minor": minor, "health": True,
        "resources": {GPU_CORE: "100", GPU_MEMORY: str(memory), GPU_MEMORY_RATIO: "100"},
    }
    if pcie and bus_id:  # koordlet's buildGPUDevice: no topology unless all of it is known
        entry["topology"] = {"socketID": -1, "nodeID": numa, "pcieID": pcie, "busID": bus_id}
    return entry


def load_nvml() -> tuple[Nvml, type[BaseException]]:
    """``pynvml`` and its error type; raises ImportError when nvidia-ml-py is missing."""
    import pynvml  # type: ignore[import-not-found,unused-ignore]

    return pynvml, pynvml.NVMLError


Loader = Callable[[], tuple[Nvml, type[BaseException]]]
