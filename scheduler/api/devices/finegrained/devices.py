"""``NodeInfo.others["FineGrained"]``: one node's fine-grained devices in Volcano's interface.

Add/sub follow bound pods' ``device-allocated`` annotations (also those in a pending Binding),
filter and score run a full device choice without keeping it (as Koordinator's Filter does),
and allocate runs it again on the chosen node, charges it and returns the Binding annotations
(``device-allocated`` in Koordinator's JSON shape, ``id`` filled from the Device object, plus
``gpu-minors``). A rollback or an eviction removes the pod's whole charge, every dimension.
A node without a Device object is left to kubelet: every check passes and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.api.devices.base import (
    DeviceError,
    DeviceFit,
    DeviceRequestError,
    DeviceWarning,
    Reporter,
)
from scheduler.api.devices.base import task_annotations as binding_view
from scheduler.api.devices.finegrained.allocator import Scoring, node_score
from scheduler.api.devices.finegrained.hints import parse_hints
from scheduler.api.devices.finegrained.ledger import (
    Allocation,
    AllocationError,
    Ledger,
    checkpoint_allocation,
    decode_allocation,
    encode_allocation,
)
from scheduler.api.devices.finegrained.names import (
    ALLOCATE_HINT,
    ALLOCATED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_MINORS,
    TYPE_FPGA,
    TYPE_GPU,
    TYPE_RDMA,
    UNIT_OF,
)
from scheduler.api.devices.finegrained.plan import NodeTopology, PodDeviceRequest, plan
from scheduler.api.status import Status
from scheduler.api.task import TaskInfo

__all__ = ["CHECKPOINT_PREFIX", "SUMMARY_COLUMNS", "FineGrainedDevices"]

NAME = "FineGrained"
CHECKPOINT_PREFIX = "checkpoint/"
SUMMARY_COLUMNS = (
    "finegrained.present", "finegrained.gpu_healthy", "finegrained.gpu_idle",
    "finegrained.gpu_max_core", "finegrained.gpu_max_ratio", "finegrained.gpu_max_bytes",
    "finegrained.rdma_max", "finegrained.rdma_with_free", "finegrained.fpga_max",
    "finegrained.fpga_with_free",
)


@dataclass(slots=True)
class FineGrainedDevices:
    node_name: str
    ledger: Ledger | None
    """None when the node has no Device object (left to kubelet)."""
    scoring: Scoring
    reporter: Reporter | None = None
    policy: str = "binpack"
    topology: NodeTopology = field(default_factory=NodeTopology)

    # -- accounting ---------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        if self.ledger is None:
            return
        text = binding_view(task).get(ALLOCATED)
        if not text:
            return
        try:
            allocation = decode_allocation(text)
        except AllocationError as exc:
            self._warn(task, f"pod {task.key} on node {self.node_name} has an unreadable "
                             f"{ALLOCATED} annotation ({exc}); its device usage is not counted")
            return
        # A pod this scheduler placed may also show up in kubelet's checkpoint.
        self.ledger.discharge(CHECKPOINT_PREFIX + str(task.uid))
        self.ledger.charge(str(task.uid), allocation, self._exclusive(task, allocation))

    def _exclusive(self, task: TaskInfo, allocation: Allocation
                   ) -> frozenset[tuple[str, str]]:
        """PCIe roots the pod holds under a PCIeLevel hint, from its own annotation."""
        text = binding_view(task).get(ALLOCATE_HINT)
        if not text or self.ledger is None:
            return frozenset()
        try:
            hints = parse_hints(task, text)
        except DeviceRequestError:
            return frozenset()  # reported when the pod was scheduled
        return PodDeviceRequest(types={}, hints=hints).exclusive_roots_of(allocation,
                                                                          self.ledger)

    def sub_task(self, task: TaskInfo) -> None:
        if self.ledger is not None:
            self.ledger.discharge(str(task.uid))

    def _warn(self, task: TaskInfo, message: str) -> None:
        if self.reporter is not None:
            self.reporter.warn(DeviceWarning(kind="Pod", name=task.name,
                                             namespace=task.namespace, uid=str(task.uid),
                                             message=message))

    # -- choosing -----------------------------------------------------------------------
    def filter_node(self, task: TaskInfo, request: PodDeviceRequest) -> DeviceFit:
        if self.ledger is None:
            return DeviceFit()
        result = plan(self.ledger, request, scoring=self.scoring, topology=self.topology)
        if isinstance(result, str):
            return DeviceFit(Status.unschedulable(result))
        return DeviceFit(score=float(node_score(self.ledger, request.types, self.scoring)))

    def allocate(self, task: TaskInfo, request: PodDeviceRequest, *, now: float
                 ) -> dict[str, str]:
        if self.ledger is None:
            return {}
        self.sub_task(task)
        result = plan(self.ledger, request, scoring=self.scoring, topology=self.topology)
        if isinstance(result, str):
            raise DeviceError(f"node {self.node_name}: {result}")
        self.ledger.charge(str(task.uid), result,
                           request.exclusive_roots_of(result, self.ledger))
        out = {ALLOCATED: encode_allocation(result, self.ledger.devices)}
        if result.get(TYPE_GPU):
            out[GPU_MINORS] = ",".join(str(p.minor) for p in result[TYPE_GPU])
        return out

    def release(self, task: TaskInfo) -> tuple[str, ...]:
        return (ALLOCATED, GPU_MINORS)

    # -- summaries ----------------------------------------------------------------------
    def summary(self) -> tuple[float, ...]:
        ledger = self.ledger
        if ledger is None:
            return (0.0,) * len(SUMMARY_COLUMNS)
        healthy = idle = 0
        max_core = max_ratio = max_bytes = 0
        for device in ledger.by_type.get(TYPE_GPU, ()):
            if not device.total:
                continue
            healthy += 1
            free = ledger.free(TYPE_GPU, device.minor)
            if ledger.is_untouched(TYPE_GPU, device.minor):
                idle += 1
            max_core = max(max_core, free.get(GPU_CORE, 0))
            max_ratio = max(max_ratio, free.get(GPU_MEMORY_RATIO, 0))
            max_bytes = max(max_bytes, free.get(GPU_MEMORY, 0))
        units: list[float] = []
        for kind in (TYPE_RDMA, TYPE_FPGA):
            name = UNIT_OF[kind]
            frees = [ledger.free(kind, d.minor).get(name, 0)
                     for d in ledger.by_type.get(kind, ()) if d.total]
            units += [float(max(frees, default=0)), float(sum(1 for f in frees if f > 0))]
        return (1.0, float(healthy), float(idle), float(max_core), float(max_ratio),
                float(max_bytes), *units)

    def status(self) -> str:
        if self.ledger is None:
            return f"{NAME} node {self.node_name}: no Device object"
        parts = []
        for (kind, minor), used in sorted(self.ledger.used.items()):
            parts.append(f"{kind}{minor}:" + ",".join(f"{k.split('/')[-1]}={v}"
                                                      for k, v in sorted(used.items())))
        return f"{NAME} node {self.node_name}: {' '.join(parts) or 'nothing used'}"

    def clone(self) -> FineGrainedDevices:
        return FineGrainedDevices(node_name=self.node_name,
                                  ledger=None if self.ledger is None else self.ledger.clone(),
                                  scoring=self.scoring, reporter=self.reporter,
                                  policy=self.policy, topology=self.topology)

    def charge_checkpoints(self) -> None:
        """Charge the GPUs kubelet handed out on its own (Device object checkpoints)."""
        if self.ledger is None:
            return
        for uid, minors in self.ledger.spec.checkpoint_minors.items():
            self.ledger.charge(CHECKPOINT_PREFIX + uid, checkpoint_allocation(self.ledger,
                                                                              minors))
