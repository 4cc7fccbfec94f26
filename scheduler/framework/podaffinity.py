"""Inter-pod affinity: kube-scheduler's InterPodAffinity filter and score over the node table.

Both read the session's :class:`~scheduler.framework.podindex.PodIndex`, so one pod's check is
a handful of vector operations over label codes instead of a walk over every placed pod:

* filter (``Filter`` of the plugin): a node must have every topology key of the pod's required
  affinity terms and, per term, a matching pod in its domain — unless no pod anywhere matches
  all terms and the pod matches them itself (the first pod of a self-affine group); no pod
  matching a required anti-affinity term may share the node's domain; and no placed pod whose
  required anti-affinity selects this pod may share the node's domain of that term's key.
* score (``Score`` + ``NormalizeScore``): per domain, the weights of the pod's preferred terms
  times the matching pods there, plus (minus) the weights of placed pods' preferred
  (anti-)affinity terms that select this pod; min-max normalised to 0–100 over the candidates.
  Placed pods' *required* affinity adds nothing, as Volcano builds the plugin with a hard pod
  affinity weight of 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from scheduler.api.podterms import PodAffinityTerm, WeightedPodAffinityTerm
from scheduler.api.task import TaskInfo
from scheduler.framework.hooks import BoolArray, FloatArray, IntArray
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.podindex import (
    PREFERRED,
    PREFERRED_ANTI,
    REQUIRED_ANTI,
    CountQuery,
    LabelGroup,
    PodIndex,
)

__all__ = [
    "REASON_AFFINITY",
    "REASON_ANTI_AFFINITY",
    "REASON_EXISTING_ANTI_AFFINITY",
    "affinity_reasons",
    "affinity_scores",
    "wants_affinity_filter",
    "wants_affinity_score",
]

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
MAX_SCORE = 100


def _term_key(term: PodAffinityTerm) -> tuple[object, ...]:
    return (term.selector, term.namespaces, term.namespace_selector)


def _matches_term(term: PodAffinityTerm) -> Callable[[LabelGroup], bool]:
    def matches(group: LabelGroup) -> bool:
        return term.matches(group.namespace, group.labels, group.namespace_labels)

    return matches


def _term_query(index: PodIndex, term: PodAffinityTerm) -> CountQuery:
    return index.query(
        ("term", *_term_key(term)), _matches_term(term), anchors=term.selector.anchors()
    )


def _all_terms_query(index: PodIndex, terms: tuple[PodAffinityTerm, ...]) -> CountQuery:
    def matches(group: LabelGroup) -> bool:
        return all(t.matches(group.namespace, group.labels, group.namespace_labels) for t in terms)

    # a pod matching all terms matches the first, so the first term's anchors hold
    return index.query(
        ("all", tuple(_term_key(t) for t in terms)), matches, anchors=terms[0].selector.anchors()
    )


def _in_domain(table: NodeTable, key: str, domains: IntArray) -> tuple[BoolArray, IntArray]:
    """Per node: whether it has label ``key``, and the count of its domain (0 without)."""
    codes, _ = table.label_codes(key)
    has = codes >= 0
    counts = np.zeros(len(table), dtype=np.intp)
    counts[has] = domains[codes[has]]
    return has, counts


def wants_affinity_filter(index: PodIndex, task: TaskInfo) -> bool:
    return task.spec.terms.has_required or index.carriers_present


def affinity_reasons(
    index: PodIndex, table: NodeTable, task: TaskInfo
) -> list[tuple[BoolArray, str]]:
    """Failed-node masks in kube-scheduler's check order: pod affinity, pod anti-affinity,
    existing pods' anti-affinity (a node counts under its first failure)."""
    terms = task.spec.terms
    n = len(table)
    out: list[tuple[BoolArray, str]] = []
    if terms.affinity:
        query = _all_terms_query(index, terms.affinity)
        missing_key = np.zeros(n, dtype=bool)
        pods_exist = np.ones(n, dtype=bool)
        anywhere = False
        for term in terms.affinity:
            domains = index.domain_counts(query, term.topology_key)
            has, counts = _in_domain(table, term.topology_key, domains)
            missing_key |= ~has
            pods_exist &= counts > 0
            anywhere = anywhere or bool(domains.any())
        if not anywhere and _matches_itself(index, task, terms.affinity):
            pods_exist[:] = True
        out.append((missing_key | ~pods_exist, REASON_AFFINITY))
    if terms.anti_affinity:
        blocked = np.zeros(n, dtype=bool)
        for term in terms.anti_affinity:
            domains = index.domain_counts(_term_query(index, term), term.topology_key)
            has, counts = _in_domain(table, term.topology_key, domains)
            blocked |= has & (counts > 0)
        out.append((blocked, REASON_ANTI_AFFINITY))
    carriers = index.carriers_matching(REQUIRED_ANTI, namespace=task.namespace, labels=terms.labels)
    if carriers:
        blocked = np.zeros(n, dtype=bool)
        for carrier in carriers:
            has, counts = _in_domain(table, carrier.term.topology_key, carrier.domains)
            blocked |= has & (counts > 0)
        out.append((blocked, REASON_EXISTING_ANTI_AFFINITY))
    return out


def _matches_itself(index: PodIndex, task: TaskInfo, terms: tuple[PodAffinityTerm, ...]) -> bool:
    labels: Mapping[str, str] = dict(task.spec.terms.labels)
    ns_labels = index.namespace_labels.get(task.namespace, {})
    return all(t.matches(task.namespace, labels, ns_labels) for t in terms)


def wants_affinity_score(index: PodIndex, task: TaskInfo) -> bool:
    terms = task.spec.terms
    return bool(terms.preferred_affinity or terms.preferred_anti_affinity) or (
        index.carriers_present
    )


def affinity_scores(
    index: PodIndex, table: NodeTable, task: TaskInfo, candidates: IntArray
) -> FloatArray:
    """InterPodAffinity's normalised 0–100 score of each candidate row (unweighted)."""
    terms = task.spec.terms
    raw = np.zeros(len(candidates))

    def add(key: str, domains: IntArray, weight: int) -> None:
        _, counts = _in_domain(table, key, domains)
        raw[:] += (counts[candidates] * weight).astype(float)

    own: list[tuple[WeightedPodAffinityTerm, int]] = [(w, 1) for w in terms.preferred_affinity]
    own += [(w, -1) for w in terms.preferred_anti_affinity]
    for weighted, sign in own:
        term = weighted.term
        domains = index.domain_counts(_term_query(index, term), term.topology_key)
        add(term.topology_key, domains, sign * weighted.weight)
    for kind, sign in ((PREFERRED, 1), (PREFERRED_ANTI, -1)):
        for carrier in index.carriers_matching(kind, namespace=task.namespace, labels=terms.labels):
            add(carrier.term.topology_key, carrier.domains, sign * carrier.weight)
    return normalise_min_max(raw)


def normalise_min_max(raw: FloatArray) -> FloatArray:
    """InterPodAffinity's NormalizeScore: ``100 × (s − min) / (max − min)`` truncated, all 0
    when every score is equal."""
    if not len(raw):
        return raw
    low, high = raw.min(), raw.max()
    if high <= low:
        return np.zeros(len(raw))
    return np.trunc(MAX_SCORE * (raw - low) / (high - low))
