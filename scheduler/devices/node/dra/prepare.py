"""``NodePrepareResources`` / ``NodeUnprepareResources``: a claim's allocation turned into CDI
devices, the way the DRA drivers do it.

For each claim kubelet names (namespace, name, UID) the preparer reads the ResourceClaim from
the API server, checks its UID (a claim deleted and re-created under the same name is not the
one kubelet means) and takes the results of ``status.allocation.devices.results`` whose
``driver`` is this driver (other drivers' results are theirs to prepare, as NVIDIA's
``k8s-dra-driver-gpu`` ``prepareDevices`` filters them). Each result names a device of this
node's pool (:func:`~scheduler.devices.node.dra.devices.device_for_name`); one the node
does not have (or a card turned unhealthy, or a card kept for the device-plugin families by
``--dra-cards``) fails the claim with an error naming claim, pool and device, which kubelet
reports on the pod.

What a device gives (one CDI device per result, :mod:`.cdispec`):

* a whole GPU: ``/dev/nvidia<minor>`` and ``NVIDIA_VISIBLE_DEVICES=<UUID>``;
* a GPU shared by consumable capacity (a result with ``consumedCapacity``, HAMi's DRA
  driver's model): HAMi-core's environment and mounts with the values the vGPU device-plugin
  path gives (:func:`~scheduler.devices.node.allocate.hami_core_edits`): the consumed
  ``memory`` as ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` (MiB), the consumed ``cores`` as
  ``CUDA_DEVICE_SM_LIMIT`` (100 when not consumed; 0, which the published request policy
  allows, HAMi-core reads as no limit), the shared cache, ``LD_PRELOAD`` through
  ``/etc/ld.so.preload`` and the cache directory ``<hook>/vgpu/containers/claim_<UID>``;
* a MIG instance: the parent's device node and the instance's capability nodes, and
  ``NVIDIA_VISIBLE_DEVICES=<MIG UUID>``;
* an RDMA NIC (or VF): ``/dev/infiniband/rdma_cm`` and its ``uverbs`` node.

The GPU environment is the claim's (all its GPUs, limits numbered in the claim's order) and is
put on each of its GPU devices alike, so the runtime's merge of the CDI edits gives it once.

A prepared claim is written to the checkpoint (:mod:`.checkpoint`) before the answer: kubelet
retries a prepare until every claim is answered, and a repeated prepare of a checkpointed claim
answers the same devices without reading the API server. Unprepare removes the claim's CDI
spec and its checkpoint entry; an unknown claim is already unprepared (no error).
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.devices.codec import ContainerDevice
from scheduler.devices.node.allocate import RDMA_CM, hami_core_edits
from scheduler.devices.node.cdi import DriverFiles, discover_driver
from scheduler.devices.node.dra.cdispec import (
    ClaimDevice,
    claim_spec,
    qualified,
    remove_claim_spec,
    write_claim_spec,
)
from scheduler.devices.node.dra.checkpoint import Checkpoint
from scheduler.devices.node.dra.devices import device_for_name, mig_layout
from scheduler.devices.node.inventory import MIB, Gpu, Inventory, uverbs_of
from scheduler.devices.node.modes import MigInstance, MigSource
from scheduler.devices.node.resources import AgentConfig

__all__ = ["ClaimReader", "PrepareError", "PreparedDevice", "Preparer"]

class PrepareError(Exception):
    """Why a claim cannot be prepared; the message names the claim and the problem."""


class ClaimReader(Protocol):
    def get_resource_claim(self, namespace: str, name: str) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    """One device of a ``NodePrepareResourceResponse``."""

    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]
    share_id: str = ""

    def record(self) -> dict[str, Any]:
        return {"requests": list(self.requests), "pool": self.pool, "device": self.device,
                "cdi": list(self.cdi_ids), "share": self.share_id}

    @staticmethod
    def from_record(data: Mapping[str, Any]) -> PreparedDevice:
        return PreparedDevice(requests=tuple(data.get("requests", ())), pool=data["pool"],
                              device=data["device"], cdi_ids=tuple(data.get("cdi", ())),
                              share_id=str(data.get("share", "")))


def _mib(value: object, *, where: str) -> int:
    try:
        return int(parse_quantity(str(value))) // MIB
    except (QuantityError, ValueError) as exc:
        raise PrepareError(f"{where}: bad memory quantity {value!r}: {exc}") from None


def _cores(value: object, *, where: str) -> int:
    try:
        cores = int(parse_quantity(str(value)))
    except (QuantityError, ValueError) as exc:
        raise PrepareError(f"{where}: bad cores quantity {value!r}: {exc}") from None
    if not 0 <= cores <= 100:  # the request policy's range; 0 is no limit to HAMi-core
        raise PrepareError(f"{where}: cores {cores} is not a percentage in 0..100")
    return cores


@dataclass(slots=True)
class Preparer:
    driver: str
    node_name: str
    config: AgentConfig
    inventory: Callable[[], Inventory]
    claims: ClaimReader
    checkpoint: Checkpoint
    cdi_root: str = "/var/run/cdi"
    driver_root: str = "/"
    mig: MigSource | None = None
    cards: Collection[int] | None = None
    """GPU indices DRA may prepare (``--dra-cards``); None: every card."""
    new_id: Callable[[], str] = field(default_factory=lambda: lambda: str(uuidlib.uuid4()))
    _files: DriverFiles | None = None

    @property
    def pool(self) -> str:
        return self.node_name

    def prepare(self, namespace: str, name: str, uid: str) -> list[PreparedDevice]:
        done = self.checkpoint.get(uid)
        if done is not None:  # kubelet's retry, or after a restart: the same answer
            return [PreparedDevice.from_record(d) for d in done.get("devices", ())]
        where = f"ResourceClaim {namespace}/{name}"
        try:
            claim = self.claims.get_resource_claim(namespace, name)
        except Exception as exc:  # the API error goes to kubelet as text
            raise PrepareError(f"{where}: cannot read it: {exc}") from None
        found = str((claim.get("metadata") or {}).get("uid", ""))
        if found != uid:
            raise PrepareError(f"{where}: UID is {found or 'unset'}, kubelet asks for {uid}")
        allocation = (claim.get("status") or {}).get("allocation")
        if not isinstance(allocation, Mapping):
            raise PrepareError(f"{where}: status.allocation is not set (not allocated)")
        results = [r for r in ((allocation.get("devices") or {}).get("results") or [])
                   if isinstance(r, Mapping) and r.get("driver") == self.driver]
        devices, answer = self._devices(where, uid, results)
        spec = claim_spec(driver=self.driver, claim_uid=uid, devices=devices,
                          files=self._driver_files(), dev_root=self.driver_root)
        write_claim_spec(self.cdi_root, self.driver, uid, spec)
        self.checkpoint.put(uid, {"namespace": namespace, "name": name,
                                  "devices": [d.record() for d in answer]})
        return answer

    def unprepare(self, uid: str) -> None:
        remove_claim_spec(self.cdi_root, self.driver, uid)
        self.checkpoint.remove(uid)

    def prepared(self) -> dict[str, dict[str, Any]]:
        return self.checkpoint.claims()

    def _driver_files(self) -> DriverFiles:
        if self._files is None:
            self._files = discover_driver(self.driver_root)
        return self._files

    def _devices(self, where: str, uid: str, results: Sequence[Mapping[str, Any]]
                 ) -> tuple[list[ClaimDevice], list[PreparedDevice]]:
        inventory = self.inventory()
        layout = mig_layout(self.mig, inventory) if self.mig is not None else None
        gpus: list[tuple[int, Gpu, MigInstance | None, Mapping[str, Any]]] = []
        devices: list[ClaimDevice | None] = []
        answer: list[PreparedDevice] = []
        for i, result in enumerate(results):
            pool, device = str(result.get("pool", "")), str(result.get("device", ""))
            at = f"{where}: allocation result #{i} (pool {pool}, device {device})"
            if pool != self.pool:
                raise PrepareError(f"{at}: the pool is not node {self.node_name}'s")
            found = device_for_name(inventory, device, layout)
            if found is None:
                raise PrepareError(f"{at}: node {self.node_name} has no such device")
            if found.gpu is not None:
                gpu = found.gpu
                if not gpu.healthy:
                    raise PrepareError(f"{at}: GPU {gpu.uuid} is unhealthy")
                if self.cards is not None and gpu.index not in self.cards:
                    raise PrepareError(f"{at}: GPU {gpu.index} is not one of --dra-cards")
                gpus.append((len(devices), gpu, found.mig, result))
                devices.append(None)  # filled below with the claim's GPU environment
            else:
                nic = found.nic
                assert nic is not None
                if not nic.healthy:
                    raise PrepareError(f"{at}: RDMA NIC {nic.bus_id} is unhealthy")
                function = found.vf or nic.bus_id
                path = uverbs_of(self.config.sysfs, function) or (
                    f"/dev/infiniband/uverbs{nic.minor}" if not found.vf else "")
                if not path:
                    raise PrepareError(f"{at}: no uverbs device for RDMA function {function}")
                devices.append(ClaimDevice(name=device, device_nodes=(RDMA_CM, path)))
            answer.append(PreparedDevice(
                requests=(str(result.get("request", "")),), pool=pool, device=device,
                cdi_ids=(qualified(self.driver, uid, device),),
                share_id=str(result.get("shareID", "") or "")))
        if gpus:
            env, mounts = self._gpu_edits(where, uid, gpus)
            for position, gpu, instance, result in gpus:
                nodes = (f"/dev/nvidia{gpu.minor}", *(instance.caps if instance else ()))
                devices[position] = ClaimDevice(name=str(result.get("device")), env=env,
                                                device_nodes=nodes, mounts=mounts)
        return [d for d in devices if d is not None], answer

    def _gpu_edits(self, where: str, uid: str,
                   gpus: Sequence[tuple[int, Gpu, MigInstance | None, Mapping[str, Any]]]
                   ) -> tuple[dict[str, str], tuple[tuple[str, str, bool], ...]]:
        shares: list[ContainerDevice] = []
        for _, gpu, instance, result in gpus:
            consumed = result.get("consumedCapacity") or {}
            if instance is not None or not consumed:
                continue
            at = f"{where}: consumedCapacity of device {result.get('device')}"
            memory = (_mib(consumed["memory"], where=at) if "memory" in consumed
                      else gpu.memory_mib)
            cores = _cores(consumed["cores"], where=at) if "cores" in consumed else 100
            shares.append(ContainerDevice(uuid=gpu.uuid, type="NVIDIA", memory=memory,
                                          cores=cores))
        if shares and len(shares) != len(gpus):
            raise PrepareError(f"{where}: mixes shared and whole GPUs in one claim")
        if not shares:
            visible = ",".join(instance.uuid if instance else gpu.uuid
                               for _, gpu, instance, _ in gpus)
            return {"NVIDIA_VISIBLE_DEVICES": visible}, ()
        # DRA's consumed memory is a quantity: no volcano memory factor applies to it.
        config = replace(self.config, gpu_memory_factor=1)
        env, mounts = hami_core_edits(config, shares, cache_id=self.new_id(),
                                      cache_dir_name=f"claim_{uid}", container={})
        return env, tuple((m.container_path, m.host_path, m.read_only) for m in mounts)
