"""Which extended resources the node agent serves, and the virtual devices kubelet counts.

Kubelet counts an extended resource in device IDs: a pod asking ``volcano.sh/gpu-memory:
4096`` gets 4096 IDs from the endpoint that serves that resource. Each family's accounting
decides the IDs, spelled as its peer spells them so logs and checkpoints read the same:

* ``volcano.sh/gpu-memory``: card MiB ÷ ``--gpu-memory-factor`` IDs per card, ``<index>-<j>``
  (volcano-device-plugin's ``GetDevices``);
* ``volcano.sh/gpu-number``: one ID per card, its UUID (volcano-device-plugin, number mode);
* the vGPU count (``volcano.sh/vgpu-number``, or ``nvidia.com/gpu`` in the HAMi profile):
  split count IDs per card, ``<uuid>-<i>`` (volcano-vgpu's and HAMi's ``apiDevices``);
* ``nvidia.com/gpu`` (fine-grained): one ID per card, its UUID (NVIDIA's device plugin);
* ``koordinator.sh/gpu-core``, ``koordinator.sh/gpu-memory-ratio`` and ``koordinator.sh/gpu``
  (core and memory ratio together): 100 IDs per card, ``<uuid>::<j>``, and
  ``koordinator.sh/rdma``: 100 per NIC, ``<busID>::<j>`` (Koordinator has no device plugin
  for them; koordlet's hooks act at container creation instead, so kubelet must call
  ``Allocate`` for every container that asks for any of them).

Quantities counted in bytes or MiB — ``koordinator.sh/gpu-memory`` (bytes; kubelet would need
one ID per byte), the vGPU family's ``volcano.sh/vgpu-memory`` and ``volcano.sh/vgpu-cores``,
and GPU share's card count in memory mode — are not endpoints: the
reporter writes them into the Node's ``status.capacity``/``allocatable`` as koord-manager's
``GPUDeviceResource`` and volcano-device-plugin's ``PatchGPUResourceOnNode`` do, summed over
healthy devices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.devices.base import DeviceConfig
from scheduler.devices.finegrained.names import GPU, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, RDMA
from scheduler.devices.names import GPU_MEMORY as SHARE_MEMORY
from scheduler.devices.names import GPU_NUMBER as SHARE_NUMBER
from scheduler.devices.node.coresettings import CORE_POLICIES
from scheduler.devices.node.inventory import Inventory

__all__ = [
    "FINEGRAINED",
    "GPUSHARE",
    "VGPU",
    "VGPU_MODES",
    "AgentConfig",
    "AgentConfigError",
    "Endpoint",
    "VirtualDevice",
    "endpoints",
    "physical_id",
    "status_resources",
    "virtual_devices",
]

GPUSHARE = "gpushare"
VGPU = "vgpu"
FINEGRAINED = "finegrained"
NVIDIA_GPU = "nvidia.com/gpu"
VGPU_MODES = ("hami-core", "mig", "mps")
"""The peers' operating modes (volcano-vgpu ``config.Mode``, HAMi ``operatingMode``)."""
DEFAULT_HOOK_PATH = {"volcano": "/usr/local/vgpu", "hami": "/usr/local"}
"""Where HAMi-core (``libvgpu.so``) lives on the host: the peers' DaemonSets set ``HOOK_PATH``
to these."""


