"""Fine-grained devices end to end in the embedded cluster: choice, annotations, ledger.

Card choice follows Koordinator's ``defaultAllocator`` and the GPU score of
``pkg/scheduler/plugins/deviceshare/scoring.go`` (``LeastAllocated`` / ``MostAllocated``);
the annotation is ``device-allocated`` as written by ``PreBind`` (``id`` from the Device
object), usage is rebuilt from it as ``nodeDeviceCache.updatePod`` does.
"""

from __future__ import annotations

import json

import pytest

from scheduler.cache.cache import SchedulerCache
from scheduler.deviceconf import device_support
from tests.builders import conf_of, gang, make_node, simulate
from tests.devices.finegrained_helpers import (
    ALLOCATED,
    GIB,
    allocated,
    bound_pod,
    device_object,
    fg_node,
    fg_pod,
    finegrained_conf,
    gpu,
    minors,
)

CORE, MEM, RATIO = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory", \
    "koordinator.sh/gpu-memory-ratio"


def two_gpu_node(name: str = "n1", **kwargs: object) -> list[dict[str, object]]:
    return [fg_node(name, gpus=2), device_object(name, [gpu(0, **kwargs), gpu(1, **kwargs)])]


def test_fractional_pod_gets_filled_annotation_with_id_and_minors() -> None:
    run = simulate([*two_gpu_node(), fg_pod("p", gpu_core=50, gpu_memory_ratio=25)],
                   conf=finegrained_conf())
    assert run.node_of("p") == "n1"
    assert allocated(run, "p") == {"gpu": [{
        "minor": 0, "id": "GPU-0000",
        "resources": {CORE: "50", MEM: "4Gi", RATIO: "25"}}]}
    annotations = run.pod("p")["metadata"]["annotations"]
    assert annotations["scheduling.koordinator.sh/gpu-minors"] == "0"


def test_byte_request_fills_the_ratio_of_the_chosen_card() -> None:
    run = simulate([*two_gpu_node(), fg_pod("p", gpu_memory="6Gi")], conf=finegrained_conf())
    assert allocated(run, "p")["gpu"][0]["resources"] == {MEM: "6Gi", RATIO: "37"}


@pytest.mark.parametrize(("scoring", "expected"), [
    pytest.param("LeastAllocated", 1, id="least-allocated-spreads"),
    pytest.param("MostAllocated", 0, id="most-allocated-packs"),
])
def test_scoring_strategy_chooses_the_card(scoring: str, expected: int) -> None:
    held = bound_pod("old", node="n1", allocation={"gpu": [
        {"minor": 0, "resources": {CORE: "50", RATIO: "50", MEM: "8Gi"}}]},
        gpu_core=50, gpu_memory_ratio=50)
    run = simulate([*two_gpu_node(), held, fg_pod("new", gpu_core=20, gpu_memory_ratio=20)],
                   conf=finegrained_conf(scoring=scoring))
    assert minors(run, "new") == [expected]


def test_whole_gpus_take_untouched_cards_only() -> None:
    held = bound_pod("old", node="n1", allocation={"gpu": [
        {"minor": 1, "resources": {CORE: "10", RATIO: "10", MEM: "1Gi"}}]})
    objs = [fg_node("n1", gpus=4), device_object("n1", [gpu(m) for m in range(4)]), held,
            fg_pod("whole", nvidia=2)]
    run = simulate(objs, conf=finegrained_conf())
    assert sorted(minors(run, "whole")) == [0, 2]
    entry = allocated(run, "whole")["gpu"][0]
    assert entry["resources"] == {CORE: "100", MEM: "16Gi", RATIO: "100"}


def test_memory_is_always_checked_in_bytes_so_mixed_tenants_cannot_overbook() -> None:
    """Koordinator books ratio 49 for 7.9 GiB of a 16 GiB card and then lets a ratio-51 pod in
    (16.06 GiB booked); checking bytes refuses it, while ratio 50 (8 GiB) still fits."""
    objs = [fg_node("n1", gpus=1), device_object("n1", [gpu(0)]),
            bound_pod("bytes", node="n1", allocation={"gpu": [
                {"minor": 0, "resources": {MEM: str(int(7.9 * GIB)), RATIO: "49"}}]})]
    refused = simulate([*objs, fg_pod("ratio51", gpu_memory_ratio=51)], conf=finegrained_conf())
    assert refused.node_of("ratio51") is None
    assert "insufficient gpu devices" in refused.reason("ratio51").lower()
    fits = simulate([*objs, fg_pod("ratio49", gpu_memory_ratio=49)], conf=finegrained_conf())
    assert fits.node_of("ratio49") == "n1"


