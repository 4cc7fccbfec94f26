"""What devices this node has and whether each is healthy: from NVML and sysfs, or made up.

The node agent sees devices only through a :class:`DeviceSource`: ``read()`` returns an
:class:`Inventory` (GPUs and RDMA NICs with their topology and health) and is called at start
and at every health check. :class:`NvmlSource` reads NVML (``pynvml``, package
``nvidia-ml-py``) and sysfs, the same seams as :mod:`scheduler.devices.node.report`; a GPU NVML
cannot read is unhealthy, and so is one whose memory information NVML stops answering (how
the peers' health checks see a fallen-off card: volcano-device-plugin's ``CheckHealth``,
HAMi's ``rm/health.go``). :class:`FakeSource` makes the same inventory up —
``--fake-gpus N --fake-gpu-memory 16Gi`` or a YAML file with topology, NUMA, PCIe roots and
NICs — so the whole path (device plugin, handshake, Device object) runs in kind and in CI
with the NVML seam replaced; tests flip a fake card's health with :meth:`FakeSource.set_health`.
"""

from __future__ import annotations

import os
import threading
import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.devices.node.report import Nvml, Sysfs, normalise_bus_id

__all__ = [
    "DeviceSource",
    "FakeSource",
    "Gpu",
    "Inventory",
    "InventoryError",
    "Nic",
    "NvmlSource",
    "fake_gpus",
    "inventory_from_yaml",
    "uverbs_of",
]

MIB = 2**20


class InventoryError(ValueError):
    """A fake inventory that cannot be used (named field, named entry)."""


@dataclass(frozen=True, slots=True)
class Gpu:
    """One physical GPU."""

    index: int
    """NVML index: what ``NVIDIA_VISIBLE_DEVICES`` means by a number."""
    uuid: str
    minor: int
    """``/dev/nvidia<minor>``; the key of the Koordinator ledger."""
    memory: int
    """Bytes."""
    model: str
    """NVML's name, e.g. ``NVIDIA A100-SXM4-80GB``."""
    bus_id: str = ""
    numa: int = 0
    pcie: str = ""
    healthy: bool = True

    @property
    def memory_mib(self) -> int:
        return self.memory // MIB


@dataclass(frozen=True, slots=True)
class Nic:
    """One RDMA NIC (a physical function) and its virtual functions."""

    minor: int
    bus_id: str
    numa: int = 0
    pcie: str = ""
    vfs: tuple[str, ...] = ()
    """Bus ids of the virtual functions."""
    healthy: bool = True


@dataclass(frozen=True, slots=True)
class Inventory:
    gpus: tuple[Gpu, ...] = ()
    nics: tuple[Nic, ...] = ()
    driver: str = ""
    fake: bool = False

    def gpu_by_uuid(self, uuid: str) -> Gpu | None:
        return next((gpu for gpu in self.gpus if gpu.uuid == uuid), None)

    def gpu_by_index(self, index: int) -> Gpu | None:
        return next((gpu for gpu in self.gpus if gpu.index == index), None)

    def health(self) -> tuple[tuple[str, bool], ...]:
        """What a health change compares: every device's id and health."""
        return (*((g.uuid, g.healthy) for g in self.gpus),
                *((n.bus_id, n.healthy) for n in self.nics))


class DeviceSource(Protocol):
    def read(self) -> Inventory: ...


