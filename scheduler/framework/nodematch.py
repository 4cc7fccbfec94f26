"""Vectorised matching of pod node constraints against the node table's static columns.

Shared by the filters (required affinity, node selector, taints) and the scorers (preferred
affinity) so both read labels and taints the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.api.pod import NodeSelectorRequirement, NodeSelectorTerm, PodSpecInfo
from scheduler.framework.hooks import BoolArray
from scheduler.framework.nodetable import NodeTable

__all__ = ["affinity_mask", "match_term", "untolerated_taint_reason"]


def _requirement_mask(table: NodeTable, req: NodeSelectorRequirement) -> BoolArray:
    if req.field:  # matchFields: only metadata.name exists
        names = np.array([name in req.values for name in table.names], dtype=bool)
        return names if req.operator == "In" else ~names
    codes, mapping = table.label_codes(req.key)
    if req.operator == "Exists":
        return codes >= 0
    if req.operator == "DoesNotExist":
        return codes < 0
    if req.operator in ("In", "NotIn"):
        wanted = [mapping[v] for v in req.values if v in mapping]
        hit = np.isin(codes, wanted) if wanted else np.zeros(len(codes), dtype=bool)
        return hit if req.operator == "In" else ~hit
    # Gt / Lt compare the label value as an integer
    try:
        bound = int(req.values[0])
    except (IndexError, ValueError):
        return np.zeros(len(codes), dtype=bool)
    by_code = np.zeros(len(mapping) + 1, dtype=bool)
    for value, code in mapping.items():
        try:
            number = int(value)
        except ValueError:
            continue
        by_code[code] = number > bound if req.operator == "Gt" else number < bound
    return np.where(codes >= 0, by_code[codes], False)


def match_term(table: NodeTable, term: NodeSelectorTerm) -> BoolArray:
    """Nodes matching every requirement of ``term`` (an empty term matches none)."""
    if not term.requirements:
        return np.zeros(len(table), dtype=bool)
    mask = np.ones(len(table), dtype=bool)
    for req in term.requirements:
        mask &= _requirement_mask(table, req)
    return mask


def affinity_mask(table: NodeTable, spec: PodSpecInfo) -> BoolArray:
    mask = np.ones(len(table), dtype=bool)
    for key, value in spec.node_selector:
        codes, mapping = table.label_codes(key)
        code = mapping.get(value)
        mask &= (codes == code) if code is not None else False
    if spec.required_terms:
        any_term = np.zeros(len(table), dtype=bool)
        for term in spec.required_terms:
            any_term |= match_term(table, term)
        mask &= any_term
    return mask


def untolerated_taint_reason(spec: PodSpecInfo, taints: tuple[Any, ...]) -> str | None:
    """kube-scheduler's reason for the first NoSchedule/NoExecute taint not tolerated."""
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint.key, taint.value, taint.effect) for t in spec.tolerations):
            return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    return None
