"""The vGPU family's other operating modes, served by the agent: MIG instances and MPS.

The peers' vGPU plugins share a card in one of three modes (volcano-vgpu's ``config.Mode``,
HAMi's ``operatingMode``), written into the register annotation so the scheduler knows how to
place (``--vgpu-mode``):

* ``hami-core``: HAMi-core limits inside the container (:mod:`~scheduler.devices.node.allocate`);
* ``mig``: the scheduler hands out MIG instances of a card (:mod:`scheduler.devices.mig`),
  written as ``<card UUID>[<geometry group>-<position>]``. As HAMi's ``Allocate`` in MIG mode
  (``GetContainerDeviceStrArray`` → ``GetMigUUIDFromIndex``) the agent answers with the UUID
  of the card's MIG device at that position (NVML's ``DeviceGetMigDeviceHandleByIndex``) and
  none of HAMi-core's variables or mounts. Instances come from NVML (:class:`NvmlMig`), or on
  fake GPUs from ``--fake-mig`` (:class:`FakeMig`: every card partitioned the same way, the
  instances in template order, as Volcano counts positions). A position the card has no
  instance at fails the call naming pod, card and position. HAMi re-partitions the card with
  ``nvidia-mig-parted`` when the geometry differs; the agent does not (docs: Not done);
* ``mps``: cards shared through the MPS control daemon. As NVIDIA's device plugin's MPS
  sharing (``mpsOptions.updateReponse``, which HAMi carries): ``CUDA_MPS_PIPE_DIRECTORY`` and
  ``CUDA_MPS_LOG_DIRECTORY`` under ``/mps/<resource>/`` mounted from ``--mps-root``, the
  daemon's shm at ``/dev/shm``, and the container's share of the SMs as
  ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (its vGPU cores) with its memory as
  ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``.
"""

from __future__ import annotations

import re
import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from scheduler.devices.codec import ContainerDevice
from scheduler.devices.mig import card_uuid, decode_mig_id
from scheduler.devices.node.allocate import AllocationError, ContainerAnswer, Mount
from scheduler.devices.node.inventory import Gpu, Inventory
from scheduler.devices.node.resources import AgentConfig

__all__ = ["FakeMig", "MigInstance", "MigSource", "NvmlMig", "mig_by_card", "mode_answer",
           "parse_fake_mig"]

MIB = 2**20
MPS_CONTAINER_ROOT = "/mps"


@dataclass(frozen=True, slots=True)
class MigInstance:
    uuid: str
    """``MIG-…``: what ``NVIDIA_VISIBLE_DEVICES`` names."""
    profile: str
    memory: int
    """MiB."""
    caps: tuple[str, ...] = ()
    """Its capability device nodes (``/dev/nvidia-caps/nvidia-capN``), where known."""


class MigSource(Protocol):
    def instances(self, gpu: Gpu) -> list[MigInstance | None]:
        """The card's MIG devices by NVML MIG index (None: no device at that index)."""
        ...


# -- fake ----------------------------------------------------------------------------------
_GB = re.compile(r"(\d+)gb$")


def parse_fake_mig(text: str) -> tuple[tuple[str, int, int], ...]:
    """``PROFILE[=MiB]:COUNT,...`` (``1g.10gb=9728:4,2g.20gb:1``) as (profile, MiB, count);
    without ``=MiB`` the memory is the profile's GB × 1024. Raises ValueError naming the
    entry."""
    templates = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name_memory, sep, count_text = entry.rpartition(":")
        name, _, memory_text = name_memory.partition("=")
        try:
            count = int(count_text)
            if memory_text:
                memory = int(memory_text)
            else:
                match = _GB.search(name)
                if match is None:
                    raise ValueError
                memory = int(match.group(1)) * 1024
        except ValueError:
            raise ValueError(f"--fake-mig entry {entry!r} is not PROFILE[=MiB]:COUNT "
                             f"(e.g. 1g.10gb=9728:4)") from None
        if not sep or not name or count < 1 or memory < 1:
            raise ValueError(f"--fake-mig entry {entry!r} needs a profile, a memory and a "
                             f"count of at least 1")
        templates.append((name, memory, count))
    if not templates:
        raise ValueError("--fake-mig names no MIG instance")
    return tuple(templates)


@dataclass(frozen=True, slots=True)
class FakeMig:
    """Every card partitioned into ``templates``; UUIDs stable per card."""

    templates: tuple[tuple[str, int, int], ...]

    def instances(self, gpu: Gpu) -> list[MigInstance | None]:
        out: list[MigInstance | None] = []
        for profile, memory, count in self.templates:
            for i in range(count):
                name = f"{gpu.uuid}.{profile}.{len(out)}.{i}.mig.lahar.fake"
                out.append(MigInstance(uuid=f"MIG-{uuidlib.uuid5(uuidlib.NAMESPACE_DNS, name)}",
                                       profile=profile, memory=memory))
        return out


