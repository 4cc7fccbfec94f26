"""What the scheduling side uses of the DRA allocator package, checked in one place: the
parsers, the allocation's wire form, the allocated state's add/remove and the allocator's
keyword signature (scheduler/framework/dra.py and scheduler/cache/dra.py rely on these)."""

from __future__ import annotations

import inspect

from scheduler.framework import draapi as allocator
from scheduler.framework import draapi as model


def test_the_model_offers_the_parsers_and_the_wire_form() -> None:
    for name in ("device_class_from_dict", "resource_slice_from_dict",
                 "resource_claim_from_dict", "allocation_to_dict"):
        assert callable(getattr(model, name)), name


def test_the_allocator_offers_what_the_session_calls() -> None:
    parameters = inspect.signature(allocator.allocate).parameters
    for name in ("node_name", "node_labels", "claims", "classes", "slices", "allocated",
                 "features"):
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    assert issubclass(allocator.Unschedulable, Exception)
    assert issubclass(allocator.AllocatorError, Exception)
    state = allocator.AllocatedState.from_claims([])
    assert callable(state.add) and callable(state.remove)
    allocator.parse_feature_gates("")


def test_a_parsed_claim_and_slice_carry_what_the_session_reads() -> None:
    claim = model.resource_claim_from_dict({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpu",
                                           "exactly": {"deviceClassName": "x"}}]}}})
    assert claim.allocation is None
    piece = model.resource_slice_from_dict({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "d", "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "g0"}]}})
    assert piece.node_name == "n1"
