"""nodeorder: kube-scheduler's node scores, each normalised to 0–100 and weighted.

least requested, most requested and balanced allocation look at cpu and memory after placing
the pod; node affinity scores the pod's preferred terms; taint toleration prefers nodes with
fewer intolerable ``PreferNoSchedule`` taints; image locality prefers nodes that hold the pod's
images; inter-pod affinity and topology spread score the pod's preferred terms and
``ScheduleAnyway`` constraints (and placed pods' preferred terms) from the session's pod index,
normalised over the candidates as Volcano's batch node order does. All are computed for the
candidate rows at once; the cpu/memory scores come from a per-session cache over all nodes
(:mod:`scheduler.framework.resourcescores`) that follows the table's changed rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.node import Taint
from scheduler.api.pod import Toleration
from scheduler.api.resource import CPU, MEMORY
from scheduler.api.task import TaskInfo
from scheduler.framework.arguments import arg, negative_weights, notes_field
from scheduler.framework.hooks import FloatArray, IntArray
from scheduler.framework.imagelocality import ImageTable
from scheduler.framework.nodematch import match_term
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.plugin import PluginBase
from scheduler.framework.podaffinity import affinity_scores, wants_affinity_score
from scheduler.framework.podindex import PodIndexUser
from scheduler.framework.resourcescores import (
    ResourceScores,
    balanced_scores,
    requested_scores,
)
from scheduler.framework.topologyspread import spread_scores

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = ["NodeOrder"]

MAX_SCORE = 100.0
GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class NodeOrderArgs:
    least_requested: int = arg("leastrequested.weight", 1)
    most_requested: int = arg("mostrequested.weight", 0)
    balanced_resource: int = arg("balancedresource.weight", 1)
    node_affinity: int = arg("nodeaffinity.weight", 2)
    pod_affinity: int = arg("podaffinity.weight", 2)
    taint_toleration: int = arg("tainttoleration.weight", 3)
    image_locality: int = arg("imagelocality.weight", 1)
    pod_topology_spread: int = arg("podtopologyspread.weight", 2)
    notes: tuple[str, ...] = notes_field()

    def __post_init__(self) -> None:
        # Volcano multiplies each score by its weight as given: a negative one is taken.
        negative_weights(self, "least_requested", "most_requested", "balanced_resource",
                         "node_affinity", "pod_affinity", "taint_toleration", "image_locality",
                         "pod_topology_spread")


def _fractions(
    task: TaskInfo, table: NodeTable, rows: IntArray, names: list[str]
) -> tuple[FloatArray, FloatArray]:
    """Requested-after-placement and allocatable for ``names`` on ``rows``."""
    cols = [table.dim_index[n] for n in names if n in table.dim_index]
    request = np.array([task.resreq.get(table.dims[c]) for c in cols])
    requested = table.used[rows][:, cols]
    requested += request
    allocatable = table.allocatable[rows][:, cols]
    return requested, allocatable


def _normalise(raw: FloatArray, *, reverse: bool = False) -> FloatArray:
    top = raw.max() if len(raw) else 0.0
    if top <= 0:
        return np.full(len(raw), MAX_SCORE if reverse else 0.0)
    scaled = np.floor(raw * MAX_SCORE / top)
    return MAX_SCORE - scaled if reverse else scaled


class NodeOrder(PodIndexUser, PluginBase[NodeOrderArgs]):
    NAME = "nodeorder"
    Args = NodeOrderArgs

    def __init__(self, args: NodeOrderArgs) -> None:
        super().__init__(args)
        self._images: ImageTable | None = None
        self._resource: ResourceScores | None = None
        self._taint_table: NodeTable | None = None
        self._intolerable: dict[tuple[Toleration, ...], FloatArray] = {}
        """Per set of tolerations, :func:`_intolerable_counts` on ``_taint_table``'s groups."""

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        self.open_pod_index(
            session, wanted=bool(self.args.pod_affinity or self.args.pod_topology_spread))

    def score_nodes(self, task: TaskInfo, table: NodeTable, candidates: IntArray) -> FloatArray:
        args = self.args
        if args.balanced_resource and task.resreq.get(GPU) > 0:
            # balanced allocation also weighs the GPU column: not a cpu/memory-only score
            requested, allocatable = _fractions(task, table, candidates, [CPU, MEMORY])
            total = requested_scores(
                requested, allocatable, least=args.least_requested, most=args.most_requested)
            requested, allocatable = _fractions(task, table, candidates, [CPU, MEMORY, GPU])
            total += balanced_scores(requested, allocatable) * args.balanced_resource
        else:
            resource = self._resource
            if resource is None or resource.table is not table:
                resource = self._resource = ResourceScores(
                    table, least=args.least_requested, most=args.most_requested,
                    balanced=args.balanced_resource)
            total = resource.scores(task.resreq.milli_cpu, task.resreq.memory)[candidates]
        if args.node_affinity and task.spec.preferred_terms:
            raw = np.zeros(len(candidates))
            for preferred in task.spec.preferred_terms:
                raw += match_term(table, preferred.term)[candidates] * preferred.weight
            total += _normalise(raw) * args.node_affinity
        if args.taint_toleration:
            total += self._taint_scores(task, table, candidates) * args.taint_toleration
        if args.image_locality and task.spec.terms.images:
            if self._images is None:
                self._images = ImageTable.of(table)
            if self._images.columns:  # no node reports images: every node scores 0
                total += self._images.scores(task, candidates) * args.image_locality
        index = self._index
        if index is not None:
            if args.pod_affinity and wants_affinity_score(index, task):
                total += affinity_scores(index, table, task, candidates) * args.pod_affinity
            if args.pod_topology_spread and task.spec.terms.spread:
                total += spread_scores(index, table, task, candidates) * args.pod_topology_spread
        return total

    def _taint_scores(self, task: TaskInfo, table: NodeTable, candidates: IntArray) -> FloatArray:
        group_ids, groups = table.taint_groups()
        if self._taint_table is not table:  # groups are fixed for a table's life
            self._taint_table, self._intolerable = table, {}
        per_group = self._intolerable.get(task.spec.tolerations)
        if per_group is None:
            per_group = self._intolerable[task.spec.tolerations] = _intolerable_counts(
                task, groups)
        if not per_group.any():  # what _normalise gives when no candidate has one
            return np.full(len(candidates), MAX_SCORE)
        return _normalise(per_group[group_ids[candidates]], reverse=True)


def _intolerable_counts(task: TaskInfo, groups: list[tuple[Taint, ...]]) -> FloatArray:
    """Per taint group, how many ``PreferNoSchedule`` taints the pod does not tolerate."""
    tolerations = [t for t in task.spec.tolerations if t.effect in ("", "PreferNoSchedule")]
    return np.array(
        [
            sum(
                1
                for taint in taints
                if taint.effect == "PreferNoSchedule"
                and not any(t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations)
            )
            for taints in groups
        ],
        dtype=float,
    )
