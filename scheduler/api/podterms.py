"""The pod-to-pod constraints of a pod spec: inter-pod (anti-)affinity terms, topology spread
constraints, and the container images image locality looks at.

Parsed once per pod version into frozen values (hashable, so equal terms of many pods share
one entry of the columnar pod index). Defaults follow the Kubernetes API: a term without
``namespaces`` and ``namespaceSelector`` means the pod's own namespace; a spread constraint
without ``minDomains`` has 1, ``nodeAffinityPolicy`` defaults to ``Honor`` and
``nodeTaintsPolicy`` to ``Ignore``; ``matchLabelKeys`` are folded into the selector with the
pod's own label values. Invalid input the API server would refuse is an :class:`ObjectError`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.selectors import (
    ErrorFactory,
    LabelRequirement,
    LabelSelector,
    parse_label_selector,
)

__all__ = [
    "DO_NOT_SCHEDULE",
    "EMPTY_TERMS",
    "SCHEDULE_ANYWAY",
    "PodAffinityTerm",
    "PodTerms",
    "SpreadConstraint",
    "WeightedPodAffinityTerm",
    "normalized_image",
    "parse_pod_terms",
]

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector
    topology_key: str

    def matches(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]
    ) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is one this term selects."""
        if namespace in self.namespaces or self.namespace_selector.matches(namespace_labels):
            return self.selector.matches(labels)
        return False


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    @property
    def honors_node_affinity(self) -> bool:
        return self.node_affinity_policy == HONOR

    @property
    def honors_taints(self) -> bool:
        return self.node_taints_policy == HONOR


@dataclass(frozen=True, slots=True)
class PodTerms:
    """Everything of a pod that relates it to other pods."""

    labels: tuple[tuple[str, str], ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    images: tuple[str, ...] = ()
    deleting: bool = False
    carries_terms: bool = False
    """True when a placed pod like this one constrains or scores pods placed after it (it has
    required anti-affinity or preferred terms); kept as a field for the per-event hot path."""
    constrained: bool = False
    """True when the pod has required (anti-)affinity or topology spread constraints."""

    @property
    def has_required(self) -> bool:
        return bool(self.affinity or self.anti_affinity)

    @property
    def hard_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.when_unsatisfiable == DO_NOT_SCHEDULE)

    @property
    def soft_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.when_unsatisfiable == SCHEDULE_ANYWAY)


EMPTY_TERMS = PodTerms()


