"""What the node agent tells the API server about its devices, and only the fields it owns.

At start, on every health change and at a modest period the reporter writes:

* the node's ``Device`` object (``scheduling.koordinator.sh/v1alpha1``, named after the node,
  owned by it), as koordlet's ``states_device_linux.go`` reports it: per GPU its UUID, minor,
  resources, health and topology, per RDMA NIC its bus id, ``koordinator.sh/rdma`` 100 and its
  VFs; labels for vendor, model and driver; the annotation
  ``node.koordinator.sh/gpu-checkpoints`` with the GPUs kubelet handed out without the
  scheduler (read from ``kubelet_internal_checkpoint``). Read, change the owned parts, write
  back with the ``resourceVersion`` (a 409 retries the whole step): other writers' labels,
  annotations and fields stay;
* the Node's labels for GPU vendor, model and driver (what koord-manager copies from the
  Device object) and, for the Volcano and HAMi families, the register and handshake
  annotations (``volcano.sh/node-vgpu-register`` + ``volcano.sh/node-vgpu-handshake`` as
  volcano-vgpu's ``RegistrInAnnotation``; ``hami.io/node-nvidia-register`` (JSON) +
  ``hami.io/node-handshake``), and GPU share's ``volcano.sh/gpu-unhealthy-ids`` (volcano's
  ``PatchUnhealthyGPUListOnNode``), as one merge patch of those keys only;
* the quantities no endpoint counts, into the Node's ``status.capacity`` and
  ``allocatable`` (:func:`~scheduler.devices.node.resources.status_resources`), as one merge
  patch of the status subresource.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_fixed

from scheduler.devices.finegrained.model import format_resource
from scheduler.devices.finegrained.names import (
    CHECKPOINTS,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    RDMA,
)
from scheduler.devices.names import GPU_UNHEALTHY_IDS
from scheduler.devices.node.inventory import Gpu, Inventory, Nic
from scheduler.devices.node.nodelock import is_conflict
from scheduler.devices.node.report import DRIVER_LABEL, keep_transition_times, unhealthy_condition
from scheduler.devices.node.resources import AgentConfig, Endpoint, status_resources

__all__ = ["DEVICE_API", "ReportAccess", "Reporter", "checkpoint_entries", "device_object",
           "gpu_topology", "hami_register", "hami_type", "node_annotations", "node_labels",
           "volcano_register"]

log = structlog.get_logger("lahar.nodeagent")

DEVICE_API = "scheduling.koordinator.sh/v1alpha1"
HANDSHAKE = {"volcano": "volcano.sh/node-vgpu-handshake", "hami": "hami.io/node-handshake"}


class ReportAccess(Protocol):
    """The API calls of the reporter (``scheduler.cluster.kube.nodeaccess`` offers them)."""

    def get_node(self, name: str) -> dict[str, Any]: ...

    def get_device(self, name: str) -> dict[str, Any] | None: ...

    def create_device(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def replace_device(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Raises on a stale ``resourceVersion`` (HTTP 409)."""
        ...

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        """JSON merge patch of the Node (metadata)."""
        ...

    def patch_node_status(self, name: str, patch: dict[str, Any]) -> None:
        """JSON merge patch of the Node's status subresource."""
        ...


def _model(gpu: Gpu) -> str:
    return gpu.model.removeprefix("NVIDIA ").strip().replace(" ", "-")


def node_labels(inventory: Inventory) -> dict[str, str]:
    """Vendor, model and driver as koordlet labels its Device (``fillGPUDevice``): the model
    only when every card has the same non-empty one (``getGPUDriverAndModel``), the driver
    only when known; an unknown value is left out, never written empty."""
    if not inventory.gpus:
        return {}
    labels = {LABEL_GPU_VENDOR: "nvidia"}
    models = {_model(gpu) for gpu in inventory.gpus}
    if len(models) == 1 and "" not in models:
        labels[LABEL_GPU_MODEL] = models.pop()
    if inventory.driver:
        labels[DRIVER_LABEL] = inventory.driver
    return labels


def _label_patch(inventory: Inventory) -> dict[str, str | None]:
    """The Node's owned labels: a model or driver no longer known is removed (``None``)."""
    if not inventory.gpus:
        return {}
    labels: dict[str, str | None] = {LABEL_GPU_MODEL: None, DRIVER_LABEL: None}
    labels.update(node_labels(inventory))
    return labels


def gpu_topology(gpu: Gpu) -> dict[str, Any] | None:
    """koordlet reports a GPU's topology only when NUMA node, PCIe root and bus id are all
    known (``buildGPUDevice``); a half-known topology would put the card under a root that
    does not exist."""
    if gpu.numa < 0 or not gpu.pcie or not gpu.bus_id:
        return None
    return {"socketID": -1, "nodeID": gpu.numa, "pcieID": gpu.pcie, "busID": gpu.bus_id}


