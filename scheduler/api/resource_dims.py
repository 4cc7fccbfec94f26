"""Resource comparisons restricted to some dimensions, as Volcano's queue plugins make them.

Queue quotas are checked only on the dimensions a request actually asks for, and reclaim looks
only at dimensions a queue declares. Each function mirrors one of Volcano's ``Resource``
methods, including where it compares exactly and where it allows the 0.1 tolerance; ``pods``
(one per task) is never a quota dimension here.
"""

from __future__ import annotations

from scheduler.api.resource import CPU, MEMORY, MIN_RESOURCE, PODS, Resource

__all__ = [
    "exceeded_on_request",
    "intersects",
    "over_on_declared",
    "resource_names",
    "within_on_some",
]


def resource_names(resource: Resource) -> set[str]:
    """Dimensions with a value of at least the tolerance (``pods`` included)."""
    return {name for name in resource.names() if resource.get(name) >= MIN_RESOURCE}


def intersects(left: Resource, right: Resource, *, ignore_pods: bool = False) -> bool:
    """Whether both have a non-zero value on some dimension."""
    common = resource_names(left) & resource_names(right)
    if ignore_pods:
        common.discard(PODS)
    return bool(common)


def _request_dims(request: Resource) -> list[str]:
    return [name for name in request.names() if name != PODS and request.get(name) > 0]


def exceeded_on_request(used: Resource, limit: Resource, request: Resource) -> list[str]:
    """Dimensions the request asks for on which ``used`` is above ``limit`` (compared exactly;
    a dimension missing from ``limit`` is 0). Empty when ``used`` fits. Volcano's
    ``LessEqualWithDimensionAndResourcesName``."""
    return [name for name in _request_dims(request) if used.get(name) > limit.get(name)]


def within_on_some(used: Resource, deserved: Resource, request: Resource) -> list[str]:
    """Dimensions the request asks for on which ``used`` is still within ``deserved`` (with
    the tolerance), skipping dimensions both leave at zero. Volcano's
    ``LessEqualPartlyWithDimensionZeroFiltered``."""
    out = []
    for name in _request_dims(request):
        have, cap = used.get(name), deserved.get(name)
        if have < MIN_RESOURCE and cap < MIN_RESOURCE:
            continue
        if have < cap or abs(have - cap) < MIN_RESOURCE:
            out.append(name)
    return out


def over_on_declared(allocated: Resource, deserved: Resource, request: Resource) -> list[str]:
    """Dimensions the request uses on which ``allocated`` is above ``deserved`` (exactly),
    counting only dimensions ``deserved`` declares: cpu and memory when at least the
    tolerance, a scalar when present at all. Volcano's ``GreaterPartlyWithRelevantDimensions``."""
    out = []
    for name in _request_dims(request):
        if name in (CPU, MEMORY):
            if deserved.get(name) < MIN_RESOURCE:
                continue
        elif name not in deserved.scalars:
            continue
        if allocated.get(name) > deserved.get(name):
            out.append(name)
    return out
