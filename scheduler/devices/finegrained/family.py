"""The fine-grained device family (Koordinator DeviceShare) as configured for this scheduler.

Builds each node's ledger from its ``Device`` object (:mod:`.model`) and its pods, reads a
pod's request (:mod:`.request`), and pre-filters nodes with one vector comparison per summary
column (healthy and idle GPUs, the most free core / ratio / bytes on one card, the most free
RDMA and FPGA share). The columns are necessary conditions only; the exact choice runs on the
candidates left. Nodes without a Device object pass every column (left to kubelet).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from scheduler.api.node import NodeInfo
from scheduler.api.task import TaskInfo
from scheduler.devices.base import DeviceConfig, DeviceWarning, Reporter, task_annotations
from scheduler.devices.finegrained.allocator import DEFAULT_WEIGHTS, Scoring
from scheduler.devices.finegrained.columns import (
    COLUMNS,
    col,
    exact_by_columns,
    used_card_fits,
    vector_conditions,
    vector_score,
)
from scheduler.devices.finegrained.devices import NAME, FineGrainedDevices, FitMemo
from scheduler.devices.finegrained.hints import JointSpec, parse_hints, parse_joint
from scheduler.devices.finegrained.ledger import Ledger
from scheduler.devices.finegrained.model import (
    NodeDeviceSpec,
    invalidated,
    parse_device_object,
)
from scheduler.devices.finegrained.names import (
    ALLOCATE_HINT,
    ALLOCATED,
    DEPRECATED,
    GPU_CORE,
    GPU_MINORS,
    GPU_SHARED,
    ISOLATION_LABEL,
    JOINT_ALLOCATE,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    PARTITION_SPEC,
    TYPE_GPU,
)
from scheduler.devices.finegrained.placement import (
    LEARNING_POLICIES,
    Placement,
    node_pod_shape,
    parse_policy_arguments,
    parse_target_workload,
    placement_scores,
    shared_placement,
)
from scheduler.devices.finegrained.plan import NodeTopology, PodDeviceRequest
from scheduler.devices.finegrained.request import (
    apply_hint,
    normalise,
    pod_device_requests,
    validate,
)
from scheduler.devices.finegrained.topology import (
    build_tree,
    node_partitions,
    parse_partition_spec,
)

__all__ = ["FineGrainedFamily"]



def scoring_of(config: DeviceConfig) -> Scoring:
    weights = dict(config.finegrained_weights) if config.finegrained_weights else dict(
        DEFAULT_WEIGHTS)
    return Scoring(most_allocated=config.finegrained_scoring == "MostAllocated",
                   weights=weights)


@dataclass(frozen=True, slots=True)
class FineGrainedFamily:
    config: DeviceConfig
    reporter: Reporter
    memo: FitMemo = field(default_factory=FitMemo)
    scoring: Scoring = field(init=False)
    placement: Placement | None = field(init=False)
    """The FGD paper's placement policy when ``FineGrainedPolicy`` names one."""
    last_specs: dict[str, NodeDeviceSpec] = field(default_factory=dict)
    """The last Device object seen per node (a deleted one leaves its devices unhealthy)."""
    NAME: ClassVar[str] = NAME
    COLUMNS: ClassVar[tuple[str, ...]] = COLUMNS

    def __post_init__(self) -> None:
        object.__setattr__(self, "scoring", scoring_of(self.config))
        placement = None
        if self.config.finegrained_policy:
            if self.config.finegrained_policy in LEARNING_POLICIES:
                # A learning policy's counts are per session (recounted at session open).
                placement = Placement(
                    self.config.finegrained_policy, tie_break=self.config.finegrained_tie_break,
                    target=parse_target_workload(self.config.finegrained_target),
                    args=parse_policy_arguments(self.config.finegrained_policy,
                                                dict(self.config.finegrained_policy_args)))
            else:
                placement = shared_placement(self.config.finegrained_policy,
                                             tie_break=self.config.finegrained_tie_break,
                                             entries=self.config.finegrained_target)
        object.__setattr__(self, "placement", placement)

    def adopt_placement(self, placement: Placement) -> None:
        """Take an equivalent placement kept from the last session (``Placement.same_learning``)."""
        object.__setattr__(self, "placement", placement)

    # -- nodes ----------------------------------------------------------------------------
    def build(self, node: NodeInfo, device_object: Mapping[str, Any] | None = None
              ) -> FineGrainedDevices:
        scoring = self.scoring
        warn = self._warner(node.name)
        if device_object is not None:
            spec = parse_device_object(device_object, warn)
            self.last_specs[node.name] = spec
        elif node.name in self.last_specs:
            # The Device object was deleted: keep the devices, unhealthy, with the pods'
            # usage, so a recreated object cannot hand out what pods still hold (#1186).
            spec = invalidated(self.last_specs[node.name])
        else:
            return FineGrainedDevices(node_name=node.name, ledger=None, scoring=scoring,
                                      isolation=node.labels.get(ISOLATION_LABEL, ""),
                                      share_blocked=self._share_blocked(node))
        partitions, honor = node_partitions(spec, node.labels, warn)
        topology = NodeTopology(
            tree=build_tree(tuple(d for d in spec.devices if d.type == TYPE_GPU)),
            partitions=partitions, honor_partitions=honor)
        devices = FineGrainedDevices(node_name=node.name, ledger=Ledger(spec),
                                     scoring=scoring, reporter=self.reporter,
                                     topology=topology, memo=self.memo,
                                     shape=self.memo.shape_id(spec, topology),
                                     isolation=node.labels.get(ISOLATION_LABEL, ""),
                                     share_blocked=self._share_blocked(node),
                                     placement=self.placement,
                                     gpu_model=node.labels.get(LABEL_GPU_MODEL, ""))
        devices.charge_checkpoints()
        return devices

    def _share_blocked(self, node: NodeInfo) -> bool:
        """Koordinator reads the Node's GPU vendor and model labels for this rule."""
        key = (node.labels.get(LABEL_GPU_VENDOR, ""), node.labels.get(LABEL_GPU_MODEL, ""))
        return key in self.config.finegrained_unsupported

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
        signature = json.dumps([sorted(requests.items()), annotations.get(ALLOCATE_HINT),
                                annotations.get(JOINT_ALLOCATE),
                                annotations.get(PARTITION_SPEC)])
        labels = (task.pod.get("metadata") or {}).get("labels") or {}
        isolation = str(labels.get(ISOLATION_LABEL) or "")
        return PodDeviceRequest(types=types, partition_spec=partition,
                                hints=hints, joint=joint, isolation=isolation,
                                signature=signature)

    # -- vector pre-filter and score ------------------------------------------------------
    def vector_fit(self, request: PodDeviceRequest, columns: Mapping[str, np.ndarray]
                   ) -> np.ndarray:
        mask = np.ones(len(columns[COLUMNS[0]]), dtype=bool)
        for failed, _ in vector_conditions(request, columns):
            mask &= ~failed
        return mask

    def vector_reasons(self, request: PodDeviceRequest, columns: Mapping[str, np.ndarray]
                       ) -> list[tuple[np.ndarray, str]]:
        return vector_conditions(request, columns)

    def reserve_conditions(self, task: TaskInfo, request: PodDeviceRequest,
                           columns: Mapping[str, np.ndarray]) -> list[tuple[np.ndarray, str]]:
        """The nodes ``fgd-learned``'s whole-card reserve (argument ``reserve``) keeps from
        ``task``, with the reason: while it holds, every node without a GPU in use that fits
        the pod's shared card (:func:`scheduler.devices.placement.learned.reserve_holds`)."""
        placement = self.placement
        gpu = request.types.get(TYPE_GPU)
        if placement is None or placement.args is None or not placement.args.reserve \
                or gpu is None or not gpu.shared or gpu.count != 1 or len(request.types) != 1:
            return []
        pod = node_pod_shape(task, request)
        whole = int(columns[col("gpu_idle")].sum())
        cards = int(columns[col(f"total.{GPU_CORE}")].sum()) // 100
        kept = placement.hold(pod, str(task.uid), whole_free=whole, cards=cards)
        if kept is None:
            return []
        reason = (f"GPU cards kept whole for whole-card pods (fgd-learned reserve): "
                  f"{whole} of {cards} whole, {kept} kept")
        return [(~used_card_fits(request, columns), reason)]

    def needs_exact(self, request: PodDeviceRequest, columns: Mapping[str, np.ndarray]
                    ) -> bool:
        """False when the columns already give the exact device verdict for every node."""
        return not exact_by_columns(request, columns)

    def vector_score(self, request: PodDeviceRequest, columns: Mapping[str, np.ndarray],
                     rows: np.ndarray) -> np.ndarray:
        """The node device score of ``rows`` (what the ledgers' ``filter_node`` scores),
        normalised as Koordinator's ``NormalizeScore`` (kube-scheduler's default: scaled so
        the best candidate gets 100)."""
        raw = vector_score(request, columns, rows, self.scoring)
        best = raw.max() if len(raw) else 0.0
        return raw * 100 // best if best > 0 else raw

    def placement_scores(self, task: TaskInfo, request: PodDeviceRequest | None, table: Any,
                         rows: np.ndarray) -> np.ndarray:
        """The placement policy's node scores of ``rows`` (see :mod:`.placement`)."""
        assert self.placement is not None
        return placement_scores(self.placement, node_pod_shape(task, request), table, rows,
                                key=str(task.uid))

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