def _gpu_entry(gpu: Gpu, now: float) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "gpu", "id": gpu.uuid, "minor": gpu.minor, "health": gpu.healthy,
        "resources": {GPU_CORE: "100", GPU_MEMORY: format_resource(GPU_MEMORY, gpu.memory),
                      GPU_MEMORY_RATIO: "100"}}
    topology = gpu_topology(gpu)
    if topology is not None:
        entry["topology"] = topology
    if not gpu.healthy:
        entry["conditions"] = [unhealthy_condition(
            reason="Unhealthy", message=f"GPU {gpu.uuid} failed its health check", now=now)]
    return entry


def _nic_entry(nic: Nic) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "rdma", "id": nic.bus_id, "minor": nic.minor, "health": nic.healthy,
        "resources": {RDMA: "100"},
        "topology": {"socketID": -1, "nodeID": nic.numa, "pcieID": nic.pcie,
                     "busID": nic.bus_id}}
    if nic.vfs:
        entry["vfGroups"] = [{"labels": {}, "vfs": [{"minor": -1, "busID": bus}
                                                    for bus in nic.vfs]}]
    return entry


def device_object(node_name: str, inventory: Inventory, *, now: float | None = None
                  ) -> dict[str, Any]:
    """The Device object's owned parts: ``spec.devices`` and the three labels."""
    now = time.time() if now is None else now
    devices = [*(_gpu_entry(g, now) for g in sorted(inventory.gpus, key=lambda g: g.minor)),
               *(_nic_entry(n) for n in sorted(inventory.nics, key=lambda n: n.minor))]
    return {"apiVersion": DEVICE_API, "kind": "Device",
            "metadata": {"name": node_name, "labels": node_labels(inventory)},
            "spec": {"devices": devices}}


def volcano_register(inventory: Inventory, config: AgentConfig) -> str:
    """volcano-vgpu's ``RegisterInAnnotation`` / ``EncodeNodeDevices``: per card
    ``UUID,split,MiB ÷ --gpu-memory-factor,NVIDIA-<NVML name>,health,mode:``."""
    factor = config.gpu_memory_factor
    return "".join(f"{g.uuid},{config.split_count},{g.memory_mib // factor},NVIDIA-{g.model},"
                   f"{'true' if g.healthy else 'false'},{config.vgpu_mode}:"
                   for g in inventory.gpus)


def hami_type(model: str) -> str:
    """HAMi's ``getAPIDevices``: the NVML name, ``NVIDIA-`` prefixed only when it does not
    start with ``NVIDIA`` already."""
    return model if model.startswith("NVIDIA") else f"NVIDIA-{model}"


def hami_register(inventory: Inventory, config: AgentConfig) -> str:
    """HAMi's ``getAPIDevices`` + ``MarshalNodeDevices``: a JSON array of ``DeviceInfo``, whose
    fields are all ``omitempty`` (index 0, NUMA 0 and an unhealthy card's ``health`` are left
    out); memory × ``deviceMemoryScaling`` and cores 100 × ``deviceCoreScaling``, neither
    scaled in MIG mode."""
    mig = config.vgpu_mode == "mig"
    cards = []
    for g in inventory.gpus:
        devmem = g.memory_mib if mig else int(g.memory_mib * config.device_memory_scaling)
        devcore = 100 if mig else int(config.device_cores_scaling * 100)
        fields: list[tuple[str, Any]] = [
            ("id", g.uuid), ("index", g.index), ("count", config.split_count),
            ("devmem", devmem), ("devcore", devcore), ("type", hami_type(g.model)),
            ("numa", max(g.numa, 0)), ("mode", config.vgpu_mode), ("health", g.healthy)]
        cards.append({key: value for key, value in fields if value})  # Go's omitempty
    return json.dumps(cards, separators=(",", ":"))


def node_annotations(config: AgentConfig, inventory: Inventory, now: float
                     ) -> dict[str, str | None]:
    """The Node annotations the Volcano and HAMi families read (``None`` deletes)."""
    cfg = config.devices
    out: dict[str, str | None] = {}
    if cfg.vgpu:
        names = cfg.names
        out[names.register] = (hami_register(inventory, config) if names.register_json
                               else volcano_register(inventory, config))
        stamp = datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
        out[HANDSHAKE[names.profile]] = f"Reported {stamp}"
    if cfg.gpu_sharing or cfg.gpu_number:
        broken = [str(g.index) for g in inventory.gpus if not g.healthy]
        out[GPU_UNHEALTHY_IDS] = ",".join(broken) if broken else None
    return out


