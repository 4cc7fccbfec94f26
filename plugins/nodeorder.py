"""nodeorder: kube-scheduler's node scores, each normalised to 0–100 and weighted.

least requested, most requested and balanced allocation look at cpu and memory after placing
the pod; node affinity scores the pod's preferred terms; taint toleration prefers nodes with
fewer intolerable ``PreferNoSchedule`` taints; image locality prefers nodes that hold the pod's
images; inter-pod affinity and topology spread score the pod's preferred terms and
``ScheduleAnyway`` constraints (and placed pods' preferred terms) from the session's pod index,
normalised over the candidates as Volcano's batch node order does. All are computed for the
candidate rows at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.resource import CPU, MEMORY
from scheduler.api.task import TaskInfo
from scheduler.framework.arguments import arg
from scheduler.framework.hooks import FloatArray, IntArray
from scheduler.framework.imagelocality import ImageTable
from scheduler.framework.nodematch import match_term
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.plugin import PluginBase
from scheduler.framework.podaffinity import affinity_scores, wants_affinity_score
from scheduler.framework.podindex import PodIndexUser
from scheduler.framework.topologyspread import spread_scores

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = ["NodeOrder"]

MAX_SCORE = 100.0
_CPU_MEMORY = [CPU, MEMORY]


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


def _fractions(
    task: TaskInfo, table: NodeTable, rows: IntArray, names: list[str]
) -> tuple[FloatArray, FloatArray]:
    """Requested-after-placement and allocatable for ``names`` on ``rows``."""
    if names == _CPU_MEMORY:  # every scored pod: the table's first two columns, one copy each
        requested = table.used[rows, :2]
        requested += np.array([task.resreq.milli_cpu, task.resreq.memory])
        return requested, table.allocatable[rows, :2]
    cols = [table.dim_index[n] for n in names if n in table.dim_index]
    request = np.array([task.resreq.get(table.dims[c]) for c in cols])
    requested = table.used[rows][:, cols]
    requested += request
    allocatable = table.allocatable[rows][:, cols]
    return requested, allocatable


def _row_std(values: FloatArray) -> FloatArray:
    """``values.std(axis=1)`` by the same ufunc steps (so the very same bits) without the
    generic wrapper's per-call cost, which showed on every scored pod."""
    count = values.shape[1]
    mean = np.add.reduce(values, axis=1, keepdims=True)
    np.true_divide(mean, count, out=mean)
    deviation = np.subtract(values, mean)
    np.square(deviation, out=deviation)
    spread = np.add.reduce(deviation, axis=1)
    np.true_divide(spread, count, out=spread)
    return np.sqrt(spread, out=spread)


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

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        self.open_pod_index(
            session, wanted=bool(self.args.pod_affinity or self.args.pod_topology_spread))

    def score_nodes(self, task: TaskInfo, table: NodeTable, candidates: IntArray) -> FloatArray:
        args = self.args
        total = np.zeros(len(candidates))
        requested, allocatable = _fractions(task, table, candidates, [CPU, MEMORY])
        safe = np.where(allocatable > 0, allocatable, 1.0)
        if args.least_requested or args.most_requested:
            if args.least_requested:
                per = np.where(
                    (allocatable > 0) & (requested <= allocatable),
                    np.floor((allocatable - requested) * MAX_SCORE / safe),
                    0.0,
                )
                total += np.floor(per.mean(axis=1)) * args.least_requested
            if args.most_requested:
                per = np.where(
                    allocatable > 0,
                    np.floor(np.minimum(requested, allocatable) * MAX_SCORE / safe),
                    0.0,
                )
                total += np.floor(per.mean(axis=1)) * args.most_requested
        if args.balanced_resource:
            if task.resreq.get("nvidia.com/gpu") > 0:
                requested, allocatable = _fractions(
                    task, table, candidates, [CPU, MEMORY, "nvidia.com/gpu"])
                safe = np.where(allocatable > 0, allocatable, 1.0)
            fraction = np.where(allocatable > 0, np.minimum(requested / safe, 1.0), 0.0)
            std = _row_std(fraction)
            total += np.floor((1.0 - std) * MAX_SCORE) * args.balanced_resource
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
        tolerations = [t for t in task.spec.tolerations if t.effect in ("", "PreferNoSchedule")]
        per_group = np.array(
            [
                sum(
                    1
                    for taint in taints
                    if taint.effect == "PreferNoSchedule"
                    and not any(
                        t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations
                    )
                )
                for taints in groups
            ],
            dtype=float,
        )
        return _normalise(per_group[group_ids[candidates]], reverse=True)
