"""The fine-grained device family (Koordinator DeviceShare) as configured for this scheduler.

Builds each node's ledger from its ``Device`` object (:mod:`.model`) and its pods, reads a
pod's request (:mod:`.request`), and pre-filters nodes with one vector comparison per summary
column (healthy and idle GPUs, the most free core / ratio / bytes on one card, the most free
RDMA and FPGA share). The columns are necessary conditions only; the exact choice runs on the
candidates left. Nodes without a Device object pass every column (left to kubelet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from scheduler.api.devices.base import DeviceConfig, DeviceWarning, Reporter, task_annotations
from scheduler.api.devices.finegrained.allocator import DEFAULT_WEIGHTS, Scoring
from scheduler.api.devices.finegrained.devices import NAME, SUMMARY_COLUMNS, FineGrainedDevices
from scheduler.api.devices.finegrained.hints import JointSpec, parse_hints, parse_joint
from scheduler.api.devices.finegrained.ledger import Ledger
from scheduler.api.devices.finegrained.model import parse_device_object
from scheduler.api.devices.finegrained.names import (
    ALLOCATE_HINT,
    ALLOCATED,
    DEPRECATED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_MINORS,
    GPU_SHARED,
    JOINT_ALLOCATE,
    PARTITION_SPEC,
    TYPE_FPGA,
    TYPE_GPU,
    TYPE_RDMA,
    UNIT_OF,
)
from scheduler.api.devices.finegrained.plan import NodeTopology, PodDeviceRequest
from scheduler.api.devices.finegrained.request import (
    apply_hint,
    normalise,
    pod_device_requests,
    validate,
)
from scheduler.api.devices.finegrained.topology import (
    build_tree,
    parse_partition_spec,
    partition_table,
)
from scheduler.api.node import NodeInfo
from scheduler.api.task import TaskInfo

__all__ = ["FineGrainedFamily"]

_COL = dict(zip(("present", "gpu_healthy", "gpu_idle", "gpu_max_core", "gpu_max_ratio",
                 "gpu_max_bytes", "rdma_max", "rdma_with_free", "fpga_max", "fpga_with_free"),
                SUMMARY_COLUMNS, strict=True))


def scoring_of(config: DeviceConfig) -> Scoring:
    weights = dict(config.finegrained_weights) if config.finegrained_weights else dict(
        DEFAULT_WEIGHTS)
    return Scoring(most_allocated=config.finegrained_scoring == "MostAllocated",
                   weights=weights)


@dataclass(frozen=True, slots=True)
class FineGrainedFamily:
    config: DeviceConfig
    reporter: Reporter
    NAME: ClassVar[str] = NAME
    COLUMNS: ClassVar[tuple[str, ...]] = SUMMARY_COLUMNS

    # -- nodes ----------------------------------------------------------------------------
    def build(self, node: NodeInfo, device_object: Mapping[str, Any] | None = None
              ) -> FineGrainedDevices:
        scoring = scoring_of(self.config)
        if device_object is None:
            return FineGrainedDevices(node_name=node.name, ledger=None, scoring=scoring)
        warn = self._warner(node.name)
        spec = parse_device_object(device_object, warn)
        topology = NodeTopology(
            tree=build_tree(tuple(d for d in spec.devices if d.type == TYPE_GPU)),
            partitions=partition_table(spec, warn),
            honor_partitions=spec.partition_policy == "Honor")
        devices = FineGrainedDevices(node_name=node.name, ledger=Ledger(spec),
                                     scoring=scoring, reporter=self.reporter,
                                     topology=topology)
        devices.charge_checkpoints()
        return devices

    def _warner(self, node: str) -> Any:
        def warn(message: str) -> None:
            self.reporter.warn(DeviceWarning(kind="Device", name=node, message=message,
                                             reason="InvalidDevice"))
        return warn

    # -- pods -----------------------------------------------------------------------------
    def parse_request(self, task: TaskInfo) -> PodDeviceRequest | None:
        requests = pod_device_requests(task)
        if not requests:
            return None
        validate(task, requests)
        types = normalise(task, requests)
        if not types:
            return None
        describe = ", ".join(f"{name} {value}" for name, value in sorted(requests.items()))
        annotations = task_annotations(task)
        partition = None
        if TYPE_GPU in types and PARTITION_SPEC in annotations:
            partition = parse_partition_spec(task, annotations[PARTITION_SPEC])
        hints = parse_hints(task, annotations[ALLOCATE_HINT]) \
            if ALLOCATE_HINT in annotations else {}
        for kind, hint in hints.items():
            if kind in types:
                types[kind] = apply_hint(types[kind], strategy=hint.strategy,
                                         exclusive=hint.exclusive)
        joint = None
        if JOINT_ALLOCATE in annotations and len(types) > 1:
            spec = parse_joint(task, annotations[JOINT_ALLOCATE])
            kept = tuple(kind for kind in spec.types
                         if kind in types and not types[kind].apply_for_all)
            if len(kept) > 1:
                joint = JointSpec(kept, same_pcie=spec.same_pcie)
        return PodDeviceRequest(types=types, describe=describe, partition_spec=partition,
                                hints=hints, joint=joint)

    # -- vector pre-filter ----------------------------------------------------------------
    def _conditions(self, request: PodDeviceRequest, columns: Mapping[str, np.ndarray]
                    ) -> list[tuple[np.ndarray, str]]:
        out: list[tuple[np.ndarray, str]] = []
        gpu = request.types.get(TYPE_GPU)
        if gpu is not None:
            out.append((columns[_COL["gpu_healthy"]] < gpu.count, "Insufficient gpu devices"))
            if not gpu.shared:
                out.append((columns[_COL["gpu_idle"]] < gpu.count, "Insufficient gpu devices"))
            for name, key in ((GPU_CORE, "gpu_max_core"), (GPU_MEMORY_RATIO, "gpu_max_ratio"),
                              (GPU_MEMORY, "gpu_max_bytes")):
                if name in gpu.per_device:
                    out.append((columns[_COL[key]] < gpu.per_device[name],
                                "Insufficient gpu devices"))
        for kind in (TYPE_RDMA, TYPE_FPGA):
            unit = request.types.get(kind)
            if unit is None:
                continue
            out.append((columns[_COL[f"{kind}_max"]] < unit.per_device[UNIT_OF[kind]],
                        f"Insufficient {kind} devices"))
            if not unit.apply_for_all:
                out.append((columns[_COL[f"{kind}_with_free"]] < unit.count,
                            f"Insufficient {kind} devices"))
        return out

    def vector_fit(self, request: PodDeviceRequest, columns: Mapping[str, np.ndarray]
                   ) -> np.ndarray:
        absent = columns[_COL["present"]] <= 0
        mask = np.ones(len(absent), dtype=bool)
        for failed, _ in self._conditions(request, columns):
            mask &= ~failed
        return np.asarray(mask | absent)

    def vector_reasons(self, request: PodDeviceRequest, columns: Mapping[str, np.ndarray]
                       ) -> list[tuple[np.ndarray, str]]:
        present = columns[_COL["present"]] > 0
        return [(failed & present, reason) for failed, reason in
                self._conditions(request, columns)]

    def lock_name(self, request: PodDeviceRequest) -> str | None:
        return None  # Koordinator binds without a node lock

    @property
    def binding_keys(self) -> tuple[str, ...]:
        return (ALLOCATED, GPU_MINORS)

    @property
    def ignored_resources(self) -> frozenset[str]:
        # gpu.shared is a count of cards to spread over, not a node capacity; the legacy
        # names are mapped onto the new ones and checked by the family on Device nodes.
        return frozenset({GPU_SHARED, *DEPRECATED})

    @property
    def resource_dims(self) -> frozenset[str]:
        return frozenset()
