"""The session's view of the HyperNode tree, and the search that places a job in one HyperNode.

Volcano's session adds a virtual HyperNode above every root (``<cluster-top-hypernode>``, one
tier above the highest real tier, holding every node), translates a job's ``highestTierName``
to its tier and turns a ``soft`` constraint into a hard one bounded by that top tier, so soft
jobs take the hard path and land in the lowest tier that holds them (``OpenSession``,
``adjustNetworkTopologySpec``). A job with tasks already placed keeps the HyperNode they span
(``recoverAllocatedHyperNode``: of the HyperNodes of any tier that hold every placed task's
node, the one of the lowest tier, per sub-job; the job's is the lowest common ancestor of its
constrained sub-jobs'). Two HyperNodes of that tier holding them all (a node listed in two
HyperNodes of one tier) are told apart by name; Volcano takes either, by map order.

:func:`place_in_hypernodes` is allocate's hypernode path (Volcano's ``allocateForJob``): the
gradients of candidate HyperNodes (lowest tier first) come from the plugin implementing
``HyperNodeGradient``; in each gradient the job's gang is tried in each HyperNode and the
best-scored HyperNode where the job became ready (or pipelined) wins. Volcano dry-runs every
candidate and then takes the highest score; here the candidates are tried in score order
(ties in a random order from the session's source) and the first success is kept, which picks
from the same set with the same rule. A candidate that cannot hold the gang by the sums of its
nodes' future idle is not tried (such a try can only fail).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import structlog

from scheduler.api.hypernode import HyperNodeTree
from scheduler.api.job import JobInfo
from scheduler.api.podgroup import NetworkTopology
from scheduler.api.resource import MIN_RESOURCE
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, JobID, TaskStatus
from scheduler.framework.hooks import BoolArray, FloatArray, IntArray

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable
    from scheduler.framework.session import Session
    from scheduler.framework.statement import Statement

log = structlog.get_logger("lahar.hypernodes")

__all__ = [
    "CLUSTER_TOP",
    "Attempt",
    "HyperNodeView",
    "has_network_topology",
    "place_in_hypernodes",
]

CLUSTER_TOP = "<cluster-top-hypernode>"


class HyperNodeView:
    """The tree plus the cluster-top HyperNode, node rows of the session's table, and each
    job's effective constraint and allocated HyperNode."""

    def __init__(self, tree: HyperNodeTree, table: NodeTable) -> None:
        self.tree = tree
        self.table = table
        self.ready = tree.ready
        self.top_tier = max(tree.tiers) + 1 if tree.tiers else 1
        self.tiers = [*tree.tiers, self.top_tier]
        self._rows: dict[str, IntArray] = {}
        self._masks: dict[str, BoolArray] = {}
        self._allocated: dict[JobID, str] = {}
        self._sub_allocated: dict[str, str] = {}
        self.trying: dict[JobID, str] = {}
        """Job → the LCA of the nodes its tasks went to so far in the try under way (Volcano's
        ``task.JobAllocatedHyperNode``), read by the node scorer."""

    # -- tree -----------------------------------------------------------------------------
    def tier(self, name: str) -> int:
        return self.top_tier if name == CLUSTER_TOP else self.tree.info[name].tier

    def children(self, name: str) -> list[str]:
        return self.tree.roots() if name == CLUSTER_TOP else self.tree.info[name].children

    def ancestors(self, name: str) -> list[str]:
        if name == CLUSTER_TOP:
            return [CLUSTER_TOP]
        return [*self.tree.ancestors(name), CLUSTER_TOP]

    def lca(self, a: str, b: str) -> str:
        if not a or not b:
            return a or b
        if CLUSTER_TOP in (a, b):
            return CLUSTER_TOP
        return self.tree.lca(a, b) or CLUSTER_TOP

    def leaf_of(self, node: str) -> str:
        """The node's HyperNode of the lowest tier, ``""`` when it is in none."""
        return self.tree.leaf_of(node) or ""

    def rows(self, name: str) -> IntArray:
        """Table rows of the nodes under ``name`` (ascending)."""
        rows = self._rows.get(name)
        if rows is None:
            if name == CLUSTER_TOP:
                rows = np.arange(len(self.table), dtype=np.intp)
            else:
                index = self.table.index
                rows = np.array(
                    sorted(index[n] for n in self.tree.nodes_of(name) if n in index),
                    dtype=np.intp,
                )
            self._rows[name] = rows
        return rows

    def mask(self, name: str) -> BoolArray:
        mask = self._masks.get(name)
        if mask is None:
            mask = np.zeros(len(self.table), dtype=bool)
            mask[self.rows(name)] = True
            self._masks[name] = mask
        return mask

    # -- jobs -----------------------------------------------------------------------------
    def tier_name_problem(self, job: JobInfo) -> str | None:
        """Why a job's (or one of its sub-groups') ``highestTierName`` cannot be used, or
        None."""
        podgroup = job.podgroup
        specs = [("spec.networkTopology", podgroup.network_topology)]
        specs += [
            (f"spec.subGroupPolicy[{i}].networkTopology", group.network_topology)
            for i, group in enumerate(podgroup.sub_groups)
        ]
        for where, spec in specs:
            if spec is None or not spec.highest_tier_name:
                continue
            if spec.highest_tier_name in self.tree.tier_names:
                continue
            known = ", ".join(sorted(self.tree.tier_names)) or "none"
            return (
                f"PodGroup {job.uid}: {where}.highestTierName "
                f"{spec.highest_tier_name!r} names no HyperNode tier (tier names: {known})"
            )
        return None

    def tell_tier_name_problem(self, job: JobInfo) -> None:
        """Log (once per tree) a ``highestTierName`` that names no tier: as Volcano's
        ``translateHighestTierNameToAllowed`` fails, that constraint is dropped and the job
        (or partition) is placed without it."""
        problem = self.tier_name_problem(job)
        if problem is not None and problem not in self.tree.told:
            self.tree.told.add(problem)
            log.warning("network topology constraint dropped, as in Volcano", problem=problem)

    def limit(self, job: JobInfo) -> int | None:
        """The highest tier the job may span, or None when it has no usable constraint
        (no ``networkTopology``, or a hard one naming no tier, which Volcano leaves
        unconstrained)."""
        return self._limit(job.podgroup.network_topology, self.top_tier)

    def sub_limit(self, job: JobInfo, topology: NetworkTopology | None) -> int | None:
        """The highest tier a partition with ``topology`` may span: a soft one is bounded by
        the job's own limit (the cluster top without one), as Volcano's
        ``convertSoftToHardTopology`` bounds it."""
        if topology is None:
            return None
        soft_bound = self.limit(job)
        return self._limit(topology, self.top_tier if soft_bound is None else soft_bound)

    def _limit(self, spec: NetworkTopology | None, soft_bound: int) -> int | None:
        if spec is None:
            return None
        if not spec.hard:
            return soft_bound
        if spec.highest_tier_allowed is not None:
            return spec.highest_tier_allowed
        return self.tree.tier_names.get(spec.highest_tier_name)

    def allocated(self, job: JobInfo) -> str:
        """The HyperNode the job's placed tasks sit in (``""`` when none is placed): Volcano's
        ``recoverAllocatedHyperNode`` (session.go:364), the lowest common ancestor of what each
        constrained sub-job's placed tasks sit in (the whole job is its default sub-job when
        the PodGroup has no ``subGroupPolicy``)."""
        known = self._allocated.get(job.uid)
        if known is None:
            if not job.podgroup.sub_groups:
                known = self._span(_placed(job))
            else:
                known = ""
                for sub in job.sub_jobs().by_uid.values():
                    if sub.topology is None:
                        continue
                    held = self.sub_allocated(sub.uid, list(sub.tasks.values()))
                    if held:
                        known = self.lca(known, held)
            self._allocated[job.uid] = known
        return known

    def set_allocated(self, job: JobInfo, name: str) -> None:
        self._allocated[job.uid] = name

    def sub_allocated(self, uid: str, tasks: list[TaskInfo]) -> str:
        """The HyperNode a partition's placed ``tasks`` span (``""`` when none is placed)."""
        known = self._sub_allocated.get(uid)
        if known is None:
            known = self._span(tasks)
            self._sub_allocated[uid] = known
        return known

    def set_sub_allocated(self, uid: str, name: str | None) -> None:
        """Record the partition's HyperNode; None forgets it (read again from its tasks)."""
        if name is None:
            self._sub_allocated.pop(uid, None)
        else:
            self._sub_allocated[uid] = name

    def _span(self, tasks: list[TaskInfo]) -> str:
        """The lowest-tier HyperNode among those of any tier (the cluster top included) that
        hold every placed task's node (session.go:391-419 then ``getLowestTierHyperNode``);
        ``""`` when none is placed or none holds them all."""
        common: set[str] | None = None
        for task in tasks:
            if not task.status & (ALLOCATED_STATUS | TaskStatus.PIPELINED) or not task.node_name:
                continue
            if task.node_name not in self.table.index:
                return ""  # in no HyperNode of the session, the cluster top included
            holding = {*self.tree.containing(task.node_name), CLUSTER_TOP}
            common = holding if common is None else common & holding
            if not common:
                return ""
        if not common:
            return ""
        return min(common, key=lambda name: (self.tier(name), name))