class AgentConfigError(ValueError):
    """Families or options the agent cannot serve together."""


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The scheduler's family switches plus what only the node side needs."""

    node_name: str
    devices: DeviceConfig = field(default_factory=DeviceConfig)
    split_count: int = 10
    """vGPU: how many vGPUs share a card (volcano-vgpu ``--device-split-count``)."""
    gpu_memory_factor: int = 1
    """GPU share: MiB per ``volcano.sh/gpu-memory`` unit (volcano ``--gpu-memory-factor``)."""
    hook_path: str = ""
    """vGPU: HAMi-core's host directory (``HOOK_PATH``); empty: the profile's default."""
    hami_core_library: str = "/usr/local/vgpu/libvgpu.so"
    """Fine-grained, HAMi-core isolation: koordlet's ``HAMICoreLibraryDirectoryPath``."""
    sysfs: str = "/sys"
    prepare_host_dirs: bool = False
    """vGPU: create HAMi-core's per-container cache directories on the host (a real node)."""
    device_memory_scaling: float = 1.0
    """vGPU: HAMi's ``deviceMemoryScaling`` (above 1: oversubscribed card memory)."""
    device_cores_scaling: float = 1.0
    """vGPU: ``deviceCoreScaling``."""
    disable_core_limit: bool = False
    """vGPU: ``disableCoreLimit`` (HAMi-core ignores the core limit)."""
    libcuda_log_level: str = ""
    """vGPU: HAMi's ``libCudaLogLevel`` (HAMi-core's ``LIBCUDA_LOG_LEVEL``); empty: unset."""
    gpu_core_policy: str = ""
    """vGPU: HAMi's ``gpuCorePolicy`` (``default``, ``force``, ``disable``)."""
    numa_topology: bool = False
    """Send each device's NUMA node in ``ListAndWatch`` (HAMi's ``enableNumaTopology``)."""
    vgpu_mode: str = "hami-core"
    """vGPU: how cards are shared, as the peers' operating mode: ``hami-core``, ``mig`` (MIG
    instances, :mod:`~scheduler.devices.node.modes`) or ``mps`` (the MPS daemon)."""
    cdi: bool = False
    """Answer ``Allocate`` with CDI device names and write the CDI spec (:mod:`.cdi`)."""
    cdi_root: str = "/var/run/cdi"
    mps_root: str = "/run/nvidia/mps"
    """vGPU in ``mps`` mode: the host directory of the MPS daemon's pipe, log and shm."""

    @property
    def vgpu_hook_path(self) -> str:
        return self.hook_path or DEFAULT_HOOK_PATH.get(self.devices.profile, "/usr/local/vgpu")

    def check(self) -> None:
        cfg = self.devices
        if not cfg.any_enabled:
            raise AgentConfigError("no device family is enabled: turn on GPU share, GPU "
                                   "number, vGPU or fine-grained devices")
        if cfg.gpu_sharing and cfg.gpu_number:
            raise AgentConfigError("GPU share memory mode and GPU number mode cannot both be "
                                   "served (as in Volcano's deviceshare)")
        if cfg.vgpu and (cfg.gpu_sharing or cfg.gpu_number):
            raise AgentConfigError("vGPU cannot be served together with GPU share or number")
        if cfg.vgpu and cfg.profile == "hami" and cfg.finegrained:
            raise AgentConfigError(f"vGPU with the hami profile and fine-grained devices both "
                                   f"serve {NVIDIA_GPU}; enable one of them on this node")
        if self.split_count < 1 or self.gpu_memory_factor < 1:
            raise AgentConfigError("--split-count and --gpu-memory-factor must be at least 1")
        if not (self.device_memory_scaling > 0 and self.device_cores_scaling > 0):
            raise AgentConfigError(f"device memory and core scaling must be above 0, got "
                                   f"{self.device_memory_scaling:g} and "
                                   f"{self.device_cores_scaling:g}")
        if self.libcuda_log_level and not self.libcuda_log_level.isdigit():
            raise AgentConfigError(f"the libcuda log level must be a number (0 errors, "
                                   f"1 warnings, 3 infos, 4 debugs), got "
                                   f"{self.libcuda_log_level!r}")
        if self.gpu_core_policy and self.gpu_core_policy not in CORE_POLICIES:
            raise AgentConfigError(f"the GPU core policy must be default, force or disable, "
                                   f"got {self.gpu_core_policy!r}")
        if self.vgpu_mode not in VGPU_MODES:
            raise AgentConfigError(f"--vgpu-mode must be one of {', '.join(VGPU_MODES)}, got "
                                   f"{self.vgpu_mode!r}")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One registered extended resource: its family and its socket in the plugin directory."""

    resource: str
    family: str

    @property
    def socket(self) -> str:
        return "lahar-" + self.resource.replace("/", "_") + ".sock"


@dataclass(frozen=True, slots=True)
class VirtualDevice:
    id: str
    healthy: bool
    numa: int = -1


def endpoints(config: AgentConfig) -> tuple[Endpoint, ...]:
    cfg = config.devices
    out: list[Endpoint] = []
    if cfg.gpu_sharing:
        out.append(Endpoint(SHARE_MEMORY, GPUSHARE))
    if cfg.gpu_number:
        out.append(Endpoint(SHARE_NUMBER, GPUSHARE))
    if cfg.vgpu:
        out.append(Endpoint(cfg.names.count, VGPU))
    if cfg.finegrained:
        out += [Endpoint(name, FINEGRAINED) for name in (NVIDIA_GPU, GPU_CORE, GPU_MEMORY_RATIO,
                                                         GPU, RDMA)]
    return tuple(out)


def virtual_devices(endpoint: Endpoint, inventory: Inventory,
                    config: AgentConfig) -> list[VirtualDevice]:
    resource = endpoint.resource
    if endpoint.family == GPUSHARE and resource == SHARE_MEMORY:
        return [VirtualDevice(f"{gpu.index}-{j}", gpu.healthy, gpu.numa)
                for gpu in inventory.gpus
                for j in range(gpu.memory_mib // config.gpu_memory_factor)]
    if endpoint.family == VGPU:
        return [VirtualDevice(f"{gpu.uuid}-{i}", gpu.healthy, gpu.numa)
                for gpu in inventory.gpus for i in range(config.split_count)]
    if resource in (SHARE_NUMBER, NVIDIA_GPU):
        return [VirtualDevice(gpu.uuid, gpu.healthy, gpu.numa) for gpu in inventory.gpus]
    if resource in (GPU_CORE, GPU_MEMORY_RATIO, GPU):
        return [VirtualDevice(f"{gpu.uuid}::{j}", gpu.healthy, gpu.numa)
                for gpu in inventory.gpus for j in range(100)]
    if resource == RDMA:
        return [VirtualDevice(f"{nic.bus_id}::{j}", nic.healthy, nic.numa)
                for nic in inventory.nics for j in range(100)]
    return []


def physical_id(endpoint: Endpoint, device_id: str) -> str:
    """The card (GPU share memory: its index; otherwise its UUID) or NIC a virtual ID is on."""
    if "::" in device_id:
        return device_id.partition("::")[0]
    if endpoint.family == GPUSHARE and endpoint.resource == SHARE_MEMORY:
        return device_id.partition("-")[0]
    if endpoint.family == VGPU:
        return device_id.rpartition("-")[0]
    return device_id


def status_resources(config: AgentConfig, inventory: Inventory) -> dict[str, str]:
    """The quantities the reporter writes into the Node's status (see the module docstring)."""
    cfg = config.devices
    healthy = [gpu for gpu in inventory.gpus if gpu.healthy]
    out: dict[str, str] = {}
    if cfg.gpu_sharing:
        out[SHARE_NUMBER] = str(len(inventory.gpus))
    if cfg.vgpu and cfg.profile == "volcano":
        names = cfg.names
        # in the units of the register annotation (volcano-vgpu divides by its factor)
        out[names.memory] = str(sum(gpu.memory_mib // config.gpu_memory_factor
                                    for gpu in healthy))
        out[names.cores] = str(100 * len(healthy))
    if cfg.finegrained:
        out[GPU_MEMORY] = str(sum(gpu.memory for gpu in healthy))
    return out
