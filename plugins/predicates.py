"""predicates: the node filters of kube-scheduler that batch pods need, vectorised.

Checks, in order, each with kube-scheduler's reason text: pod count, ``spec.unschedulable``,
node selector and required node affinity, host ports, NoSchedule/NoExecute taints, inter-pod
affinity (``predicate.PodAffinityEnable``) and pod topology spread
(``predicate.PodTopologySpreadEnable``), then Dynamic Resource Allocation's claims
(``predicate.DynamicResourceAllocationEnable``, :mod:`scheduler.framework.dra`). The static
ones (unschedulable, affinity, taints) depend only on node labels and taints, so their masks are
computed once per session per pod signature and shared by every similar pod. The pod-to-pod
checks read the session's pod index, which this plugin keeps current by forwarding the session's
allocate/deallocate events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.api.node import NodeInfo
from scheduler.api.resource import PODS
from scheduler.api.status import Status
from scheduler.api.task import TaskInfo
from scheduler.framework.arguments import ArgumentError, arg
from scheduler.framework.dra import DraFilter
from scheduler.framework.draapi import parse_feature_gates
from scheduler.framework.hooks import BoolArray, IntArray
from scheduler.framework.nodematch import affinity_mask, untolerated_taint_reason
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.plugin import PluginBase
from scheduler.framework.podaffinity import affinity_reasons, wants_affinity_filter
from scheduler.framework.podindex import PodIndexUser
from scheduler.framework.topologyspread import spread_reasons

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = [
    "REASON_AFFINITY",
    "REASON_PODS",
    "REASON_PORTS",
    "REASON_UNSCHEDULABLE",
    "Predicates",
]

REASON_PODS = "node(s) pod number exceeded"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class PredicatesArgs:
    node_affinity: bool = arg("predicate.NodeAffinityEnable", True)
    node_ports: bool = arg("predicate.NodePortsEnable", True)
    taint_toleration: bool = arg("predicate.TaintTolerationEnable", True)
    pod_affinity: bool = arg("predicate.PodAffinityEnable", True)
    node_volume_limits: bool = arg("predicate.NodeVolumeLimitsEnable", True)
    volume_zone: bool = arg("predicate.VolumeZoneEnable", True)
    pod_topology_spread: bool = arg("predicate.PodTopologySpreadEnable", True)
    volume_binding: bool = arg("predicate.VolumeBindingEnable", True)
    cache: bool = arg("predicate.CacheEnable", False)
    gpu_sharing: bool = arg("predicate.GPUSharingEnable", False)
    gpu_number: bool = arg("predicate.GPUNumberEnable", False)
    node_lock: bool = arg("predicate.NodeLockEnable", False)
    vgpu: bool = arg("predicate.VGPUEnable", False)
    dra: bool = arg("predicate.DynamicResourceAllocationEnable", True)
    """ResourceClaims in node fit and placement (:mod:`scheduler.framework.dra`)."""
    dra_feature_gates: str = arg("predicate.DRAFeatureGates", "")
    """Ours: kube-scheduler's ``--feature-gates`` for the DRA gates, ``NAME=true,...``
    (``lahar run --feature-gates`` adds to it)."""
    dra_features: Any = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        try:
            features = parse_feature_gates(self.dra_feature_gates)
        except ValueError as exc:
            raise ArgumentError("plugin predicates", "predicate.DRAFeatureGates",
                                "NAME=true|false,... of the DRA feature gates",
                                f"{self.dra_feature_gates!r} ({exc})") from None
        object.__setattr__(self, "dra_features", features)


@dataclass(slots=True)
class _Static:
    unschedulable: BoolArray
    affinity: BoolArray
    taint_ok: BoolArray
    taint_reasons: list[tuple[BoolArray, str]]
    combined: BoolArray


class Predicates(PodIndexUser, PluginBase[PredicatesArgs]):
    NAME = "predicates"
    Args = PredicatesArgs

    def __init__(self, args: PredicatesArgs) -> None:
        super().__init__(args)
        self._static: dict[tuple[object, ...], _Static] = {}
        self.dra = DraFilter(args.dra_features) if args.dra else None
        self._pod_memo: tuple[TaskInfo, NodeTable, BoolArray | None] | None = None
        """:meth:`_pod_failed`'s last answer: (task, table, failed)."""

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        self.open_pod_index(
            session, wanted=bool(self.args.pod_affinity or self.args.pod_topology_spread))
        if self.dra is not None:
            self.dra.on_session_open(session)

    def on_session_close(self, session: Session) -> None:
        if self.dra is not None:
            self.dra.on_session_close(session)

    # -- Dynamic Resource Allocation (kube-scheduler's DynamicResources) -------------------
    def pre_predicate(self, task: TaskInfo) -> Status | None:
        return None if self.dra is None else self.dra.pre_predicate(task)

    def wants_exact(self, task: TaskInfo) -> bool:
        return self.dra is not None and self.dra.wants_exact(task)

    def check_node(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        return None if self.dra is None else self.dra.check_node(task, node)

    def exact_known(self, task: TaskInfo, rows: IntArray) -> tuple[IntArray, list[str]] | None:
        """What :meth:`check_node` is known to answer on ``rows`` (see
        :meth:`DraFilter.exact_known`); None when it is not known."""
        return None if self.dra is None else self.dra.exact_known(task, rows)

    def on_allocate(self, task: TaskInfo) -> None:
        self._pod_memo = None
        super().on_allocate(task)
        if self.dra is not None:
            self.dra.on_allocate(task)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._pod_memo = None
        super().on_deallocate(task)
        if self.dra is not None:
            self.dra.on_deallocate(task)

    def _pod_reasons(self, task: TaskInfo, table: NodeTable) -> list[tuple[BoolArray, str]]:
        """InterPodAffinity then PodTopologySpread failures; empty when neither applies."""
        index = self._index
        if index is None or not (task.spec.terms.constrained or index.carriers_present):
            return []
        out: list[tuple[BoolArray, str]] = []
        if self.args.pod_affinity and wants_affinity_filter(index, task):
            out.extend(affinity_reasons(index, table, task))
        if self.args.pod_topology_spread and task.spec.terms.spread:
            out.extend(spread_reasons(index, table, task))
        return out

    def _pod_failed(self, task: TaskInfo, table: NodeTable) -> BoolArray | None:
        """Nodes :meth:`_pod_reasons` rules out (None: none), over every node. Kept until the
        next placement or eviction event (the pod index changes only then), so a search that
        reads the table window by window computes it once per pod."""
        memo = self._pod_memo
        if memo is not None and memo[0] is task and memo[1] is table:
            return memo[2]
        failed: BoolArray | None = None
        for reason_failed, _ in self._pod_reasons(task, table):
            failed = reason_failed.copy() if failed is None else failed | reason_failed
        self._pod_memo = (task, table, failed)
        return failed

    def _static_masks(self, task: TaskInfo, table: NodeTable) -> _Static:
        key = task.spec.signature
        cached = self._static.get(key)
        if cached is not None:
            return cached
        spec = task.spec
        tolerates_unschedulable = any(
            t.tolerates(_UNSCHEDULABLE_TAINT, "", "NoSchedule") for t in spec.tolerations
        )
        unschedulable = (
            np.zeros(len(table), dtype=bool)
            if tolerates_unschedulable
            else table.unschedulable.copy()
        )
        ones = np.ones(len(table), dtype=bool)
        affinity = affinity_mask(table, spec) if self.args.node_affinity else ones
        taint_ok = ones.copy()
        taint_reasons: list[tuple[BoolArray, str]] = []
        if self.args.taint_toleration:
            group_ids, groups = table.taint_groups()
            by_reason: dict[str, list[int]] = {}
            for gid, taints in enumerate(groups):
                reason = untolerated_taint_reason(spec, taints)
                if reason is not None:
                    by_reason.setdefault(reason, []).append(gid)
            for reason, gids in by_reason.items():
                failed = np.isin(group_ids, gids)
                taint_reasons.append((failed, reason))
                taint_ok &= ~failed
        cached = _Static(
            unschedulable, affinity, taint_ok, taint_reasons, ~unschedulable & affinity & taint_ok
        )
        self._static[key] = cached
        return cached

    @staticmethod
    def _pods_ok(table: NodeTable, rows: slice = slice(None)) -> BoolArray:
        return table.pod_count[rows] < table.allocatable[rows, table.dim_index[PODS]]

    def _ports_ok(self, task: TaskInfo, table: NodeTable, rows: slice = slice(None)
                  ) -> BoolArray:
        window = table.span(rows)
        mask = np.ones(len(window), dtype=bool)
        if not self.args.node_ports or not task.spec.host_ports:
            return mask
        nodes = table.nodes
        for i, row in enumerate(window):
            node = nodes[row]
            if not node.host_ports:
                continue
            for want in task.spec.host_ports:
                if any(
                    have.port == want.port
                    and have.protocol == want.protocol
                    and (have.ip == want.ip or "0.0.0.0" in (have.ip, want.ip))
                    for have in node.host_ports
                ):
                    mask[i] = False
                    break
        return mask

    def predicate_mask(
        self, task: TaskInfo, table: NodeTable, rows: slice | None = None
    ) -> BoolArray:
        window = slice(None) if rows is None else rows
        mask = self._static_masks(task, table).combined[window] & self._pods_ok(table, window)
        if task.spec.host_ports:
            mask &= self._ports_ok(task, table, window)
        failed = self._pod_failed(task, table)
        if failed is not None:
            mask &= ~failed[window]
        served = None if self.dra is None else self.dra.predicate_mask(task, table)
        if served is not None:
            mask &= served[window]
        return mask

    def simulate_predicate_mask(self, task: TaskInfo, table: NodeTable) -> BoolArray:
        """Inter-pod affinity alone, as Volcano's predicates ``SimulatePredicateFn``
        (``predicates.go`` 397-440) re-checks it in topology-aware preemption's dry run."""
        mask = np.ones(len(table), dtype=bool)
        index = self._index
        if not self.args.pod_affinity or index is None or not wants_affinity_filter(index, task):
            return mask
        for failed, _ in affinity_reasons(index, table, task):
            mask &= ~failed
        return mask

    def predicate_reasons(
        self, task: TaskInfo, table: NodeTable, alive: BoolArray
    ) -> list[tuple[BoolArray, str]]:
        static = self._static_masks(task, table)
        out: list[tuple[BoolArray, str]] = [
            (~self._pods_ok(table), REASON_PODS),
            (static.unschedulable, REASON_UNSCHEDULABLE),
            (~static.affinity, REASON_AFFINITY),
            (~self._ports_ok(task, table), REASON_PORTS),
        ]
        out.extend(static.taint_reasons)
        out.extend(self._pod_reasons(task, table))
        if self.dra is not None:
            out.extend(self.dra.predicate_reasons(task, table, alive))
        return out
