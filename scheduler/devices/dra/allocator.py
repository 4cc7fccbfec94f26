"""kube-scheduler's structured-parameters DRA allocator (k8s.io/dynamic-resource-allocation
``structured``), for one node and a set of claims to allocate together.

``allocate`` is ``Allocator.Allocate``: validate every request (gates, class, count or "all"),
then search depth first, claim by claim, request by request, device by device, over the pools
the node sees (in pool, slice, device order), backtracking on constraints, counters and
capacity; the first full solution wins. The result per claim carries the devices, the class
and claim config and the node selector of the devices used. "No device fits" raises
:class:`Unschedulable` with a reason naming the claim, the request and why; what
kube-scheduler reports as an error (a CEL selector that does not compile or fails, an invalid
pool, a gated feature that is off) raises :class:`AllocatorError` with its text.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

from scheduler.devices.dra.errors import AllocatorError, Unschedulable
from scheduler.devices.dra.explain import explain
from scheduler.devices.dra.model import (
    AllocationResult,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
)
from scheduler.devices.dra.search import MissingClass, Search
from scheduler.devices.dra.state import AllocatedState, DeviceID, Features

__all__ = [
    "AllocatedState",
    "AllocatorError",
    "DeviceID",
    "Features",
    "Unschedulable",
    "allocate",
    "new_share_id",
]

MAX_RESULTS = 32
"""resourceapi.AllocationResultsMaxSize."""


def new_share_id() -> str:
    return str(uuid.uuid4())


def allocate(
    *,
    node_name: str,
    node_labels: Mapping[str, str],
    claims: Sequence[ResourceClaim],
    classes: Mapping[str, DeviceClass],
    slices: Sequence[ResourceSlice],
    allocated: AllocatedState,
    features: Features,
    share_id: Callable[[], str] = new_share_id,
) -> list[AllocationResult]:
    """Allocate every claim on the node, one result per claim in order.

    ``slices`` may be all slices of the cluster (the node's are picked, and other slices of a
    pool decide whether it is complete); ``allocated`` is read, never changed: the caller adds
    the results once it keeps them. ``share_id`` makes the shareIDs of shared devices
    (random UUIDs, as kube-scheduler's).
    """
    try:
        search = Search(
            node_name=node_name,
            node_labels=node_labels,
            claims=claims,
            classes=classes,
            slices=slices,
            allocated=allocated,
            features=features,
            share_id=share_id,
            error=AllocatorError,
            max_results=MAX_RESULTS,
        )
    except MissingClass as exc:
        raise Unschedulable(str(exc)) from None
    found = search.run()
    if not found:
        if search.invalid_pools:
            raise AllocatorError("invalid resource pools were encountered")
        raise Unschedulable(explain(search))
    return search.results()