def checkpoint_entries(text: str, inventory: Inventory, ours: set[str]) -> list[dict[str, Any]]:
    """GPUs kubelet handed out through another device plugin (``kubelet_internal_checkpoint``,
    ``Data.PodDeviceEntries``; ``DeviceIDs`` a list, or a map NUMA node → list in newer
    kubelets), as ``[{podUID, containerName, resourceName, deviceIDs}]`` with GPU UUIDs.
    Entries of our own resources are left out: the scheduler placed those."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return []
    entries = ((data.get("Data") or {}).get("PodDeviceEntries") or []
               if isinstance(data, Mapping) else [])
    known = {gpu.uuid for gpu in inventory.gpus}
    out: list[dict[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, Mapping) or entry.get("ResourceName") in ours:
            continue
        raw = entry.get("DeviceIDs") or []
        ids = [i for group in raw.values() for i in group] if isinstance(raw, Mapping) else raw
        uuids = sorted({str(i).partition("::")[0] for i in ids} & known)
        if uuids:
            out.append({"podUID": str(entry.get("PodUID", "")),
                        "containerName": str(entry.get("ContainerName", "")),
                        "resourceName": str(entry.get("ResourceName", "")),
                        "deviceIDs": uuids})
    return out


def _retrying(attempts: int, interval: float, sleep: Callable[[float], None]) -> Retrying:
    return Retrying(stop=stop_after_attempt(attempts), wait=wait_fixed(interval), sleep=sleep,
                    retry=retry_if_exception(is_conflict), reraise=True)


@dataclass(slots=True)
class Reporter:
    access: ReportAccess
    config: AgentConfig
    endpoints: tuple[Endpoint, ...]
    checkpoint_path: str = ""
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    attempts: int = 5
    interval: float = 0.1
    writes: int = field(default=0)

    def report(self, inventory: Inventory) -> None:
        """Write everything; each part is attempted even when another fails (logged)."""
        for part in (self._device, self._node, self._status):
            try:
                part(inventory)
            except Exception as exc:
                log.warning("report failed", part=part.__name__.strip("_"), error=str(exc))

    def _device(self, inventory: Inventory) -> None:
        if not self.config.devices.finegrained:
            return
        for attempt in _retrying(self.attempts, self.interval, self.sleep):
            with attempt:
                self._write_device(inventory)

    def _checkpoints(self, inventory: Inventory) -> str | None:
        if not self.checkpoint_path:
            return None
        try:
            with open(self.checkpoint_path, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            return None
        ours = {endpoint.resource for endpoint in self.endpoints}
        entries = checkpoint_entries(text, inventory, ours)
        return json.dumps(entries, separators=(",", ":")) if entries else None

    def _write_device(self, inventory: Inventory) -> None:
        name = self.config.node_name
        wanted = device_object(name, inventory, now=self.clock())
        checkpoints = self._checkpoints(inventory)
        current = self.access.get_device(name)
        if current is None:
            if checkpoints:
                wanted["metadata"]["annotations"] = {CHECKPOINTS: checkpoints}
            owner = self._owner()
            if owner:
                wanted["metadata"]["ownerReferences"] = [owner]
            self.access.create_device(wanted)
            self.writes += 1
            return
        updated = json.loads(json.dumps(current))
        meta = updated.setdefault("metadata", {})
        labels = dict(meta.get("labels") or {})
        for key in (LABEL_GPU_MODEL, DRIVER_LABEL):  # owned: gone when no longer known
            labels.pop(key, None)
        labels.update(wanted["metadata"]["labels"])
        meta["labels"] = labels
        annotations = dict(meta.get("annotations") or {})
        if checkpoints:
            annotations[CHECKPOINTS] = checkpoints
        else:
            annotations.pop(CHECKPOINTS, None)
        meta["annotations"] = annotations
        spec = dict(updated.get("spec") or {})
        keep_transition_times(spec.get("devices") or [], wanted["spec"]["devices"])
        spec["devices"] = wanted["spec"]["devices"]
        updated["spec"] = spec
        if updated != current:  # koordlet skips equal objects too
            self.access.replace_device(updated)
            self.writes += 1

    def _owner(self) -> dict[str, Any] | None:
        try:
            node = self.access.get_node(self.config.node_name)
        except Exception:
            return None
        uid = (node.get("metadata") or {}).get("uid")
        return {"apiVersion": "v1", "kind": "Node", "name": self.config.node_name,
                "uid": uid, "controller": True, "blockOwnerDeletion": True} if uid else None

    def _node(self, inventory: Inventory) -> None:
        labels = _label_patch(inventory)
        annotations = node_annotations(self.config, inventory, self.clock())
        patch: dict[str, Any] = {}
        if labels:
            patch["labels"] = labels
        if annotations:
            patch["annotations"] = annotations
        if patch:
            self.access.patch_node(self.config.node_name, {"metadata": patch})
            self.writes += 1

    def _status(self, inventory: Inventory) -> None:
        resources = status_resources(self.config, inventory)
        if resources:
            self.access.patch_node_status(self.config.node_name, {"status": {
                "capacity": resources, "allocatable": resources}})
            self.writes += 1