def normalized_image(name: str) -> str:
    """A container image name as kube-scheduler's image locality compares it (``:latest``
    appended when the name carries no tag)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def _term(raw: Any, where: str, namespace: str, err: ErrorFactory) -> PodAffinityTerm:
    if not isinstance(raw, Mapping):
        raise err(where, "must be a pod affinity term object")
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise err(where + ".topologyKey", "is required")
    names = raw.get("namespaces") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise err(where + ".namespaces", "must be a list of strings")
    raw_ns_selector = raw.get("namespaceSelector")
    ns_selector = parse_label_selector(raw_ns_selector, where + ".namespaceSelector", err)
    namespaces = frozenset(names)
    if not namespaces and raw_ns_selector is None:
        namespaces = frozenset({namespace})
    return PodAffinityTerm(
        selector=parse_label_selector(raw.get("labelSelector"), where + ".labelSelector", err),
        namespaces=namespaces,
        namespace_selector=ns_selector,
        topology_key=key,
    )


def _terms(
    block: Mapping[str, Any], where: str, namespace: str, err: ErrorFactory
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    required_raw = block.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    preferred_raw = block.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    if not isinstance(required_raw, list):
        raise err(where + ".requiredDuringSchedulingIgnoredDuringExecution", "must be a list")
    if not isinstance(preferred_raw, list):
        raise err(where + ".preferredDuringSchedulingIgnoredDuringExecution", "must be a list")
    required = tuple(
        _term(t, f"{where}.requiredDuringSchedulingIgnoredDuringExecution[{i}]", namespace, err)
        for i, t in enumerate(required_raw)
    )
    preferred: list[WeightedPodAffinityTerm] = []
    for i, entry in enumerate(preferred_raw):
        path = f"{where}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        if not isinstance(entry, Mapping):
            raise err(path, "must be a weighted pod affinity term object")
        weight = entry.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            raise err(path + ".weight", "must be an integer in the range 1-100")
        term = _term(entry.get("podAffinityTerm"), path + ".podAffinityTerm", namespace, err)
        preferred.append(WeightedPodAffinityTerm(weight, term))
    return required, tuple(preferred)


def _int_field(raw: Mapping[str, Any], name: str, where: str, err: ErrorFactory) -> int | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise err(f"{where}.{name}", "must be an integer greater than zero")
    return value


def _spread(raw: Any, where: str, labels: Mapping[str, str], err: ErrorFactory) -> SpreadConstraint:
    if not isinstance(raw, Mapping):
        raise err(where, "must be a topology spread constraint object")
    max_skew = _int_field(raw, "maxSkew", where, err)
    if max_skew is None:
        raise err(where + ".maxSkew", "is required")
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise err(where + ".topologyKey", "is required")
    when = raw.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise err(where + ".whenUnsatisfiable", f"must be {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}")
    min_domains = _int_field(raw, "minDomains", where, err)
    if min_domains is not None and when != DO_NOT_SCHEDULE:
        raise err(where + ".minDomains", f"may only be set with {DO_NOT_SCHEDULE}")
    policies: dict[str, str] = {}
    for name, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
        value = raw.get(name) or default
        if value not in (HONOR, IGNORE):
            raise err(f"{where}.{name}", f"must be {HONOR} or {IGNORE}")
        policies[name] = value
    selector = parse_label_selector(raw.get("labelSelector"), where + ".labelSelector", err)
    keys = raw.get("matchLabelKeys") or []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise err(where + ".matchLabelKeys", "must be a list of strings")
    # The pod's own values of matchLabelKeys narrow the selector (keys it lacks are ignored).
    extra = tuple(LabelRequirement(k, "In", frozenset({labels[k]})) for k in keys if k in labels)
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=str(when),
        selector=selector.with_requirements(extra),
        min_domains=min_domains or 1,
        node_affinity_policy=policies["nodeAffinityPolicy"],
        node_taints_policy=policies["nodeTaintsPolicy"],
    )


@functools.lru_cache(maxsize=4096)
def _plain_terms(
    labels: tuple[tuple[str, str], ...], images: tuple[str, ...], deleting: bool
) -> PodTerms:
    """The (shared, immutable) terms of a pod without pod-to-pod constraints."""
    return PodTerms(labels=labels, images=images, deleting=deleting)


def parse_pod_terms(pod: Mapping[str, Any], err: ErrorFactory) -> PodTerms:
    """The pod-to-pod constraints of ``pod``; raises the error ``err`` builds."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    namespace = str(meta.get("namespace") or "default")
    # type() checks first: every pod version is parsed, and ABC isinstance checks are slow.
    raw_labels = meta.get("labels") or {}
    if type(raw_labels) is not dict and not isinstance(raw_labels, Mapping):
        raise err("metadata.labels", "must be a map of strings")
    labels = {str(k): str(v) for k, v in raw_labels.items()}
    affinity = spec.get("affinity") or {}
    if type(affinity) is not dict and not isinstance(affinity, Mapping):
        raise err("spec.affinity", "must be an object")
    images = tuple(
        normalized_image(str(c["image"]))
        for kind in ("initContainers", "containers")
        for c in spec.get(kind) or ()
        if (type(c) is dict or isinstance(c, Mapping)) and c.get("image")
    )
    deleting = bool(meta.get("deletionTimestamp"))
    raw_spread = spec.get("topologySpreadConstraints") or []
    if not (raw_spread or affinity.get("podAffinity") or affinity.get("podAntiAffinity")):
        # Most pods relate to no other pod: every pod version is parsed, so keep this cheap.
        return _plain_terms(tuple(sorted(labels.items())), images, deleting)
    required: dict[str, tuple[PodAffinityTerm, ...]] = {}
    preferred: dict[str, tuple[WeightedPodAffinityTerm, ...]] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        block = affinity.get(kind) or {}
        if not isinstance(block, Mapping):
            raise err(f"spec.affinity.{kind}", "must be an object")
        required[kind], preferred[kind] = _terms(block, f"spec.affinity.{kind}", namespace, err)
    if not isinstance(raw_spread, list):
        raise err("spec.topologySpreadConstraints", "must be a list")
    spread = tuple(
        _spread(c, f"spec.topologySpreadConstraints[{i}]", labels, err)
        for i, c in enumerate(raw_spread)
    )
    seen: set[tuple[str, str]] = set()
    for i, constraint in enumerate(spread):
        pair = (constraint.topology_key, constraint.when_unsatisfiable)
        if pair in seen:
            raise err(
                f"spec.topologySpreadConstraints[{i}]",
                f"duplicate topologyKey {pair[0]!r} with whenUnsatisfiable {pair[1]}",
            )
        seen.add(pair)
    return PodTerms(
        labels=tuple(sorted(labels.items())),
        affinity=required["podAffinity"],
        anti_affinity=required["podAntiAffinity"],
        preferred_affinity=preferred["podAffinity"],
        preferred_anti_affinity=preferred["podAntiAffinity"],
        spread=spread,
        images=images,
        deleting=deleting,
        carries_terms=bool(
            required["podAntiAffinity"] or preferred["podAffinity"] or preferred["podAntiAffinity"]
        ),
        constrained=bool(required["podAffinity"] or required["podAntiAffinity"] or spread),
    )