def has_network_topology(job: JobInfo) -> bool:
    """Volcano's ``JobInfo.ContainsNetworkTopology``: on the PodGroup or on a sub-group."""
    podgroup = job.podgroup
    return podgroup.network_topology is not None or any(
        group.network_topology is not None for group in podgroup.sub_groups
    )


def _placed(job: JobInfo) -> list[TaskInfo]:
    return [
        task
        for status, tasks in job.task_status_index.items()
        if status & (ALLOCATED_STATUS | TaskStatus.PIPELINED)
        for task in tasks.values()
        if task.node_name
    ]


@dataclass(slots=True)
class Attempt:
    """What a try of the job in one HyperNode gave: the statement when the job became ready
    or pipelined (still applied), else None and how many tasks were placed."""

    statement: Statement | None
    placed: int
    error: str = ""


def place_in_hypernodes(
    session: Session,
    job: JobInfo,
    *,
    pending: list[TaskInfo],
    needed: int,
    attempt: Callable[[str], Attempt],
) -> tuple[str, Attempt | None, str]:
    """Volcano's ``allocateForJob``: returns (winning HyperNode, its attempt, "") or
    ("", None, why) when no candidate holds the job."""
    view = session.hypernodes
    limit = view.limit(job)
    gradients = session.hypernode_gradients(job, CLUSTER_TOP, "allocate")
    demand = _demand(session.table, pending, needed)
    closest: tuple[int, int, str, str] | None = None
    roomiest: tuple[float, int, str] | None = None
    for gradient in gradients:
        scores = session.score_hypernodes(job, gradient)
        for name in _by_score(session, gradient, scores):
            if not _may_hold(session.table, view.rows(name), demand):
                room = (-_room(session.table, view.rows(name), demand), view.tier(name), name)
                roomiest = room if roomiest is None or room < roomiest else roomiest
                continue
            result = attempt(name)
            if result.statement is not None:
                return name, result, ""
            key = (-result.placed, view.tier(name), name, result.error)
            if closest is None or key < closest:
                closest = key
    where = f"tier {limit}" if limit is not None and limit < view.top_tier else "the cluster"
    if closest is None and roomiest is not None:
        share, tier, name = roomiest
        why = (
            f"no HyperNode of {where} or below has room for the job's {needed} task(s); the "
            f"closest, {_display(name)} (tier {tier}), has {-share:.0%} of the room they need"
        )
    elif closest is None:
        why = f"no HyperNode of {where} or below is a candidate for the job"
    else:
        placed, tier, name, error = closest
        why = (
            f"no HyperNode of {where} or below holds the job's {needed} task(s); the closest, "
            f"{_display(name)} (tier {tier}), took {-placed}" + (f": {error}" if error else "")
        )
    return "", None, why