# -- NVML ----------------------------------------------------------------------------------
@dataclass(slots=True)
class NvmlSource:
    """GPUs from NVML; a GPU NVML cannot read (or no longer reads) is unhealthy. NVML is
    started once and shut down by :meth:`close`."""

    nvml: Nvml
    error: type[BaseException] = Exception
    sysfs: Sysfs | None = None
    _started: bool = False
    _known: dict[int, Gpu] | None = None

    def read(self) -> Inventory:
        sysfs = self.sysfs or Sysfs()
        if not self._started:
            self.nvml.nvmlInit()
            self._started = True
        known = self._known if self._known is not None else {}
        gpus = []
        for index in range(self.nvml.nvmlDeviceGetCount()):
            try:
                gpus.append(self._gpu(index, sysfs))
            except self.error:
                previous = known.get(index)
                gpus.append(replace(previous, healthy=False) if previous is not None else Gpu(
                    index=index, uuid=f"GPU-unreadable-{index}", minor=index, memory=0,
                    model="", healthy=False))
        self._known = {gpu.index: gpu for gpu in gpus if gpu.memory}
        driver = self.nvml.nvmlSystemGetDriverVersion()
        return Inventory(gpus=tuple(gpus), driver=_text(driver))

    def _gpu(self, index: int, sysfs: Sysfs) -> Gpu:
        handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        bus_id = normalise_bus_id(self.nvml.nvmlDeviceGetPciInfo(handle).busId)
        return Gpu(index=index, uuid=_text(self.nvml.nvmlDeviceGetUUID(handle)),
                   minor=int(self.nvml.nvmlDeviceGetMinorNumber(handle)),
                   memory=int(self.nvml.nvmlDeviceGetMemoryInfo(handle).total),
                   model=_text(self.nvml.nvmlDeviceGetName(handle)), bus_id=bus_id,
                   numa=sysfs.numa_node(bus_id), pcie=sysfs.pcie_root(bus_id))

    def close(self) -> None:
        if self._started:
            self.nvml.nvmlShutdown()
            self._started = False


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- fakes ---------------------------------------------------------------------------------
FAKE_MODEL = "NVIDIA Lahar-Fake-GPU"


def _fake_uuid(node_name: str, index: int) -> str:
    """Stable across restarts of the agent on one node, unique across nodes."""
    return f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f'{node_name}.gpu{index}.lahar.fake')}"


