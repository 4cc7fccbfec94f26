"""The embedded cluster's part in Dynamic Resource Allocation: the resourceclaim controller.

For every pod that names a ResourceClaimTemplate in ``spec.resourceClaims`` the controller of
kube-controller-manager makes a ResourceClaim from the template, owned by the pod, named
``<pod>-<pod claim>-<5 random characters>`` and annotated with
``resource.kubernetes.io/pod-claim-name``, and records its name in the pod's
``status.resourceClaimStatuses``. The embedded cluster does the same when it loads manifests,
with a suffix derived from the pod's UID so that a run is repeatable. A pod whose template does
not exist is left as the controller leaves it (no status): the scheduler then says it waits.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.api.errors import ObjectError
from scheduler.api.podclaims import pod_claims, template_claim

__all__ = ["SUFFIX_ALPHABET", "create_template_claims", "release_pod_claims"]

SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters of Kubernetes' generated name suffixes (``utilrand.String``)."""

Obj = dict[str, Any]


def _suffix(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)] for b in digest[:5])


def create_template_claims(pods: list[Obj], templates: Mapping[str, Obj], *,
                           store: Callable[[Obj], None]) -> None:
    """Make the claims ``pods`` need from ``templates`` (``namespace/name`` → object)."""
    for pod in pods:
        try:
            claims = pod_claims(pod)
        except ObjectError:
            continue  # the scheduler reports the pod
        if not claims:
            continue
        meta = pod["metadata"]
        namespace = str(meta.get("namespace") or "default")
        status = pod.setdefault("status", {})
        statuses = list(status.get("resourceClaimStatuses") or [])
        known = {entry.get("name") for entry in statuses if isinstance(entry, Mapping)}
        for claim in claims:
            if not claim.template_name or claim.name in known:
                continue
            template = templates.get(f"{namespace}/{claim.template_name}")
            if template is None:
                continue
            obj = template_claim(pod, claim, template,
                                 suffix=_suffix(f"{meta.get('uid')}/{claim.name}"))
            obj["metadata"]["uid"] = str(uuid.uuid5(
                uuid.NAMESPACE_URL, f"lahar:ResourceClaim/{namespace}/{obj['metadata']['name']}"))
            obj["metadata"]["creationTimestamp"] = meta.get("creationTimestamp")
            store(obj)
            statuses.append({"name": claim.name,
                             "resourceClaimName": obj["metadata"]["name"]})
        if statuses:
            status["resourceClaimStatuses"] = statuses


def release_pod_claims(claims: Mapping[str, Obj], pod: Obj, *,
                       delete: Callable[[Obj], None], modify: Callable[[Obj], None]) -> None:
    """What the controllers do when ``pod`` is gone: the claims it owns are deleted (garbage
    collection of the template's claims), and it leaves the ``reservedFor`` of the others; a
    claim reserved for nobody any more is deallocated (the resourceclaim controller)."""
    uid = (pod.get("metadata") or {}).get("uid")
    for claim in list(claims.values()):
        meta = claim.get("metadata") or {}
        if any(isinstance(ref, Mapping) and ref.get("uid") == uid
               for ref in meta.get("ownerReferences") or []):
            delete(claim)
            continue
        status = claim.get("status") or {}
        reserved = [r for r in status.get("reservedFor") or [] if isinstance(r, Mapping)]
        if not any(r.get("uid") == uid for r in reserved):
            continue
        left = [r for r in reserved if r.get("uid") != uid]
        if left:
            status["reservedFor"] = left
        else:
            status.pop("reservedFor", None)
            status.pop("allocation", None)
        claim["status"] = status
        modify(claim)


def report_binding_conditions(status: dict[str, Any]) -> None:
    """What a driver does once a device with ``bindingConditions`` is allocated: its entry in
    ``status.devices`` gets each of those conditions True (kube-scheduler's PreBind waits for
    them). The simulated cluster has no driver of its own, so it reports them itself; entries
    the claim already has are left as they are."""
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    devices = status.setdefault("devices", []) if any(
        r.get("bindingConditions") for r in results) else None
    if devices is None:
        return
    known = {(d.get("driver"), d.get("pool"), d.get("device")) for d in devices}
    for result in results:
        wanted = result.get("bindingConditions") or []
        key = (result.get("driver"), result.get("pool"), result.get("device"))
        if not wanted or key in known:
            continue
        devices.append({"driver": key[0], "pool": key[1], "device": key[2], "conditions": [
            {"type": kind, "status": "True", "reason": "SimulatedDriver",
             "message": "reported by the simulated cluster"} for kind in wanted]})
        known.add(key)
