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
from typing import Any

from scheduler.api.node import NodeInfo
from scheduler.api.status import Status
from scheduler.api.task import TaskInfo
from scheduler.devices.base import (
    DeviceError,
    DeviceFit,
    DeviceRequestError,
    DeviceWarning,
    Reporter,
)
from scheduler.devices.base import task_annotations as binding_view
from scheduler.devices.finegrained.allocator import Scoring, node_score
from scheduler.devices.finegrained.columns import COLUMNS, gpu_kinds, summary
from scheduler.devices.finegrained.hints import parse_hints
from scheduler.devices.finegrained.ledger import (
    Allocation,
    AllocationError,
    Ledger,
    ReadAllocation,
    charge_whole,
    checkpoint_allocation,
    encode_allocation,
    read_allocation,
)
from scheduler.devices.finegrained.model import NodeDeviceSpec
from scheduler.devices.finegrained.names import (
    ALLOCATE_HINT,
    ALLOCATED,
    GPU_MINORS,
    TYPE_GPU,
)
from scheduler.devices.finegrained.placement import Placement, placement_picks
from scheduler.devices.finegrained.plan import (
    ISOLATION_REASON,
    SHARE_UNSUPPORTED_REASON,
    NodeTopology,
    PodDeviceRequest,
    plan,
)

__all__ = ["CHECKPOINT_PREFIX", "SUMMARY_COLUMNS", "FineGrainedDevices", "FitMemo"]

NAME = "FineGrained"
INVALID_ANNOTATION = "InvalidDeviceAnnotation"
OVERBOOKED = "DeviceOverbooked"
CHECKPOINT_PREFIX = "checkpoint/"
SUMMARY_COLUMNS = COLUMNS


@dataclass(slots=True)
class FitMemo:
    """Device choices shared by nodes of the same shape in the same state.

    Most nodes of a cluster are alike (same devices, same topology) and many are in the same
    state (often empty), and the pods of one job ask the same, so most exact checks repeat one
    computation. A choice depends only on the node's shape (its Device object without names),
    the ledger's :meth:`~.ledger.Ledger.state_key` and the request's content
    (:attr:`~.plan.PodDeviceRequest.signature`), so verdicts, choices and summary rows are kept
    under those. Choices that hold virtual functions are not kept: VF bus ids are the node's.
    A request without a signature is keyed by identity and stored with its verdict, so a
    reused ``id`` can never return another request's verdict.
    """

    verdicts: dict[tuple[int, Any, Any], tuple[PodDeviceRequest, DeviceFit]] = field(
        default_factory=dict)
    plans: dict[tuple[int, Any, Any], Allocation | str] = field(default_factory=dict)
    rows: dict[tuple[int, Any, tuple[int, ...], str, bool], tuple[float, ...]] = field(
        default_factory=dict)
    """Summary rows by (shape, state, GPU pod kinds): identical nodes share one computation."""
    shapes: dict[Any, int] = field(default_factory=dict)
    decoded: dict[str, ReadAllocation] = field(default_factory=dict)
    limit: int = 50_000

    def shape_id(self, spec: NodeDeviceSpec, topology: NodeTopology) -> int:
        roots: dict[str, int] = {}
        devices = tuple(
            (d.type, d.minor, tuple(sorted(d.total.items())), d.numa,
             roots.setdefault(d.pcie, len(roots)) if d.has_topology else -1,
             tuple(sorted(d.labels.items())), tuple(vf.labels for vf in d.vfs))
            for d in spec.devices)
        key = (devices, topology.tree, repr(topology.partitions), topology.honor_partitions)
        return self.shapes.setdefault(key, len(self.shapes))

    def get(self, key: tuple[int, Any, Any], request: PodDeviceRequest) -> DeviceFit | None:
        hit = self.verdicts.get(key)
        if hit is None or (not request.signature and hit[0] is not request):
            return None
        return hit[1]

    def put(self, key: tuple[int, Any, Any], request: PodDeviceRequest, fit: DeviceFit) -> None:
        if len(self.verdicts) >= self.limit:
            self.verdicts.clear()
        self.verdicts[key] = (request, fit)

    def read(self, text: str) -> ReadAllocation:
        """``device-allocated`` read once per text (a pod's annotation is read again on every
        update of the pod and every node rebuild)."""
        read = self.decoded.get(text)
        if read is None:
            read = read_allocation(text)
            if len(self.decoded) >= self.limit:
                self.decoded.clear()
            self.decoded[text] = read
        return read

    def seed(self, text: str, allocation: Allocation) -> None:
        if len(self.decoded) >= self.limit:
            self.decoded.clear()
        self.decoded[text] = ReadAllocation(allocation)

    def remember_plan(self, key: tuple[int, Any, Any], result: Allocation | str) -> None:
        if isinstance(result, dict) and any(p.vfs for picks in result.values() for p in picks):
            return
        if len(self.plans) >= self.limit:
            self.plans.clear()
        self.plans[key] = result


