"""network-topology-aware: keep a job's pods inside one HyperNode and pack HyperNodes.

Volcano's ``pkg/scheduler/plugins/network-topology-aware``:

* gradients (``hyperNodeGradientFn``): for a job with a constraint, the HyperNodes under the
  search root, breadth first, of tier ≤ the job's limit, grouped by tier lowest first. Without
  placed tasks a HyperNode is a candidate only when the job's ``minResources`` fit the sum of
  its nodes' idle or future idle at session open; with placed tasks the search starts at the
  highest HyperNode of allowed tier above the one they span, and every HyperNode under it is a
  candidate. For eviction (preempt/reclaim) the gradients run widest first, at most
  ``hypernode.gradient.evict.max-hypernodes`` HyperNodes in all, and a candidate's allocatable
  must hold ``minResources``.
* HyperNode score (``HyperNodeOrderFn``): the weighted binpack of the job's requests on the
  HyperNode, ``Σ_r w_r · (used_r + request_r) / allocatable_r ÷ Σ_r w_r`` over the weighted
  resources the tasks request (0 when one would overflow), times 100 × ``weight``.
* node score: for a task of a job with a constraint, how low the common ancestor of the node's
  leaf HyperNode and the HyperNode the job spans so far is (1 for the same HyperNode, else
  ``(maxTier − tier) / (maxTier − minTier)``), the nodes tied at the top getting the share of
  the job's tasks already in their leaf; for other pods (``hypernode.binpack.normal-pod.enable``)
  the tier-weighted (``fading^(tier−1)``) binpack of the pod on the node's HyperNode of each
  tier (1 where the node is in none). Both times 100 × ``weight``.

For a partition of ``spec.subGroupPolicy`` (``HyperNodeGradientForSubJobFn``): the same
search under the job's HyperNode with the partition's limit, placed tasks and pending requests;
its HyperNode score is the binpack of its tasks, ties broken by the share of its tasks a
HyperNode already holds; its tasks' node scores follow the partition's own constraint.

``used`` per HyperNode follows every in-session placement, as Volcano's event handler keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from scheduler.api.job import JobInfo
from scheduler.api.resource import CPU, MEMORY, MIN_RESOURCE, Resource
from scheduler.api.subjob import SubJob
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskID
from scheduler.framework.arguments import arg, extra_args, listed_weights, note, notes_field
from scheduler.framework.hooks import FloatArray, IntArray
from scheduler.framework.hypernodes import CLUSTER_TOP
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.plugin import PluginBase

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = ["NetworkTopologyAware", "NetworkTopologyAwareArgs"]

_PREFIX = "hypernode.binpack.resources."
MAX_SCORE = 100.0
log = structlog.get_logger("lahar.plugins.network_topology_aware")
_WARNED: set[tuple[float, int]] = set()
"""(fading, lowest tier) pairs already warned about: the warning is said once a process."""


@dataclass(frozen=True, slots=True)
class NetworkTopologyAwareArgs:
    weight: int = arg("weight", 1)
    cpu: int = arg("hypernode.binpack.cpu", 1)
    memory: int = arg("hypernode.binpack.memory", 1)
    resources: str = arg("hypernode.binpack.resources", "")
    resource_weights: dict[str, Any] = extra_args(_PREFIX)
    normal_pod_enable: bool = arg("hypernode.binpack.normal-pod.enable", True)
    normal_pod_fading: float = arg("hypernode.binpack.normal-pod.fading", 0.8)
    evict_max_hypernodes: int = arg("hypernode.gradient.evict.max-hypernodes", 8)
    weights: dict[str, int] = field(init=False, default_factory=dict)
    notes: tuple[str, ...] = notes_field()

    def __post_init__(self) -> None:
        # Volcano's getPriorityWeight / getNormalPodConfig / getMaxHyperNodesForEviction.
        for name, key, default in (
            ("weight", "weight", 1),
            ("cpu", "hypernode.binpack.cpu", 1),
            ("memory", "hypernode.binpack.memory", 1),
        ):
            if getattr(self, name) < 0:
                note(self, f"argument {key!r} is negative: {default} is used, as in Volcano")
                object.__setattr__(self, name, default)
        if self.normal_pod_fading < 0:
            note(
                self,
                "argument 'hypernode.binpack.normal-pod.fading' is negative: 0.8 is "
                "used, as in Volcano",
            )
            object.__setattr__(self, "normal_pod_fading", 0.8)
        elif self.normal_pod_fading > 1:
            note(
                self,
                "argument 'hypernode.binpack.normal-pod.fading' is above 1: higher tiers "
                "weigh more than lower ones (it is used as given, as in Volcano)",
            )
        if self.evict_max_hypernodes <= 0:
            note(
                self,
                "argument 'hypernode.gradient.evict.max-hypernodes' is not positive: 8 "
                "is used, as in Volcano",
            )
            object.__setattr__(self, "evict_max_hypernodes", 8)
        weights = listed_weights(self, prefix=_PREFIX, list_key="hypernode.binpack.resources",
                                 resources=self.resources, weights=self.resource_weights,
                                 negative=self._negative_weight)
        weights[CPU] = self.cpu
        weights[MEMORY] = self.memory
        object.__setattr__(self, "weights", weights)

    def _negative_weight(self, key: str, value: int) -> int:
        note(self, f"argument {key!r} is negative: 1 is used, as in Volcano")
        return 1


class NetworkTopologyAware(PluginBase[NetworkTopologyAwareArgs]):
    NAME = "network-topology-aware"
    Args = NetworkTopologyAwareArgs

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        view = session.hypernodes
        table = session.table
        self._names = [*view.tree.info, CLUSTER_TOP]
        self._index = {name: i for i, name in enumerate(self._names)}
        count, dims = len(self._names), len(table.dims)
        self._allocatable = np.zeros((count, dims))
        self._used = np.zeros((count, dims))
        self._idle = np.zeros((count, dims))
        self._future = np.zeros((count, dims))
        for i, name in enumerate(self._names):
            rows = view.rows(name)
            if len(rows):
                self._allocatable[i] = table.allocatable[rows].sum(axis=0)
                self._used[i] = table.used[rows].sum(axis=0)
                self._idle[i] = table.idle[rows].sum(axis=0)
                self._future[i] = table.future_idle[rows].sum(axis=0)
        self._min_tier, self._max_tier = view.tiers[0], view.tiers[-1]
        self._tier_weights = self._fading_weights()
        self._by_tier: dict[int, IntArray] = {}
        self._placed_on: dict[TaskID, str] = {}
        """Task → the node an in-session placement put it on (read back when it is undone)."""

    # -- bookkeeping ----------------------------------------------------------------------
    def _containing(self, node: str) -> list[int]:
        view = self.ssn.hypernodes
        return [self._index[n] for n in view.tree.containing(node)] + [self._index[CLUSTER_TOP]]

    def on_allocate(self, task: TaskInfo) -> None:
        if len(self._names) > 1:
            self._placed_on[task.uid] = task.node_name
            self._used[self._containing(task.node_name)] += self.ssn.table.vector(task.resreq)

    def on_deallocate(self, task: TaskInfo) -> None:
        # The session has taken the task off its node before telling: use the node it had.
        node = self._placed_on.pop(task.uid, task.node_name)
        if len(self._names) > 1:
            self._used[self._containing(node)] -= self.ssn.table.vector(task.resreq)

    # -- gradients ------------------------------------------------------------------------
    def hypernode_gradients(self, job: JobInfo, root: str, purpose: str) -> list[list[str]]:
        view = self.ssn.hypernodes
        limit = view.limit(job)
        if limit is None:
            return [[root]]
        minimum = job.podgroup.min_resources or Resource()
        return self._gradients(root, limit, view.allocated(job), minimum, purpose)

    def sub_job_gradients(
        self, job: JobInfo, sub: SubJob, root: str, purpose: str
    ) -> list[list[str]]:
        """Volcano's ``HyperNodeGradientForSubJobFn``: the same search under ``root`` (the
        job's HyperNode) with the partition's limit, placed tasks and pending requests."""
        view = self.ssn.hypernodes
        limit = view.sub_limit(job, sub.topology)
        if limit is None:
            return [[root]]
        allocated = view.sub_allocated(sub.uid, list(sub.tasks.values()))
        return self._gradients(root, limit, allocated, sub.pending_request(), purpose)

    def _gradients(
        self, root: str, limit: int, allocated: str, request: Resource, purpose: str
    ) -> list[list[str]]:
        view = self.ssn.hypernodes
        start = self._search_root(root, limit, allocated)
        if start is None:
            return []
        minimum = self.ssn.table.vector(request)
        by_tier: dict[int, list[str]] = {}
        queue, seen = [start], {start}
        while queue:
            current = queue.pop(0)
            if self._eligible(current, limit, allocated, minimum, purpose):
                by_tier.setdefault(view.tier(current), []).append(current)
            for child in view.children(current):
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
        gradients = [by_tier[t] for t in sorted(by_tier)]
        return gradients if purpose != "evict" else self._widest_first(gradients)

    def _search_root(self, root: str, limit: int, allocated: str) -> str | None:
        """Volcano's ``getSearchRoot``: ``root`` narrowed to the highest HyperNode of allowed
        tier above ``allocated``; None when the two do not overlap."""
        if not allocated:
            return root
        view = self.ssn.hypernodes
        highest = ""
        for ancestor in view.ancestors(allocated):
            if view.tier(ancestor) > limit:
                break
            highest = ancestor
        if not highest:
            return None
        common = view.lca(root, highest)
        if common == highest:
            return root
        return highest if common == root else None

    def _eligible(
        self, name: str, limit: int, allocated: str, minimum: FloatArray, purpose: str
    ) -> bool:
        view = self.ssn.hypernodes
        if view.tier(name) > limit:
            return False
        if allocated:
            return True
        i = self._index[name]
        if purpose == "evict":
            return bool(np.all(minimum - self._allocatable[i] < MIN_RESOURCE))
        return bool(
            np.all(minimum - self._idle[i] < MIN_RESOURCE)
            or np.all(minimum - self._future[i] < MIN_RESOURCE)
        )

    def _widest_first(self, gradients: list[list[str]]) -> list[list[str]]:
        left = self.args.evict_max_hypernodes
        out: list[list[str]] = []
        for gradient in reversed(gradients):
            if left == 0:
                break
            taken = gradient if len(gradient) <= left else gradient[len(gradient) - left :]
            out.append(taken)
            left -= len(taken)
        return out

    # -- scores ---------------------------------------------------------------------------
    def _binpack(self, request: Resource, rows: IntArray) -> FloatArray:
        """Weighted binpack of ``request`` on the HyperNodes at ``rows`` of the state arrays."""
        table = self.ssn.table
        total = np.zeros(len(rows))
        weight_sum = 0
        overused = np.zeros(len(rows), dtype=bool)
        for name in request.resource_names():
            weight = self.args.weights.get(name)
            if weight is None:
                continue
            value = request.get(name)
            col = table.dim_index.get(name)
            if col is None:
                return np.zeros(len(rows))  # no node has it: every HyperNode would overflow
            allocatable = self._allocatable[rows, col]
            used = self._used[rows, col] + value
            overused |= used > allocatable
            total += weight * np.divide(
                used, allocatable, out=np.zeros(len(rows)), where=allocatable > 0
            )
            weight_sum += weight
        if weight_sum <= 0:
            return np.zeros(len(rows))
        return np.where(overused, 0.0, total / weight_sum)

    def score_hypernodes(self, job: JobInfo, names: list[str]) -> dict[str, float]:
        request = Resource()
        for task in job.tasks.values():
            request.add(task.resreq)
        rows = np.array([self._index[n] for n in names], dtype=np.intp)
        scores = self._binpack(request, rows) * MAX_SCORE * self.args.weight
        return dict(zip(names, scores.tolist(), strict=True))

    def score_sub_hypernodes(self, sub: SubJob, names: list[str]) -> dict[str, float]:
        """Volcano's ``HyperNodeOrderFn`` for a partition: the binpack of its tasks' requests,
        the HyperNodes tied at the top told apart by the share of its tasks they hold."""
        request = Resource()
        for task in sub.tasks.values():
            request.add(task.resreq)
        rows = np.array([self._index[n] for n in names], dtype=np.intp)
        raw = self._binpack(request, rows)
        top = np.flatnonzero(raw >= raw.max()) if len(raw) else raw.astype(np.intp)
        if len(top) > 1 and sub.tasks:
            view = self.ssn.hypernodes
            for i in top.tolist():
                mask = view.mask(names[i])
                held = sum(
                    1
                    for task in sub.tasks.values()
                    if task.node_name in view.table.index and mask[view.table.index[task.node_name]]
                )
                raw[i] += held / len(sub.tasks)
        scores = raw * MAX_SCORE * self.args.weight
        return dict(zip(names, scores.tolist(), strict=True))

    def score_nodes(self, task: TaskInfo, table: NodeTable, candidates: IntArray) -> FloatArray:
        job = self.ssn.jobs.get(task.job)
        if job is None:
            return np.zeros(len(candidates))
        view = self.ssn.hypernodes
        if job.podgroup.sub_groups:
            sub = job.sub_jobs().of(task)
            if sub is not None and sub.topology is not None:
                scores = self._topology_scores(
                    job, view.trying.get(job.uid, ""), candidates, tasks=sub.tasks
                )
            elif self.args.normal_pod_enable:
                scores = self._normal_scores(task, candidates)
            else:
                return np.zeros(len(candidates))
        elif job.podgroup.network_topology is not None:
            scores = self._topology_scores(job, view.trying.get(job.uid, ""), candidates)
        elif self.args.normal_pod_enable:
            scores = self._normal_scores(task, candidates)
        else:
            return np.zeros(len(candidates))
        return scores * MAX_SCORE * self.args.weight

    def _tier_rows(self, tier: int) -> IntArray:
        """Per table row, the state-array index of the node's HyperNode of ``tier`` (-1)."""
        rows = self._by_tier.get(tier)
        if rows is None:
            view = self.ssn.hypernodes
            if tier == view.top_tier:
                rows = np.full(len(view.table), self._index[CLUSTER_TOP], dtype=np.intp)
            else:
                rows = np.full(len(view.table), -1, dtype=np.intp)
                for name in view.tree.by_tier.get(tier, []):
                    picked = view.rows(name)
                    free = picked[rows[picked] < 0]  # the first in name order keeps a node
                    rows[free] = self._index[name]
            self._by_tier[tier] = rows
        return rows

    def _fading_weights(self) -> dict[int, float]:
        """``fading^(tier−1)`` per tier; empty when a weight is not finite (fading 0 with a
        HyperNode below tier 1), where Volcano's ``math.Pow`` gives +Inf and every normal
        pod's node score turns NaN. Lahar warns and gives normal pods no HyperNode score."""
        fading = self.args.normal_pod_fading
        weights: dict[int, float] = {}
        for tier in range(self._min_tier, self._max_tier + 1):
            if fading == 0 and tier < 1:
                key = (fading, self._min_tier)
                if key not in _WARNED:
                    _WARNED.add(key)
                    log.warning(
                        "argument 'hypernode.binpack.normal-pod.fading' is 0 and HyperNodes of "
                        "tier below 1 exist: the tier weight fading^(tier-1) is infinite, so "
                        "pods without networkTopology get no HyperNode binpack score",
                        plugin=self.NAME, lowest_tier=self._min_tier,
                    )
                return {}
            weights[tier] = fading ** (tier - 1)
        return weights

    def _normal_scores(self, task: TaskInfo, candidates: IntArray) -> FloatArray:
        total = np.zeros(len(candidates))
        weights = 0.0
        for tier, weight in self._tier_weights.items():
            weights += weight
            at = self._tier_rows(tier)[candidates]
            present = np.unique(at[at >= 0])
            tier_score = np.ones(len(candidates))
            if len(present):
                per = np.zeros(len(self._names))
                per[present] = self._binpack(task.resreq, present)
                tier_score = np.where(at >= 0, per[np.maximum(at, 0)], 1.0)
            total += weight * tier_score
        return total / weights if weights > 0 else np.zeros(len(candidates))

    def _topology_scores(
        self,
        job: JobInfo,
        allocated: str,
        candidates: IntArray,
        *,
        tasks: dict[TaskID, TaskInfo] | None = None,
    ) -> FloatArray:
        """``tasks``: whose placed share breaks ties (the job's, or its partition's)."""
        scores = np.zeros(len(candidates))
        mine = job.tasks if tasks is None else tasks
        if not allocated:
            return scores
        view = self.ssn.hypernodes
        leaves = self._tier_rows(view.tiers[0])[candidates]
        per_leaf: dict[int, float] = {}
        for leaf in np.unique(leaves[leaves >= 0]).tolist():
            per_leaf[leaf] = self._tier_score(self._names[leaf], allocated)
        scores = np.array([per_leaf.get(leaf, 0.0) for leaf in leaves.tolist()])
        best = np.flatnonzero(scores >= scores.max())
        if len(best) > 1 and mine:
            placed: dict[int, int] = {}
            for task in mine.values():
                if task.node_name:
                    row = view.table.index.get(task.node_name)
                    leaf = int(self._tier_rows(view.tiers[0])[row]) if row is not None else -1
                    placed[leaf] = placed.get(leaf, 0) + 1
            for i in best.tolist():
                scores[i] += (
                    placed.get(int(leaves[i]), 0) / len(mine) if leaves[i] >= 0 else 0.0
                )
        return scores

    def _tier_score(self, hypernode: str, allocated: str) -> float:
        if hypernode == allocated:
            return 1.0
        view = self.ssn.hypernodes
        tier = view.tier(view.lca(hypernode, allocated))
        if self._min_tier == self._max_tier:
            return 1.0
        if self._min_tier <= tier <= self._max_tier:
            return (self._max_tier - tier) / (self._max_tier - self._min_tier)
        return 0.0
