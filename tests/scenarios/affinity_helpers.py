"""Builders shared by the inter-pod affinity and topology spread scenarios."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.builders import Obj, make_node, make_pod

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def zoned_node(name: str, zone: str | None, **kwargs: Any) -> Obj:
    """A node labelled with its hostname and (unless ``None``) a zone."""
    labels = {HOST: name, **(kwargs.pop("labels", None) or {})}
    if zone is not None:
        labels[ZONE] = zone
    return make_node(name, labels=labels, **kwargs)


def labelled_pod(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    spread: Sequence[Mapping[str, Any]] = (),
    image: str | None = None,
    **kwargs: Any,
) -> Obj:
    pod = make_pod(name, **kwargs)
    pod["metadata"]["labels"] = dict(labels or {})
    if spread:
        pod["spec"]["topologySpreadConstraints"] = [dict(c) for c in spread]
    if image is not None:
        pod["spec"]["containers"][0]["image"] = image
    return pod


def term(
    match: Mapping[str, str],
    key: str = HOST,
    *,
    namespaces: Sequence[str] | None = None,
    namespace_selector: Mapping[str, Any] | None = None,
) -> Obj:
    out: Obj = {"labelSelector": {"matchLabels": dict(match)}, "topologyKey": key}
    if namespaces is not None:
        out["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        out["namespaceSelector"] = dict(namespace_selector)
    return out


def affinity(
    *,
    required: Sequence[Obj] = (),
    anti: Sequence[Obj] = (),
    preferred: Sequence[tuple[int, Obj]] = (),
    preferred_anti: Sequence[tuple[int, Obj]] = (),
) -> Obj:
    out: Obj = {}
    for kind, hard, soft in (
        ("podAffinity", required, preferred),
        ("podAntiAffinity", anti, preferred_anti),
    ):
        block: Obj = {}
        if hard:
            block["requiredDuringSchedulingIgnoredDuringExecution"] = list(hard)
        if soft:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in soft
            ]
        if block:
            out[kind] = block
    return out


def spread(
    match: Mapping[str, str],
    key: str = ZONE,
    *,
    max_skew: int = 1,
    when: str = "DoNotSchedule",
    **extra: Any,
) -> Obj:
    out: Obj = {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": dict(match)},
    }
    out.update(extra)
    return out


def unavailable(total: int, *reasons: tuple[int, str]) -> str:
    """Volcano's FitErrors text with reasons sorted as it sorts them."""
    parts = sorted(f"{count} {reason}" for count, reason in reasons)
    return f"0/{total} nodes are unavailable: {', '.join(parts)}."
