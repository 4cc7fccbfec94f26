"""Builders for Dynamic Resource Allocation scenarios: classes, slices, claims, templates and
pods that reference them, in the ``resource.k8s.io/v1`` shapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.builders import make_pod

Obj = dict[str, Any]
DRIVER = "gpu.example.com"
V1 = "resource.k8s.io/v1"

GATED_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: drf}
  - {name: predicates, arguments: {predicate.DRAFeatureGates: "DRAConsumableCapacity=true"}}
  - {name: proportion}
  - {name: nodeorder}
"""
"""The default tiers, with the consumable-capacity gate on through the conf's
``predicate.DRAFeatureGates``."""


def make_class(name: str = DRIVER, *, mode: str = "exclusive") -> Obj:
    expression = (f'device.driver == "{DRIVER}" && '
                  f'device.attributes["{DRIVER}"].mode == "{mode}"')
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def make_slice(node: str, devices: Sequence[str] = ("gpu-0", "gpu-1"), *,
               shared_memory: str | None = None) -> Obj:
    """Whole GPUs on ``node``; with ``shared_memory`` each is shared by consumable memory."""
    out = []
    for name in devices:
        device: Obj = {"name": name,
                       "attributes": {"mode": {"string": "shared" if shared_memory
                                               else "exclusive"}},
                       "capacity": {"memory": {"value": shared_memory or "40Gi"}}}
        if shared_memory:
            device["allowMultipleAllocations"] = True
            device["capacity"]["memory"]["requestPolicy"] = {"default": "1Gi",
                                                            "validRange": {"min": "1Gi"}}
        out.append(device)
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": out}}


def claim_spec(device_class: str = DRIVER, *, memory: str | None = None) -> Obj:
    exactly: Obj = {"deviceClassName": device_class}
    if memory is not None:
        exactly["capacity"] = {"requests": {"memory": memory}}
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def make_claim(name: str, *, device_class: str = DRIVER, memory: str | None = None,
               status: Mapping[str, Any] | None = None) -> Obj:
    claim: Obj = {"apiVersion": V1, "kind": "ResourceClaim",
                  "metadata": {"name": name, "namespace": "default"},
                  "spec": claim_spec(device_class, memory=memory)}
    if status is not None:
        claim["status"] = dict(status)
    return claim


def make_template(name: str, *, device_class: str = DRIVER, memory: str | None = None) -> Obj:
    return {"apiVersion": V1, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": claim_spec(device_class, memory=memory)}}


def claim_pod(name: str, *, claim: str = "", template: str = "", legacy: bool = False,
              **kwargs: Any) -> Obj:
    """A pod with one claim entry ``gpu`` (``legacy``: the 1.28–1.30 ``source`` shape)."""
    pod = make_pod(name, **kwargs)
    source = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template}
    entry: Obj = {"name": "gpu", "source": source} if legacy else {"name": "gpu", **source}
    pod["spec"]["resourceClaims"] = [entry]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return pod


def results_of(claim: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(pool, device)`` of each allocated device of a claim object."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [(r["pool"], r["device"]) for r in (allocation.get("devices") or {}).get("results")
            or []]


def reserved_names(claim: Mapping[str, Any]) -> list[str]:
    return [r["name"] for r in (claim.get("status") or {}).get("reservedFor") or []]
