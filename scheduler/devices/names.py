"""Resource names and annotation keys of the device families, in one place.

Node-side device plugins read these exact keys, so they are part of the wire format: GPU share
follows Volcano's ``volcano-sh/devices`` plugin, vGPU follows Volcano's HAMi-derived plugin
(profile ``volcano``) or HAMi itself (profile ``hami``). A profile is a value, chosen once in
the conf, so every module that reads or writes vGPU annotations agrees on the spelling.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "GPUSHARE_LOCK",
    "GPU_ASSIGNED",
    "GPU_INDEX",
    "GPU_MEMORY",
    "GPU_NUMBER",
    "GPU_UNHEALTHY_IDS",
    "HAMI",
    "PREDICATE_TIME",
    "PROFILES",
    "VOLCANO",
    "VGpuNames",
]

# -- GPU share (Volcano) ---------------------------------------------------------------------
GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_INDEX = "volcano.sh/gpu-index"
PREDICATE_TIME = "volcano.sh/predicate-time"
GPU_ASSIGNED = "volcano.sh/gpu-assigned"
GPU_UNHEALTHY_IDS = "volcano.sh/gpu-unhealthy-ids"
GPUSHARE_LOCK = "gpu"


# -- vGPU -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class VGpuNames:
    """Every name the vGPU family reads or writes, for one naming profile."""

    profile: str
    count: str
    memory: str
    memory_percentage: str
    cores: str
    register: str
    register_json: bool
    """HAMi's current register annotation is a JSON array; Volcano's is colon separated."""
    node_resources: tuple[str, ...]
    """Allocatable names that must all be non-zero for a node to offer vGPUs."""
    assigned_node: str
    assigned_time: str
    allocated: str
    """Durable record of the devices a pod holds (usage is rebuilt from it)."""
    to_allocate: str
    """What the node side still has to hand to containers."""
    bind_phase: str
    bind_time: str
    lock: str
    lock_with_owner: bool
    """HAMi writes ``<time>,<namespace>,<name>``; Volcano writes the time alone."""
    use_type: str = "nvidia.com/use-gputype"
    nouse_type: str = "nvidia.com/nouse-gputype"
    use_uuid: str = "volcano.sh/vgpu-use-gpuuuid"
    nouse_uuid: str = "volcano.sh/vgpu-nouse-gpuuuid"
    mode: str = "volcano.sh/vgpu-mode"
    group_policy: str = "volcano.sh/vgpu-podgroup-policy"

    @property
    def ignored_resources(self) -> frozenset[str]:
        """Per-device quantities the node-level resource model must not sum."""
        return frozenset({self.memory, self.memory_percentage, self.cores})

    @property
    def binding_keys(self) -> tuple[str, ...]:
        return (self.assigned_node, self.assigned_time, self.allocated, self.to_allocate,
                self.bind_phase, self.bind_time)


VOLCANO = VGpuNames(
    profile="volcano",
    count="volcano.sh/vgpu-number",
    memory="volcano.sh/vgpu-memory",
    memory_percentage="volcano.sh/vgpu-memory-percentage",
    cores="volcano.sh/vgpu-cores",
    register="volcano.sh/node-vgpu-register",
    register_json=False,
    node_resources=("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"),
    assigned_node="volcano.sh/vgpu-node",
    assigned_time="volcano.sh/vgpu-time",
    allocated="volcano.sh/vgpu-ids-new",
    to_allocate="volcano.sh/devices-to-allocate",
    bind_phase="volcano.sh/bind-phase",
    bind_time="volcano.sh/bind-time",
    lock="hamivgpu",
    lock_with_owner=False,
)

HAMI = VGpuNames(
    profile="hami",
    count="nvidia.com/gpu",
    memory="nvidia.com/gpumem",
    memory_percentage="nvidia.com/gpumem-percentage",
    cores="nvidia.com/gpucores",
    register="hami.io/node-nvidia-register",
    register_json=True,
    node_resources=("nvidia.com/gpu",),
    assigned_node="hami.io/vgpu-node",
    assigned_time="hami.io/vgpu-time",
    allocated="hami.io/vgpu-devices-allocated",
    to_allocate="hami.io/vgpu-devices-to-allocate",
    bind_phase="hami.io/bind-phase",
    bind_time="hami.io/bind-time",
    lock="hami.io/mutex.lock",
    lock_with_owner=True,
    use_uuid="nvidia.com/use-gpuuuid",
    nouse_uuid="nvidia.com/nouse-gpuuuid",
    mode="nvidia.com/vgpu-mode",
)

PROFILES = {VOLCANO.profile: VOLCANO, HAMI.profile: HAMI}