def _display(name: str) -> str:
    return "the whole cluster" if name == CLUSTER_TOP else f"HyperNode {name}"


def _by_score(session: Session, names: list[str], scores: dict[str, float]) -> list[str]:
    """Highest score first; equal scores in a random order from the session's source."""
    groups: dict[float, list[str]] = {}
    for name in names:
        groups.setdefault(scores.get(name, 0.0), []).append(name)
    ordered: list[str] = []
    for score in sorted(groups, reverse=True):
        group = groups[score]
        if len(group) > 1:
            session.rng.shuffle(group)
        ordered.extend(group)
    return ordered


@dataclass(slots=True)
class _Demand:
    total: FloatArray
    """Per resource dimension, the least the ``needed`` tasks can ask for together."""
    slack: float
    """Volcano's fit tolerance (``MIN_RESOURCE`` per task) summed over those tasks."""
    smallest: FloatArray
    """The smallest request of any pending task, per dimension."""


def _demand(table: NodeTable, pending: list[TaskInfo], needed: int) -> _Demand | None:
    if not pending or needed <= 0:
        return None
    requests = np.array([table.vector(task.init_resreq) for task in pending])
    ordered = np.sort(requests, axis=0)
    count = min(needed, len(pending))
    return _Demand(
        total=ordered[:count].sum(axis=0), slack=MIN_RESOURCE * count, smallest=ordered[0].copy()
    )


def _room(table: NodeTable, rows: IntArray, demand: _Demand | None) -> float:
    """The share of the gang's least demand that the nodes of ``rows`` have free (≤ 1)."""
    if demand is None or not len(rows):
        return 0.0
    free = table.future_idle[rows].sum(axis=0)
    asked = demand.total > 0
    if not asked.any():
        return 1.0
    return float(min(1.0, np.min(np.maximum(free[asked], 0.0) / demand.total[asked])))


def _may_hold(table: NodeTable, rows: IntArray, demand: _Demand | None) -> bool:
    """False only when the nodes of ``rows`` cannot hold the gang whatever the placement."""
    if not len(rows):
        return False
    if demand is None:
        return True
    future = table.future_idle[rows]
    if np.any(demand.total - future.sum(axis=0) >= demand.slack):
        return False
    return bool(np.any(np.all(demand.smallest - future < MIN_RESOURCE, axis=1)))