# -- NVML ----------------------------------------------------------------------------------
@dataclass(slots=True)
class NvmlMig:
    """MIG devices as NVML lists them (``pynvml``; NVML started by the device source)."""

    nvml: Any
    error: type[BaseException] = Exception
    proc_root: str = "/proc"

    def _caps(self) -> dict[str, int]:
        """``/proc/driver/nvidia-caps/mig-minors``: ``gpu0/gi1/ci0/access 13`` per line."""
        try:
            with open(f"{self.proc_root}/driver/nvidia-caps/mig-minors", encoding="utf-8") as f:
                pairs = (line.split() for line in f)
                return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}
        except OSError:
            return {}

    def instances(self, gpu: Gpu) -> list[MigInstance | None]:
        nvml = self.nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(gpu.uuid)
            count = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
        except self.error:
            return []
        caps = self._caps()
        out: list[MigInstance | None] = []
        for index in range(count):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
                uid = _text(nvml.nvmlDeviceGetUUID(mig))
                memory = int(nvml.nvmlDeviceGetMemoryInfo(mig).total) // MIB
                profile = _text(nvml.nvmlDeviceGetName(mig)).rpartition(" ")[2]
            except self.error:
                out.append(None)
                continue
            nodes: list[str] = []
            try:
                gi = int(nvml.nvmlDeviceGetGpuInstanceId(mig))
                ci = int(nvml.nvmlDeviceGetComputeInstanceId(mig))
                prefix = f"gpu{gpu.minor}/gi{gi}"
                for key in (f"{prefix}/access", f"{prefix}/ci{ci}/access"):
                    if key in caps:
                        nodes.append(f"/dev/nvidia-caps/nvidia-cap{caps[key]}")
            except self.error:
                pass
            out.append(MigInstance(uuid=uid, profile=profile, memory=memory, caps=tuple(nodes)))
        return out


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def mig_by_card(source: MigSource, inventory: Inventory) -> dict[str, list[MigInstance]]:
    """Every card's instances (the CDI spec names them)."""
    return {gpu.uuid: [i for i in source.instances(gpu) if i is not None]
            for gpu in inventory.gpus}


# -- answers -------------------------------------------------------------------------------
def _mig_uuids(devices: Sequence[ContainerDevice], inventory: Inventory, source: MigSource | None,
               pod: str, node: str) -> list[str]:
    uuids = []
    for device in devices:
        position = decode_mig_id(device.uuid)
        if position is None:  # a whole card (HAMi: no '[' in the id)
            uuids.append(device.uuid)
            continue
        card = card_uuid(device.uuid)
        gpu = inventory.gpu_by_uuid(card)
        if gpu is None or source is None:
            raise AllocationError(f"pod {pod}: MIG instance {device.uuid} is on GPU {card}, whose "
                                  f"MIG devices node {node} cannot read")
        instances = source.instances(gpu)
        index = position[1]
        found = instances[index] if 0 <= index < len(instances) else None
        if found is None:
            have = sum(1 for i in instances if i is not None)
            raise AllocationError(
                f"pod {pod}: GPU {card} on node {node} has no MIG device at position {index} "
                f"(geometry group {position[0]}; the card has {have}): partition it as the "
                f"geometry says")
        uuids.append(found.uuid)
    return uuids


def _mps(config: AgentConfig, devices: Sequence[ContainerDevice]
         ) -> tuple[dict[str, str], tuple[Mount, ...]]:
    resource = config.devices.names.count
    inside = f"{MPS_CONTAINER_ROOT}/{resource}"
    host = f"{config.mps_root.rstrip('/')}/{resource}"
    envs = {"CUDA_MPS_PIPE_DIRECTORY": f"{inside}/pipe", "CUDA_MPS_LOG_DIRECTORY": f"{inside}/log"}
    cores = devices[0].cores
    if 0 < cores < 100:
        envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(cores)
    limits = [f"{i}={d.memory}M" for i, d in enumerate(devices) if d.memory > 0]
    if limits:
        envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(limits)
    mounts = (Mount(f"{inside}/pipe", f"{host}/pipe", False),
              Mount(f"{inside}/log", f"{host}/log", False),
              Mount("/dev/shm", f"{host}/shm", False))
    return envs, mounts


def mode_answer(*, config: AgentConfig, inventory: Inventory, source: MigSource | None,
                pod: str, container: str, devices: Sequence[ContainerDevice]) -> ContainerAnswer:
    """The answer for a vGPU container in ``mig`` or ``mps`` mode; raises
    :class:`AllocationError` naming pod and problem."""
    if config.vgpu_mode == "mig":
        uuids = _mig_uuids(devices, inventory, source, pod, config.node_name)
        return ContainerAnswer(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(uuids)}, pod=pod,
                               container=container)
    envs, mounts = _mps(config, devices)
    envs = {"NVIDIA_VISIBLE_DEVICES": ",".join(d.uuid for d in devices), **envs}
    return ContainerAnswer(envs=envs, mounts=mounts, pod=pod, container=container)