@dataclass(slots=True)
class FineGrainedDevices:
    node_name: str
    ledger: Ledger | None
    """None when the node has no Device object (left to kubelet)."""
    scoring: Scoring
    reporter: Reporter | None = None
    policy: str = "binpack"
    topology: NodeTopology = field(default_factory=NodeTopology)
    memo: FitMemo | None = None
    shape: int = -1
    isolation: str = ""
    """The Node's ``koordinator.sh/gpu-isolation-provider`` label."""
    share_blocked: bool = False
    """The Node's GPU vendor/model is in ``FineGrainedShareUnsupportedModels``."""
    placement: Placement | None = None
    """``FineGrainedPolicy``: the policy that picks a plain GPU request's cards."""
    gpu_model: str = ""
    """The Node's ``node.koordinator.sh/gpu-model`` label (the placement policy's model)."""
    pods: dict[str, str] = field(default_factory=dict)
    """Holder (pod UID) → namespace/name of the bound pods charged here, to name them when a
    device is overbooked."""

    # -- accounting ---------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        if self.ledger is None:
            return
        text = binding_view(task).get(ALLOCATED)
        if not text:
            return
        try:
            read = self.memo.read(text) if self.memo is not None else read_allocation(text)
        except AllocationError as exc:
            self._warn(task, f"pod {task.key} on node {self.node_name} has an unreadable "
                             f"{ALLOCATED} annotation ({exc}); its device usage is not counted")
            return
        allocation = read.allocation
        if read.skipped:
            self._warn(task, f"pod {task.key} on node {self.node_name}: annotation {ALLOCATED}: "
                             f"{'; '.join(read.skipped)}; the rest of it is counted")
        if read.whole:
            allocation = charge_whole(allocation, read.whole, self.ledger.devices)
        # A pod this scheduler placed may also show up in kubelet's checkpoint.
        self.ledger.discharge(CHECKPOINT_PREFIX + str(task.uid))
        if str(task.uid) in self.ledger.holders:
            return
        keys = {(kind, pick.minor) for kind, picks in allocation.items() for pick in picks}
        within = {key for key in keys if not self._excess(key)}
        self.ledger.charge(str(task.uid), allocation, self._exclusive(task, allocation))
        self.pods[str(task.uid)] = task.key
        for key in sorted(within):
            self._report_overbooked(key)

    def _excess(self, key: tuple[str, int]) -> list[str]:
        """What the pods on device ``key`` hold beyond it (bound pods may come in that way)."""
        assert self.ledger is not None
        device = self.ledger.devices.get(key)
        used = self.ledger.used.get(key, {})
        if device is None or not device.total:
            return []
        return [f"{name} {value}/{device.total[name]}" for name, value in sorted(used.items())
                if name in device.total and value > device.total[name]]

    def _report_overbooked(self, key: tuple[str, int]) -> None:
        excess = self._excess(key)
        if not excess or self.reporter is None or self.ledger is None:
            return
        kind, minor = key
        pods = sorted(self.pods.get(holder, f"kubelet checkpoint of pod "
                                            f"{holder.removeprefix(CHECKPOINT_PREFIX)}")
                      for holder, allocation in self.ledger.holders.items()
                      if any(pick.minor == minor for pick in allocation.get(kind, ())))
        self.reporter.warn(DeviceWarning(
            kind="Node", name=self.node_name, reason=OVERBOOKED,
            message=f"node {self.node_name}: {kind} {minor} is overbooked by the pods bound to it "
                    f"({', '.join(excess)}; pods {', '.join(pods)}); every pod keeps its usage, "
                    f"so the device takes no new pod until enough of them end"))

    def _exclusive(self, task: TaskInfo, allocation: Allocation
                   ) -> frozenset[tuple[str, str]]:
        """PCIe roots the pod holds under a PCIeLevel hint, from its own annotation."""
        text = binding_view(task).get(ALLOCATE_HINT)
        if not text or self.ledger is None:
            return frozenset()
        try:
            hints = parse_hints(task, text)
        except DeviceRequestError as exc:
            self._warn(task, f"pod {task.key} on node {self.node_name} holds devices but its "
                             f"{ALLOCATE_HINT} cannot be read ({exc}); no PCIe root is held "
                             f"exclusively for it")
            return frozenset()
        return PodDeviceRequest(types={}, hints=hints).exclusive_roots_of(allocation,
                                                                          self.ledger)

    def sub_task(self, task: TaskInfo) -> None:
        if self.ledger is not None:
            self.ledger.discharge(str(task.uid))
        self.pods.pop(str(task.uid), None)

    def _warn(self, task: TaskInfo, message: str) -> None:
        if self.reporter is not None:
            self.reporter.warn(DeviceWarning(kind="Pod", name=task.name,
                                             namespace=task.namespace, uid=str(task.uid),
                                             message=message, reason=INVALID_ANNOTATION))

    # -- choosing -----------------------------------------------------------------------
    def filter_node(self, task: TaskInfo, request: PodDeviceRequest) -> DeviceFit:
        gpu = request.types.get(TYPE_GPU)
        if gpu is not None and gpu.shared and request.isolation and \
                request.isolation != self.isolation:
            return DeviceFit(Status.unschedulable(ISOLATION_REASON))
        if gpu is not None and gpu.shared and self.share_blocked:
            return DeviceFit(Status.unresolvable(SHARE_UNSUPPORTED_REASON))
        if self.ledger is None:
            return DeviceFit()
        key = self._key(request)
        if self.memo is not None:
            known = self.memo.get(key, request)
            if known is not None:
                return known
        result = self._plan(request, key)
        if isinstance(result, str):
            fit = DeviceFit(Status.unschedulable(result))
        else:
            fit = DeviceFit(score=float(node_score(self.ledger, request.types, self.scoring)))
        if self.memo is not None:
            self.memo.put(key, request, fit)
        return fit

    def allocate(self, task: TaskInfo, request: PodDeviceRequest, *, now: float,
                 node: NodeInfo | None = None) -> dict[str, str]:
        if self.ledger is None:
            return {}
        self.sub_task(task)
        result: Allocation | str | None = None
        if self.placement is not None and node is not None:
            result = placement_picks(self.placement, ledger=self.ledger, request=request,
                                     task=task, node=node, gpu_model=self.gpu_model)
        if result is None:
            result = self._plan(request, self._key(request))
        if isinstance(result, str):
            raise DeviceError(f"node {self.node_name}: {result}")
        self.ledger.charge(str(task.uid), result,
                           request.exclusive_roots_of(result, self.ledger))
        text = encode_allocation(result, self.ledger.devices)
        if self.memo is not None:  # the bound pod comes back with this text: no decoding
            self.memo.seed(text, result)
        out = {ALLOCATED: text}
        if result.get(TYPE_GPU):
            out[GPU_MINORS] = ",".join(str(p.minor) for p in result[TYPE_GPU])
        return out

    def _key(self, request: PodDeviceRequest) -> tuple[int, Any, Any]:
        assert self.ledger is not None
        return (self.shape, self.ledger.state_key(), request.signature or id(request))

    def _plan(self, request: PodDeviceRequest, key: tuple[int, Any, Any]) -> Allocation | str:
        assert self.ledger is not None
        if self.memo is not None and request.signature:
            known = self.memo.plans.get(key)
            if known is not None:
                return known
        result = plan(self.ledger, request, scoring=self.scoring, topology=self.topology)
        if self.memo is not None and request.signature:
            self.memo.remember_plan(key, result)
        return result

    def release(self, task: TaskInfo) -> tuple[str, ...]:
        return (ALLOCATED, GPU_MINORS)

    # -- summaries ----------------------------------------------------------------------
    def summary(self) -> tuple[float, ...]:
        if self.ledger is None or self.memo is None:
            return summary(self.ledger, self.topology.honor_partitions, self.isolation,
                           self.share_blocked)
        # The card usage does not tell one two-card pod from two one-card pods: the kinds
        # (a column of the row) are part of the key.
        key = (self.shape, self.ledger.state_key(), gpu_kinds(self.ledger), self.isolation,
               self.share_blocked)
        row = self.memo.rows.get(key)
        if row is None:
            if len(self.memo.rows) >= self.memo.limit:
                self.memo.rows.clear()
            row = self.memo.rows[key] = summary(self.ledger, self.topology.honor_partitions,
                                                self.isolation, self.share_blocked)
        return row

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
                                  policy=self.policy, topology=self.topology,
                                  memo=self.memo, shape=self.shape, isolation=self.isolation,
                                  share_blocked=self.share_blocked,
                                  placement=self.placement, gpu_model=self.gpu_model,
                                  pods=dict(self.pods))

    def charge_checkpoints(self) -> None:
        """Charge the GPUs kubelet handed out on its own (Device object checkpoints)."""
        if self.ledger is None:
            return
        for uid, minors in self.ledger.spec.checkpoint_minors.items():
            self.ledger.charge(CHECKPOINT_PREFIX + uid, checkpoint_allocation(self.ledger,
                                                                              minors))
