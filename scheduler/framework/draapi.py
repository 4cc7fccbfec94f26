"""The surface of the DRA allocator package (:mod:`scheduler.devices.dra`) that scheduling
uses, imported in this one place: the object parsers and the allocation's wire form, the
feature gates, the allocated-device state and the allocator itself."""

from __future__ import annotations

from typing import Any

from scheduler.devices.dra.allocator import AllocatorError, Unschedulable, allocate
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
    "device_class_from_dict",
    "parse_feature_gates",
    "resource_claim_from_dict",
    "resource_slice_from_dict",
]


def parse_feature_gates(text: str) -> Any:
    """``--feature-gates`` as kube-scheduler reads it (the DRA gates; others are not ours);
    raises ``ValueError`` for a malformed value."""
    return Features.parse(text)