def test_node_without_device_object_is_left_to_kubelet() -> None:
    run = simulate([fg_node("plain", gpus=2), fg_pod("p", gpu_core=50, gpu_memory_ratio=50)],
                   conf=finegrained_conf())
    assert run.node_of("p") == "plain"
    assert ALLOCATED not in run.pod("p")["metadata"]["annotations"]


def test_unhealthy_devices_offer_nothing() -> None:
    objs = [fg_node("n1", gpus=2), device_object("n1", [gpu(0, healthy=False), gpu(1)]),
            fg_pod("a", nvidia=1), fg_pod("b", nvidia=1)]
    run = simulate(objs, conf=finegrained_conf())
    placed = [name for name in "ab" if run.node_of(name)]
    assert len(placed) == 1 and minors(run, placed[0]) == [1]


def test_kubelet_checkpoint_gpus_count_as_used() -> None:
    checkpoint = json.dumps([{"podUID": "uid-x", "containerName": "c",
                              "resourceName": "nvidia.com/gpu", "deviceIDs": ["GPU-0000"]}])
    objs = [fg_node("n1", gpus=2), device_object("n1", [gpu(0), gpu(1)], annotations={
        "node.koordinator.sh/gpu-checkpoints": checkpoint}), fg_pod("p", nvidia=1),
        fg_pod("q", nvidia=1)]
    run = simulate(objs, conf=finegrained_conf())
    assert [minors(run, n) for n in "pq" if run.node_of(n)] == [[1]]


def test_invalid_request_is_unresolvable_with_the_rule() -> None:
    run = simulate([*two_gpu_node(), fg_pod("bad", gpu_core=50)], conf=finegrained_conf())
    assert run.node_of("bad") is None
    assert "koordinator.sh/gpu-core without" in run.reason("bad")


def test_nodes_short_of_devices_are_rejected_by_the_vector_filter_with_reason() -> None:
    objs = [fg_node("small", gpus=8), device_object("small", [gpu(0), gpu(1)]),
            fg_pod("big", nvidia=4)]
    run = simulate(objs, conf=finegrained_conf())
    assert run.node_of("big") is None
    assert "Insufficient gpu devices" in run.reason("big")


def test_gang_rollback_returns_every_dimension() -> None:
    """A gang that cannot be placed whole is discarded (Statement rollback); the GPU it was
    given in the session goes to the next pod."""
    objs = [fg_node("n1", gpus=1), device_object("n1", [gpu(0)]),
            *gang("g", 2, limits={CORE: "60", RATIO: "60"}),
            fg_pod("single", gpu_core=100, gpu_memory_ratio=100)]
    run = simulate(objs, conf=finegrained_conf())
    assert run.node_of("single") == "n1"
    assert minors(run, "single") == [0]
    assert not any(run.node_of(f"g-task-{i}") for i in range(2))


