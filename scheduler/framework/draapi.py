"""The surface of the DRA allocator package (:mod:`scheduler.devices.dra`) that scheduling
uses, imported in this one place: the object parsers and the allocation's wire form, the
feature gates, the allocated-device state and the allocator itself."""

from __future__ import annotations

from typing import Any

from scheduler.devices.dra.allocator import AllocatorError, Unschedulable, allocate
from scheduler.devices.dra.cel import CELError, compile_selector, device_matches
from scheduler.devices.dra.parse import (
    allocation_to_dict,
    device_class_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.devices.dra.state import AllocatedState, Features

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
