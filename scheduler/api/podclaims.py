"""A pod's ``spec.resourceClaims``: which ResourceClaims a pod needs, by name.

Two shapes of the pod API are read. Kubernetes 1.31+ puts ``resourceClaimName`` or
``resourceClaimTemplateName`` on the entry itself; 1.28–1.30 nest them under ``source``. A
claim made from a template for this pod has a generated name that the resourceclaim controller
records in the pod's ``status.resourceClaimStatuses`` (``{name, resourceClaimName}``); until it is
there the pod waits. The embedded cluster plays that controller (:func:`template_claim`): the
claim is named ``<pod>-<pod claim>-<suffix>``, owned by the pod, and annotated with
``resource.kubernetes.io/pod-claim-name`` as the controller does.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.errors import ObjectError

__all__ = [
    "POD_CLAIM_NAME_ANNOTATION",
    "PodClaim",
    "claim_key",
    "pod_claims",
    "resolve_claim_names",
    "template_claim",
]

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
"""Set by the resourceclaim controller on a claim it generated: the pod's claim entry name."""


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One ``spec.resourceClaims`` entry: exactly one of ``claim_name``/``template_name``."""

    name: str
    claim_name: str = ""
    template_name: str = ""


def claim_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def pod_claims(pod: Mapping[str, Any]) -> tuple[PodClaim, ...]:
    """The pod's claim entries (both API shapes); raises ``ObjectError`` naming the field."""
    meta = pod.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    entries = (pod.get("spec") or {}).get("resourceClaims") or []
    if not isinstance(entries, list):
        raise ObjectError(kind="Pod", name=name, namespace=namespace,
                          field="spec.resourceClaims", problem="must be a list")
    out: list[PodClaim] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"spec.resourceClaims[{i}]"
        if not isinstance(entry, Mapping):
            raise ObjectError(kind="Pod", name=name, namespace=namespace, field=where,
                              problem="must be a map")
        claim = str(entry.get("name") or "")
        if not claim:
            raise ObjectError(kind="Pod", name=name, namespace=namespace,
                              field=f"{where}.name", problem="is required")
        if claim in seen:
            raise ObjectError(kind="Pod", name=name, namespace=namespace,
                              field=f"{where}.name", problem=f"duplicate name {claim!r}")
        seen.add(claim)
        source = entry["source"] if isinstance(entry.get("source"), Mapping) else entry
        claim_name = str(source.get("resourceClaimName") or "")
        template = str(source.get("resourceClaimTemplateName") or "")
        if bool(claim_name) == bool(template):
            raise ObjectError(
                kind="Pod", name=name, namespace=namespace, field=where,
                problem="must set exactly one of resourceClaimName and "
                        "resourceClaimTemplateName")
        out.append(PodClaim(name=claim, claim_name=claim_name, template_name=template))
    return tuple(out)


def resolve_claim_names(pod: Mapping[str, Any], claims: tuple[PodClaim, ...]
                        ) -> list[tuple[PodClaim, str | None]]:
    """Each entry with the name of the ResourceClaim it stands for: its own name, or the
    generated one from ``status.resourceClaimStatuses`` (None while that is not written yet;
    "" when the controller recorded that no claim is needed)."""
    statuses: dict[str, str] = {}
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if isinstance(status, Mapping) and status.get("name"):
            statuses[str(status["name"])] = str(status.get("resourceClaimName") or "")
    out: list[tuple[PodClaim, str | None]] = []
    for claim in claims:
        if claim.claim_name:
            out.append((claim, claim.claim_name))
        else:
            out.append((claim, statuses.get(claim.name)))
    return out


def template_claim(pod: Mapping[str, Any], claim: PodClaim, template: Mapping[str, Any], *,
                   suffix: str) -> dict[str, Any]:
    """The ResourceClaim the resourceclaim controller makes from ``template`` for ``pod``."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    spec = ((template.get("spec") or {}).get("spec")) or {}
    template_meta = (template.get("spec") or {}).get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[POD_CLAIM_NAME_ANNOTATION] = claim.name
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{meta.get('name')}-{claim.name}-{suffix}"[:253],
            "namespace": namespace,
            "labels": dict(template_meta.get("labels") or {}),
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Pod", "name": meta.get("name"),
                "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": copy.deepcopy(dict(spec)),
    }