def test_legacy_names_on_pods_and_devices() -> None:
    device = gpu(0)
    device["resources"] = {"kubernetes.io/gpu-core": "100", "kubernetes.io/gpu-memory": "16Gi",
                           "kubernetes.io/gpu-memory-ratio": "100"}
    objs = [fg_node("n1", gpus=1), device_object("n1", [device]),
            fg_pod("p", legacy_gpu_core=40, legacy_gpu_memory_ratio=40)]
    run = simulate(objs, conf=finegrained_conf())
    assert allocated(run, "p")["gpu"][0]["resources"] == {
        CORE: "40", MEM: str(40 * 16 * GIB // 100), RATIO: "40"}


def _cache() -> SchedulerCache:
    support = device_support(conf_of(finegrained_conf()))

    class _Writer:  # the cache never writes in these tests
        pass

    return SchedulerCache(writer=_Writer(), clock=lambda: 0.0,  # type: ignore[arg-type]
                          **support.cache_options())


def test_device_object_after_node_and_vanished_minors_stay_charged() -> None:
    """``lahar run`` may see the Node before its Device object; a pod that holds a minor the
    Device object dropped keeps it charged, so the card is not handed out when it returns."""
    cache = _cache()
    cache.apply("ADDED", "Node", make_node("n1", cpu="8"))
    holder = bound_pod("old", node="n1", allocation={"gpu": [
        {"minor": 1, "resources": {CORE: "100", RATIO: "100", MEM: "16Gi"}}]}, nvidia=1)
    holder["metadata"]["uid"] = "u-old"
    cache.apply("ADDED", "Pod", holder)
    assert cache.nodes["n1"].others["FineGrained"].ledger is None
    cache.apply("ADDED", "Device", device_object("n1", [gpu(0)]))
    ledger = cache.nodes["n1"].others["FineGrained"].ledger
    assert ledger is not None and ledger.used[("gpu", 1)][CORE] == 100
    cache.apply("MODIFIED", "Device", device_object("n1", [gpu(0), gpu(1)]))
    ledger = cache.nodes["n1"].others["FineGrained"].ledger
    assert ledger.free("gpu", 1) == {CORE: 0, RATIO: 0, MEM: 0}
    assert ledger.free("gpu", 0)[CORE] == 100


def test_broken_device_entries_are_reported_and_skipped() -> None:
    bad = gpu(1)
    del bad["minor"]
    objs = [fg_node("n1", gpus=2), device_object("n1", [gpu(0), bad]), fg_pod("p", nvidia=1)]
    run = simulate(objs, conf=finegrained_conf())
    assert minors(run, "p") == [0]
    messages = [e["message"] for e in run.events("InvalidDevice")]
    assert any("spec.devices[1]: field minor" in m for m in messages)


def test_deleted_device_object_keeps_usage_and_offers_nothing() -> None:
    """Koordinator invalidates a deleted Device (all devices unhealthy, usage kept, #1186)
    instead of dropping it, so a recreated object cannot double-allocate."""
    cache = _cache()
    cache.apply("ADDED", "Node", make_node("n1", cpu="8"))
    cache.apply("ADDED", "Device", device_object("n1", [gpu(0), gpu(1)]))
    holder = bound_pod("old", node="n1", allocation={"gpu": [
        {"minor": 1, "resources": {CORE: "100", RATIO: "100", MEM: "16Gi"}}]}, nvidia=1)
    holder["metadata"]["uid"] = "u-old"
    cache.apply("ADDED", "Pod", holder)
    cache.apply("DELETED", "Device", device_object("n1", []))
    ledger = cache.nodes["n1"].others["FineGrained"].ledger
    assert ledger is not None
    assert ledger.free("gpu", 0) == {} and ledger.used[("gpu", 1)][CORE] == 100
    cache.apply("ADDED", "Device", device_object("n1", [gpu(0), gpu(1)]))
    ledger = cache.nodes["n1"].others["FineGrained"].ledger
    assert ledger.free("gpu", 1)[CORE] == 0 and ledger.free("gpu", 0)[CORE] == 100


def test_shared_gpu_with_an_isolation_provider_needs_a_node_with_the_same_label() -> None:
    """Koordinator's Filter: a shared-GPU pod labelled
    ``koordinator.sh/gpu-isolation-provider`` only fits nodes with the same label value (also
    nodes without a Device object); whole GPUs are not concerned."""
    label = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}
    hami = fg_node("hami", gpus=2)
    hami["metadata"]["labels"] = dict(label)
    objs = [fg_node("plain", gpus=2), device_object("plain", [gpu(0), gpu(1)]), hami,
            device_object("hami", [gpu(0), gpu(1)])]
    shared = fg_pod("shared", gpu_core=20, gpu_memory_ratio=20)
    shared["metadata"]["labels"] = dict(label)
    whole = fg_pod("whole", nvidia=2)
    whole["metadata"]["labels"] = dict(label)
    run = simulate([*objs, shared], conf=finegrained_conf())
    assert run.node_of("shared") == "hami"
    other = dict(shared, metadata={**shared["metadata"], "labels": {
        "koordinator.sh/gpu-isolation-provider": "other"}})
    refused = simulate([*objs, other], conf=finegrained_conf())
    assert "GPUIsolationProviderHAMICore not found on the node" in refused.reason("shared")
    assert simulate([objs[0], objs[1], whole], conf=finegrained_conf()).node_of("whole") \
        == "plain"


def test_share_unsupported_models_refuse_shared_gpus_only() -> None:
    """Koordinator's ``GPUShareUnsupportedModels``: nodes whose GPU vendor/model labels are
    listed take whole GPUs but never a shared one."""
    conf = finegrained_conf(FineGrainedShareUnsupportedModels=[
        {"vendor": "nvidia", "model": "T4"}])
    t4 = fg_node("t4", gpus=2)
    t4["metadata"]["labels"] = {"node.koordinator.sh/gpu-vendor": "nvidia",
                                "node.koordinator.sh/gpu-model": "T4"}
    objs = [t4, device_object("t4", [gpu(0), gpu(1)])]
    shared = simulate([*objs, fg_pod("p", gpu_core=50, gpu_memory_ratio=50)], conf=conf)
    assert shared.node_of("p") is None
    assert "does not support sharing" in shared.reason("p")
    whole = simulate([*objs, fg_pod("p", nvidia=1)], conf=conf)
    assert whole.node_of("p") == "t4"
