"""The node's cards, MIG instances and RDMA NICs as DRA devices (``resource.k8s.io/v1``).

The node agent knows its hardware as an :class:`~scheduler.devices.node.inventory.Inventory`
(plus, in MIG mode, each card's instances from a
:class:`~scheduler.devices.node.modes.MigSource`). A DRA driver publishes the same hardware as
devices in ResourceSlices, and prepares what the scheduler allocated by device *name*. This
module is the one mapping between the two, used both ways:

* :func:`dra_devices` lists the devices (in a stable order) and :func:`device_wire` writes one
  as a ResourceSlice ``spec.devices[]`` entry; :func:`counter_sets` gives the slice's
  ``sharedCounters`` for cards partitioned into MIG instances;
* :func:`device_for_name` is the reverse lookup prepare uses: the device a name stands for on
  this node, or ``None`` so prepare refuses a device the node does not have.

Names are DNS labels, stable across restarts as long as the hardware is: ``gpu-<minor>``
(``/dev/nvidia<minor>``, as NVIDIA's driver names cards),
``gpu-<minor>-mig-<profile>-<position>`` (the profile without dots, e.g. ``1g10gb``; the
position is the NVML MIG index, the same position the vGPU MIG path uses), ``rdma-<minor>``
and ``rdma-<minor>-vf-<n>`` for a NIC's n-th virtual function.

Attributes follow NVIDIA's k8s-dra-driver-gpu (``type``, ``uuid``, ``index``, ``minor``,
``productName``, ``architecture``, ``driverVersion``, ``cudaComputeCapability`` as a version,
``pcieBusID``, ``resource.kubernetes.io/pcieRoot``) so the same CEL selectors work; capacity
is ``memory`` (and ``cores`` = 100, HAMi's share of the SMs in percent). In ``shared`` mode a
whole card is ``allowMultipleAllocations: true`` with a ``requestPolicy``, the policy of HAMi's
DRA driver (``HAMiGpuInfo.GetDevice``): memory in 1 MiB steps from 1 MiB, cores in whole
percent from 0; a request that names neither gets the whole memory and all 100 cores. A card
with MIG instances is partitionable: a counter set ``gpu-<minor>-counters`` holds its
``memory`` and ``compute-slices``; each instance consumes its own share and the whole card
consumes all of it, so whole and instances exclude each other; such a card is never shared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.devices.node.inventory import Gpu, Inventory, Nic
from scheduler.devices.node.modes import MigInstance, MigSource

__all__ = [
    "DRA_MODES",
    "PCIE_ROOT",
    "DraDevice",
    "MigLayout",
    "counter_set_name",
    "counter_sets",
    "device_for_name",
    "device_wire",
    "dra_devices",
    "gpu_facts",
    "mib_quantity",
    "mig_layout",
    "semver",
]

DRA_MODES = ("exclusive", "shared")
"""``exclusive``: one claim per card (NVIDIA's driver); ``shared``: cards shared by
consumable ``memory``/``cores`` capacity (HAMi's DRA driver)."""
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
MIB = 2**20
CORES = 100
MIN_COMPUTE_SLICES = 7
"""A MIG-capable card's compute slices (A100/H100/H200: 7), unless its instances add up to more."""

MigLayout = Mapping[str, Sequence[MigInstance | None]]
"""Per card UUID, its MIG devices by NVML MIG index (None: no device at that index)."""

_LABEL = re.compile(r"[^a-z0-9-]+")
_PROFILE_G = re.compile(r"^(\d+)g")
_NAME = re.compile(
    r"^(?:gpu-(\d+)(?:-mig-([a-z0-9-]+)-(\d+))?|rdma-(\d+)(?:-vf-(\d+))?)$")

# (substring of NVML's name, architecture, compute capability): NVML's
# nvmlDeviceGetArchitecture / GetCudaComputeCapability for the cards Lahar is run on; NVML
# gives both, but the inventory does not carry them, so a model not listed has neither.
_ARCHITECTURES: tuple[tuple[str, str, str], ...] = (
    ("GB200", "Blackwell", "10.0"), ("B200", "Blackwell", "10.0"),
    ("H100", "Hopper", "9.0"), ("H200", "Hopper", "9.0"), ("H800", "Hopper", "9.0"),
    ("H20", "Hopper", "9.0"), ("GH200", "Hopper", "9.0"),
    ("L40", "Ada Lovelace", "8.9"), ("L4", "Ada Lovelace", "8.9"),
    ("A100", "Ampere", "8.0"), ("A800", "Ampere", "8.0"), ("A30", "Ampere", "8.0"),
    ("A40", "Ampere", "8.6"), ("A10", "Ampere", "8.6"), ("A16", "Ampere", "8.6"),
    ("A2", "Ampere", "8.6"), ("T4", "Turing", "7.5"), ("V100", "Volta", "7.0"),
)


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One published device and the hardware behind it."""

    name: str
    kind: str
    """``gpu``, ``mig`` or ``rdma``: the ``type`` attribute."""
    healthy: bool = True
    gpu: Gpu | None = None
    """The card (for ``gpu`` and ``mig``)."""
    mig: MigInstance | None = None
    mig_position: int = -1
    nic: Nic | None = None
    vf: str = ""
    """Bus id of the virtual function (``rdma`` only; '' for the physical function)."""

    @property
    def uuid(self) -> str:
        """What ``NVIDIA_VISIBLE_DEVICES`` names ('' for a NIC)."""
        if self.mig is not None:
            return self.mig.uuid
        return self.gpu.uuid if self.gpu is not None else ""

    @property
    def bus_id(self) -> str:
        if self.nic is not None:
            return self.vf or self.nic.bus_id
        return self.gpu.bus_id if self.gpu is not None else ""


def profile_label(profile: str) -> str:
    """``1g.10gb`` → ``1g10gb``; ``1g.10gb+me`` → ``1g10gb-me``."""
    return _LABEL.sub("-", profile.lower().replace(".", "")).strip("-") or "mig"


def mig_layout(source: MigSource | None,
               inventory: Inventory) -> dict[str, list[MigInstance | None]]:
    """Every card's MIG devices as the source reads them (empty without a source)."""
    if source is None:
        return {}
    return {gpu.uuid: list(source.instances(gpu)) for gpu in inventory.gpus}


def dra_devices(inventory: Inventory, mig: MigLayout | None = None) -> list[DraDevice]:
    """The node's devices: per card the whole card then its MIG instances, then per NIC the
    physical function then its virtual functions."""
    out: list[DraDevice] = []
    for gpu in sorted(inventory.gpus, key=lambda g: g.index):
        out.append(DraDevice(name=f"gpu-{gpu.minor}", kind="gpu", healthy=gpu.healthy, gpu=gpu))
        for position, instance in enumerate((mig or {}).get(gpu.uuid, ())):
            if instance is None:
                continue
            out.append(DraDevice(
                name=f"gpu-{gpu.minor}-mig-{profile_label(instance.profile)}-{position}",
                kind="mig", healthy=gpu.healthy, gpu=gpu, mig=instance, mig_position=position))
    for nic in sorted(inventory.nics, key=lambda n: n.minor):
        out.append(DraDevice(name=f"rdma-{nic.minor}", kind="rdma", healthy=nic.healthy, nic=nic))
        out.extend(DraDevice(name=f"rdma-{nic.minor}-vf-{i}", kind="rdma", healthy=nic.healthy,
                             nic=nic, vf=vf) for i, vf in enumerate(nic.vfs))
    return out


def device_for_name(inventory: Inventory, name: str,
                    mig: MigLayout | None = None) -> DraDevice | None:
    """The device ``name`` stands for on this node, or None when the node has no such device
    (a name of another scheme, a card or instance or NIC that is not here)."""
    match = _NAME.match(name)
    if match is None:
        return None
    if match[1] is not None:
        gpu = next((g for g in inventory.gpus if g.minor == int(match[1])), None)
        if gpu is None:
            return None
        if match[2] is None:
            return DraDevice(name=name, kind="gpu", healthy=gpu.healthy, gpu=gpu)
        instances = (mig or {}).get(gpu.uuid, ())
        position = int(match[3])
        instance = instances[position] if position < len(instances) else None
        if instance is None or profile_label(instance.profile) != match[2]:
            return None
        return DraDevice(name=name, kind="mig", healthy=gpu.healthy, gpu=gpu, mig=instance,
                         mig_position=position)
    nic = next((n for n in inventory.nics if n.minor == int(match[4])), None)
    if nic is None:
        return None
    if match[5] is None:
        return DraDevice(name=name, kind="rdma", healthy=nic.healthy, nic=nic)
    vf = int(match[5])
    if vf >= len(nic.vfs):
        return None
    return DraDevice(name=name, kind="rdma", healthy=nic.healthy, nic=nic, vf=nic.vfs[vf])


# -- attributes ----------------------------------------------------------------------------
def semver(text: str) -> str:
    """A driver or CUDA version as semver (``535.104.05`` → ``535.104.5``, ``8.0`` →
    ``8.0.0``), or '' when it is not one (a fake driver's name)."""
    parts = text.strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return ""
    parts += ["0"] * (3 - len(parts))
    return ".".join(str(int(p)) for p in parts)


def gpu_facts(model: str) -> tuple[str, str]:
    """(architecture, CUDA compute capability) of a model by NVML name, ('', '') if unknown."""
    upper = model.upper()
    for key, arch, cc in _ARCHITECTURES:
        if re.search(rf"(^|[^A-Z0-9]){key}([^0-9]|$)", upper):
            return arch, cc
    return "", ""


def _gpu_attributes(gpu: Gpu, driver_version: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "uuid": {"string": gpu.uuid}, "index": {"int": gpu.index},
        "minor": {"int": gpu.minor}, "productName": {"string": gpu.model},
        "numaNode": {"int": gpu.numa},
    }
    arch, cc = gpu_facts(gpu.model)
    if arch:
        attrs["architecture"] = {"string": arch}
        attrs["cudaComputeCapability"] = {"version": semver(cc)}
    version = semver(driver_version)
    if version:
        attrs["driverVersion"] = {"version": version}
    if gpu.bus_id:
        attrs["pcieBusID"] = {"string": gpu.bus_id}
    if gpu.pcie:
        attrs[PCIE_ROOT] = {"string": gpu.pcie}
    return attrs


def mib_quantity(mib: int) -> str:
    """MiB as the API server writes the quantity back (canonical binary form: ``81920`` →
    ``80Gi``, ``9728`` → ``9728Mi``), so a re-read slice compares equal to a rebuilt one."""
    if mib <= 0:
        return "0"
    suffixes = ("Mi", "Gi", "Ti", "Pi", "Ei")
    step = 0
    while step < len(suffixes) - 1 and mib % 1024 == 0:
        mib //= 1024
        step += 1
    return f"{mib}{suffixes[step]}"


def _compute_slices(profile: str) -> int:
    match = _PROFILE_G.match(profile)
    return int(match[1]) if match else 1


def counter_set_name(gpu: Gpu) -> str:
    return f"gpu-{gpu.minor}-counters"


def _mig_totals(gpu: Gpu, instances: Sequence[MigInstance | None]) -> tuple[int, int]:
    """(memory MiB, compute slices) of a partitioned card's counter set."""
    present = [i for i in instances if i is not None]
    memory = max(gpu.memory_mib, sum(i.memory for i in present))
    slices = max(MIN_COMPUTE_SLICES, sum(_compute_slices(i.profile) for i in present))
    return memory, slices


def _counters(memory_mib: int, slices: int) -> dict[str, Any]:
    return {"memory": {"value": mib_quantity(memory_mib)}, "compute-slices": {"value": str(slices)}}


def counter_sets(inventory: Inventory, mig: MigLayout | None = None) -> list[dict[str, Any]]:
    """``spec.sharedCounters`` entries: one per card that has MIG instances."""
    out = []
    for gpu in sorted(inventory.gpus, key=lambda g: g.index):
        instances = (mig or {}).get(gpu.uuid, ())
        if any(i is not None for i in instances):
            out.append({"name": counter_set_name(gpu), "counters": _counters(
                *_mig_totals(gpu, instances))})
    return out


def device_wire(device: DraDevice, *, mode: str, driver_version: str = "",
                mig: MigLayout | None = None) -> dict[str, Any]:
    """One ``spec.devices[]`` entry (no taints: the publisher adds them)."""
    if mode not in DRA_MODES:
        raise ValueError(f"DRA mode {mode!r}: must be one of {', '.join(DRA_MODES)}")
    if device.kind == "rdma":
        return _nic_wire(device)
    gpu = device.gpu
    assert gpu is not None
    attrs = {"type": {"string": device.kind}, **_gpu_attributes(gpu, driver_version)}
    out: dict[str, Any] = {"name": device.name, "attributes": attrs}
    instances = (mig or {}).get(gpu.uuid, ())
    partitioned = any(i is not None for i in instances)
    if device.mig is not None:
        attrs["uuid"] = {"string": device.mig.uuid}
        attrs["parentUUID"] = {"string": gpu.uuid}
        attrs["profile"] = {"string": device.mig.profile}
        attrs["migIndex"] = {"int": device.mig_position}
        out["capacity"] = {"memory": {"value": mib_quantity(device.mig.memory)}}
        out["consumesCounters"] = [{"counterSet": counter_set_name(gpu), "counters": _counters(
            device.mig.memory, _compute_slices(device.mig.profile))}]
        return out
    memory = mib_quantity(gpu.memory_mib)
    if partitioned:
        out["capacity"] = {"memory": {"value": memory}, "cores": {"value": str(CORES)}}
        out["consumesCounters"] = [{"counterSet": counter_set_name(gpu),
                                    "counters": _counters(*_mig_totals(gpu, instances))}]
    elif mode == "shared":
        out["allowMultipleAllocations"] = True
        out["capacity"] = {
            "memory": {"value": memory, "requestPolicy": {
                "default": memory, "validRange": {"min": "1Mi", "max": memory, "step": "1Mi"}}},
            "cores": {"value": str(CORES), "requestPolicy": {
                "default": str(CORES), "validRange": {"min": "0", "max": str(CORES),
                                                     "step": "1"}}},
        }
    else:
        out["capacity"] = {"memory": {"value": memory}, "cores": {"value": str(CORES)}}
    return out


def _nic_wire(device: DraDevice) -> dict[str, Any]:
    nic = device.nic
    assert nic is not None
    attrs: dict[str, Any] = {"type": {"string": "rdma"}, "minor": {"int": nic.minor},
                             "pcieBusID": {"string": device.bus_id},
                             "numaNode": {"int": nic.numa},
                             "virtualFunction": {"bool": bool(device.vf)}}
    if device.vf:
        attrs["physicalFunction"] = {"string": nic.bus_id}
    if nic.pcie:
        attrs[PCIE_ROOT] = {"string": nic.pcie}
    return {"name": device.name, "attributes": attrs}
