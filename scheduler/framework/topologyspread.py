"""Pod topology spread: kube-scheduler's PodTopologySpread filter and score over the node table.

Pods counted for a constraint are those in the incoming pod's namespace that its (possibly
``matchLabelKeys``-narrowed) selector matches, terminating pods left out; their per-node counts
come from the session's :class:`~scheduler.framework.podindex.PodIndex`, kept current as the
session places and evicts pods, so gang members spread among themselves.

* filter (``DoNotSchedule``): a domain takes part when some node of it has every constraint's
  key and passes the constraint's ``nodeAffinityPolicy`` / ``nodeTaintsPolicy``; a node passes
  when ``pods in its domain + (1 if the pod matches its own selector) − min over domains ≤
  maxSkew``, the minimum being 0 while fewer than ``minDomains`` domains exist. A node without
  the key fails with the "missing required label" variant of the reason.
* score (``ScheduleAnyway``): over the candidates that have every key, ``Σ count × log(domains
  + 2) + maxSkew − 1`` per constraint (hostname counts the node itself), rounded, then inverted
  and scaled to 0–100 so the emptiest domain scores highest; candidates lacking a key get 0.
Kube-scheduler's system-default constraints (derived from Services and ReplicaSets owning the
pod) are not applied: pods without constraints are neither filtered nor scored here.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.api.podterms import SpreadConstraint
from scheduler.api.task import TaskInfo
from scheduler.framework.hooks import BoolArray, FloatArray, IntArray
from scheduler.framework.nodematch import affinity_mask, untolerated_taint_reason
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.podindex import LabelGroup, PodIndex

__all__ = ["REASON_SPREAD", "REASON_SPREAD_LABEL", "spread_reasons", "spread_scores"]

REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = REASON_SPREAD + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
MAX_SCORE = 100
_NO_DOMAIN = 2**31 - 1


def _per_node(index: PodIndex, task: TaskInfo, constraint: SpreadConstraint) -> IntArray:
    namespace, selector = task.namespace, constraint.selector

    def matches(group: LabelGroup) -> bool:
        return (
            group.namespace == namespace and not group.deleting and selector.matches(group.labels)
        )

    key = ("spread", selector, namespace)
    return index.query(key, matches, anchors=selector.anchors()).per_node


def _has_keys(table: NodeTable, constraints: tuple[SpreadConstraint, ...]) -> BoolArray:
    mask = np.ones(len(table), dtype=bool)
    for constraint in constraints:
        mask &= table.label_codes(constraint.topology_key)[0] >= 0
    return mask


class _Policies:
    """The node masks of the inclusion policies, computed only when a constraint honours one."""

    def __init__(self, table: NodeTable, task: TaskInfo) -> None:
        self.table = table
        self.task = task
        self._affinity: BoolArray | None = None
        self._taints: BoolArray | None = None

    def eligible(self, constraint: SpreadConstraint, base: BoolArray) -> BoolArray:
        mask = base
        if constraint.honors_node_affinity and (
            self.task.spec.node_selector or self.task.spec.required_terms
        ):
            if self._affinity is None:
                self._affinity = affinity_mask(self.table, self.task.spec)
            mask = mask & self._affinity
        if constraint.honors_taints:
            if self._taints is None:
                group_ids, groups = self.table.taint_groups()
                tolerated = np.array(
                    [untolerated_taint_reason(self.task.spec, taints) is None for taints in groups],
                    dtype=bool,
                )
                self._taints = tolerated[group_ids]
            mask = mask & self._taints
        return mask


def spread_reasons(
    index: PodIndex, table: NodeTable, task: TaskInfo
) -> list[tuple[BoolArray, str]]:
    """Failed-node masks per ``DoNotSchedule`` constraint in order (first failure counts)."""
    constraints = task.spec.terms.hard_spread
    if not constraints:
        return []
    has_all = _has_keys(table, constraints)
    policies = _Policies(table, task)
    own_labels = dict(task.spec.terms.labels)
    out: list[tuple[BoolArray, str]] = []
    for constraint in constraints:
        codes, mapping = table.label_codes(constraint.topology_key)
        eligible = policies.eligible(constraint, has_all)
        per_node = _per_node(index, task, constraint)
        counts = np.bincount(codes[eligible], weights=per_node[eligible], minlength=len(mapping))
        present = np.bincount(codes[eligible], minlength=len(mapping)) > 0
        domains = int(present.sum())
        lowest = int(counts[present].min()) if domains else _NO_DOMAIN
        if domains < constraint.min_domains:
            lowest = 0
        has = codes >= 0
        in_domain = np.zeros(len(table))
        in_domain[has] = np.where(present[codes[has]], counts[codes[has]], 0.0)
        own = 1 if constraint.selector.matches(own_labels) else 0
        skew = in_domain + own - lowest
        out.append((~has, REASON_SPREAD_LABEL))
        out.append((has & (skew > constraint.max_skew), REASON_SPREAD))
    return out


def spread_scores(
    index: PodIndex, table: NodeTable, task: TaskInfo, candidates: IntArray
) -> FloatArray:
    """PodTopologySpread's normalised 0–100 score of each candidate row (unweighted)."""
    constraints = task.spec.terms.soft_spread
    if not constraints or not len(candidates):
        return np.zeros(len(candidates))
    has_all = _has_keys(table, constraints)
    scored = has_all[candidates]
    kept = candidates[scored]
    policies = _Policies(table, task)
    raw = np.zeros(len(candidates))
    for constraint in constraints:
        codes, mapping = table.label_codes(constraint.topology_key)
        per_node = _per_node(index, task, constraint)
        if constraint.topology_key == HOSTNAME:
            weight = math.log(len(kept) + 2)
            count = per_node[kept].astype(float)
        else:
            in_candidates = np.zeros(len(mapping), dtype=bool)
            in_candidates[codes[kept]] = True
            weight = math.log(int(in_candidates.sum()) + 2)
            eligible = policies.eligible(constraint, has_all)
            counts = np.bincount(
                codes[eligible], weights=per_node[eligible], minlength=len(mapping)
            )
            count = counts[codes[kept]]
        raw[scored] += count * weight + (constraint.max_skew - 1)
    rounded = np.floor(raw + 0.5)  # Go's math.Round on non-negative values
    if not scored.any():
        return np.zeros(len(candidates))
    high = max(float(rounded[scored].max()), 0.0)
    low = float(rounded[scored].min())
    if high == 0:
        return np.where(scored, float(MAX_SCORE), 0.0)
    normalised = np.floor(MAX_SCORE * (high + low - rounded) / high)
    return np.where(scored, normalised, 0.0)