def fake_gpus(node_name: str, count: int, memory: int, *, model: str = FAKE_MODEL,
              numa_nodes: int = 1) -> tuple[Gpu, ...]:
    """``count`` cards of ``memory`` bytes, two per PCIe root, spread over ``numa_nodes``."""
    per_numa = max(-(-count // max(numa_nodes, 1)), 1)
    return tuple(Gpu(index=i, uuid=_fake_uuid(node_name, i), minor=i, memory=memory, model=model,
                     bus_id=f"0000:{0x10 + i:02x}:00.0", numa=i // per_numa,
                     pcie=f"pci0000:{(i // 2) * 0x20:02x}") for i in range(count))


def _quantity(value: object, what: str) -> int:
    try:
        return int(parse_quantity(value))  # type: ignore[arg-type]
    except (QuantityError, TypeError, ValueError):
        raise InventoryError(f"{what}: {value!r} is not a quantity") from None


def _int(entry: Mapping[str, Any], key: str, default: int, what: str) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InventoryError(f"{what}: field {key} must be an integer, got {value!r}")
    return value


def inventory_from_yaml(node_name: str, data: object) -> Inventory:
    """A fake inventory from a YAML document::

        gpus:                      # or a count: {count: 8, memory: 80Gi, numaNodes: 2}
        - {memory: 80Gi, model: NVIDIA A100-SXM4-80GB, numa: 0, pcie: pci0000:1a}
        rdma:
        - {busID: "0000:18:00.0", numa: 0, pcie: pci0000:1a, vfs: ["0000:18:00.1"]}

    Every GPU field is optional (uuid, minor, index, busID default from the position)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InventoryError("the inventory must be a map with 'gpus' and 'rdma'")
    raw_gpus = data.get("gpus") or []
    if isinstance(raw_gpus, Mapping):
        count = _int(raw_gpus, "count", 0, "gpus")
        memory = _quantity(raw_gpus.get("memory", "16Gi"), "gpus.memory")
        gpus = fake_gpus(node_name, count, memory, model=str(raw_gpus.get("model", FAKE_MODEL)),
                         numa_nodes=_int(raw_gpus, "numaNodes", 1, "gpus"))
    elif isinstance(raw_gpus, list):
        gpus = tuple(_gpu_entry(node_name, i, entry) for i, entry in enumerate(raw_gpus))
    else:
        raise InventoryError("gpus: must be a list of GPUs or a map with a count")
    raw_nics = data.get("rdma") or []
    if not isinstance(raw_nics, list):
        raise InventoryError("rdma: must be a list of NICs")
    nics = tuple(_nic_entry(i, entry) for i, entry in enumerate(raw_nics))
    seen = [g.uuid for g in gpus]
    if len(set(seen)) != len(seen) or len({g.minor for g in gpus}) != len(gpus):
        raise InventoryError("gpus: two GPUs share a uuid or a minor")
    return Inventory(gpus=gpus, nics=nics, driver=str(data.get("driver", "fake")), fake=True)


def _gpu_entry(node_name: str, i: int, entry: object) -> Gpu:
    what = f"gpus[{i}]"
    if not isinstance(entry, Mapping):
        raise InventoryError(f"{what}: must be a map")
    return Gpu(index=_int(entry, "index", i, what), uuid=str(entry.get("uuid") or
                                                            _fake_uuid(node_name, i)),
               minor=_int(entry, "minor", i, what),
               memory=_quantity(entry.get("memory", "16Gi"), f"{what}.memory"),
               model=str(entry.get("model", FAKE_MODEL)),
               bus_id=str(entry.get("busID") or f"0000:{0x10 + i:02x}:00.0"),
               numa=_int(entry, "numa", 0, what), pcie=str(entry.get("pcie") or ""),
               healthy=entry.get("health", True) is not False)


def _nic_entry(i: int, entry: object) -> Nic:
    what = f"rdma[{i}]"
    if not isinstance(entry, Mapping) or not entry.get("busID"):
        raise InventoryError(f"{what}: must be a map with a busID")
    vfs = entry.get("vfs") or []
    if not isinstance(vfs, list):
        raise InventoryError(f"{what}.vfs: must be a list of bus ids")
    return Nic(minor=_int(entry, "minor", i, what), bus_id=str(entry["busID"]),
               numa=_int(entry, "numa", 0, what), pcie=str(entry.get("pcie") or ""),
               vfs=tuple(str(v) for v in vfs), healthy=entry.get("health", True) is not False)


class FakeSource:
    """A made-up inventory whose devices' health tests (or an operator) can change."""

    def __init__(self, inventory: Inventory) -> None:
        self._inventory = replace(inventory, fake=True)
        self._lock = threading.Lock()

    def read(self) -> Inventory:
        with self._lock:
            return self._inventory

    def set_health(self, device_id: str, healthy: bool) -> None:
        """Mark a GPU (by UUID) or a NIC (by bus id) healthy or not."""
        with self._lock:
            inv = self._inventory
            if device_id not in {g.uuid for g in inv.gpus} | {n.bus_id for n in inv.nics}:
                raise KeyError(device_id)
            gpus = tuple(replace(g, healthy=healthy) if g.uuid == device_id else g
                         for g in inv.gpus)
            nics = tuple(replace(n, healthy=healthy) if n.bus_id == device_id else n
                         for n in inv.nics)
            self._inventory = replace(inv, gpus=gpus, nics=nics)


def uverbs_of(sysfs_root: str, bus_id: str) -> str:
    """``/dev/infiniband/uverbsN`` of a NIC or VF from sysfs (koordlet's
    ``getUVerbsViaPciAdd``), or '' when sysfs does not say."""
    try:
        names = sorted(os.listdir(os.path.join(sysfs_root, "bus/pci/devices", bus_id,
                                               "infiniband_verbs")))
    except OSError:
        return ""
    return f"/dev/infiniband/{names[0]}" if names else ""
