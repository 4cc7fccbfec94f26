"""The surface of the DRA allocator package (:mod:`scheduler.devices.dra`) that scheduling
uses, imported in this one place: the object parsers and the allocation's wire form, the
feature gates, the allocated-device state and the allocator itself.

Only the gates, the allocated-device state and the allocator's errors are imported with this
module; the object model, the parsers, the CEL selectors and the allocator's search (about a
tenth of a second of imports, most of it the model's dataclasses) load at the first call that
needs them: the first DRA object the cache receives or the first claim a pod asks for. A
cluster without DRA never pays for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scheduler.devices.dra.errors import AllocatorError, Unschedulable
from scheduler.devices.dra.state import AllocatedState, Features

if TYPE_CHECKING:
    from scheduler.devices.dra.model import (
        AllocationResult,
        DeviceClass,
        ResourceClaim,
        ResourceSlice,
    )

__all__ = [
    "AllocatedState",
    "AllocatorError",
    "Features",
    "Unschedulable",
    "allocate",
    "allocation_to_dict",
    "claims_may_use",
    "device_class_from_dict",
    "parse_feature_gates",
    "resource_claim_from_dict",
    "resource_slice_from_dict",
]


def allocate(
    *,
    node_name: str,
    node_labels: Mapping[str, str],
    claims: Sequence[ResourceClaim],
    classes: Mapping[str, DeviceClass],
    slices: Sequence[ResourceSlice],
    allocated: AllocatedState,
    features: Features,
    share_id: Callable[[], str] | None = None,
) -> list[AllocationResult]:
    """The allocator (:func:`scheduler.devices.dra.allocator.allocate`); ``share_id`` None
    takes its default."""
    from scheduler.devices.dra import allocator

    return allocator.allocate(node_name=node_name, node_labels=node_labels, claims=claims,
                              classes=classes, slices=slices, allocated=allocated,
                              features=features,
                              share_id=share_id or allocator.new_share_id)


def allocation_to_dict(result: AllocationResult) -> dict[str, Any]:
    from scheduler.devices.dra.parse import allocation_to_dict as to_dict

    return to_dict(result)


def device_class_from_dict(obj: Mapping[str, Any]) -> DeviceClass:
    from scheduler.devices.dra.parse import device_class_from_dict as parse

    return parse(obj)


def resource_claim_from_dict(obj: Mapping[str, Any]) -> ResourceClaim:
    from scheduler.devices.dra.parse import resource_claim_from_dict as parse

    return parse(obj)


def resource_slice_from_dict(obj: Mapping[str, Any]) -> ResourceSlice:
    from scheduler.devices.dra.parse import resource_slice_from_dict as parse

    return parse(obj)


def parse_feature_gates(text: str) -> Any:
    """``--feature-gates`` as kube-scheduler reads it (the DRA gates; others are not ours);
    raises ``ValueError`` for a malformed value."""
    return Features.parse(text)


def claims_may_use(claims: Any, device: Any, driver: str, *, classes: Any,
                   features: Any) -> bool:
    """Whether a request of ``claims`` could be given ``device`` (its class's and its own
    CEL selectors match), or whether taking the device may change what they get in some other
    way (it consumes shared counters, a selector fails): False only when the device is none of
    their business."""
    from scheduler.devices.dra.cel import CELError, compile_selector, device_matches

    if device.consumes_counters:
        return True
    for claim in claims:
        for request in claim.requests:
            subs = [request.exactly] if request.exactly is not None else request.first_available
            for sub in subs:
                device_class = classes.get(sub.device_class_name)
                if device_class is None:
                    continue  # Unschedulable whatever the devices
                matched = True
                for expression in (*device_class.selectors, *sub.selectors):
                    compiled = compile_selector(expression)
                    if compiled.error:
                        return True
                    try:
                        if not device_matches(compiled, device, driver,
                                              list_types=features.list_type_attributes):
                            matched = False
                            break
                    except CELError:
                        return True
                if matched:
                    return True
    return False
