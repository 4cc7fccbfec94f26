"""vGPU through the embedded cluster: fitting rules, selection annotations, wire formats."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import EPOCH
from scheduler.cluster.simulation import build_simulation
from tests.builders import conf_of, gang, make_node, make_pod, simulate
from tests.devices.conftest import (
    card,
    devices_of,
    deviceshare_conf,
    vgpu_conf,
    vgpu_node,
    vgpu_pod,
)

Obj = dict[str, Any]


def uuids(run: Any, name: str) -> list[str]:
    return [uuid for container in devices_of(run.pod(name)) for uuid, _, _ in container]


def placed(run: Any, *names: str) -> list[str]:
    return [name for name in names if run.node_of(name)]


def test_binding_annotations_have_the_exact_volcano_encoding() -> None:
    objs = [vgpu_node("n1", [card("GPU-0", memory=16000)]),
            make_pod("p", limits={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000",
                                  "volcano.sh/vgpu-cores": "20"})]
    objs[1]["spec"]["containers"].append(
        {"name": "side", "image": "busybox",
         "resources": {"limits": {"volcano.sh/vgpu-number": "1",
                                  "volcano.sh/vgpu-memory-percentage": "25"}}})
    objs[1]["spec"]["containers"].append({"name": "plain", "image": "busybox"})
    written: list[dict[str, str]] = []
    cluster, cache, scheduler = build_simulation(
        [Manifest(f"t#{i}", o) for i, o in enumerate(objs)], conf=conf_of(vgpu_conf()))
    cache.pre_bind_hooks.append(lambda task: written.append(dict(task.bind_annotations)))
    scheduler.run_once()
    cache.flush()
    seconds = str(int(EPOCH))
    assert written == [{
        "volcano.sh/vgpu-node": "n1",
        "volcano.sh/vgpu-time": seconds,
        "volcano.sh/vgpu-ids-new": "GPU-0,NVIDIA,3000,20:;GPU-0,NVIDIA,4000,0:;",
        "volcano.sh/devices-to-allocate": "GPU-0,NVIDIA,3000,20:;GPU-0,NVIDIA,4000,0:;",
        "volcano.sh/bind-phase": "allocating",
        "volcano.sh/bind-time": seconds,
    }]
    assert cluster.objects["Pod"]["default/p"]["spec"]["nodeName"] == "n1"


def test_split_count_limits_sharers_per_card() -> None:
    pods = [vgpu_pod(f"p{i}", memory=1000) for i in range(3)]
    # the node advertises more slots than the card's split count: the card's count rules
    run = simulate([vgpu_node("n1", [card("GPU-0", split=2)], slots=10), *pods],
                   conf=vgpu_conf())
    waiting = [name for name in ("p0", "p1", "p2") if not run.node_of(name)]
    assert len(waiting) == 1
    assert run.reason(waiting[0]) == (
        "0/1 nodes are unavailable: 1 hami-vgpuDeviceSharing error: node(s) had fewer than 1 "
        "shareable vGPU card(s).")


def test_memory_of_a_card_is_never_overcommitted() -> None:
    run = simulate([vgpu_node("n1", [card("GPU-0", memory=10000)]),
                    vgpu_pod("a", memory=6000), vgpu_pod("b", memory=6000)], conf=vgpu_conf())
    assert len(placed(run, "a", "b")) == 1
    waiting = "b" if run.node_of("a") else "a"
    assert "no vGPU card of the node has 6000 MiB free" in run.reason(waiting)


def test_percentage_and_whole_card_memory() -> None:
    run = simulate([vgpu_node("n1", [card("GPU-0", memory=10000)]),
                    vgpu_pod("half", percentage=50), vgpu_pod("rest", number=1)],
                   conf=vgpu_conf())
    assert devices_of(run.pod("half")) == [[("GPU-0", 5000, 0)]]
    assert run.node_of("rest") is None  # a bare vgpu-number wants the whole card's memory
    assert "insufficient memory" in run.reason("rest")


def test_cores_add_up_to_at_most_100() -> None:
    run = simulate([vgpu_node("n1", [card("GPU-0")]),
                    vgpu_pod("a", memory=1000, cores=60), vgpu_pod("b", memory=1000, cores=60)],
                   conf=vgpu_conf())
    assert len(placed(run, "a", "b")) == 1
    waiting = "b" if run.node_of("a") else "a"
    assert "insufficient cores" in run.reason(waiting)


def test_exclusive_card_needs_an_unshared_card() -> None:
    objs = [vgpu_node("n1", [card("GPU-0"), card("GPU-1")]),
            vgpu_pod("small", memory=1000, cores=10),
            vgpu_pod("solo", memory=1000, cores=100),
            vgpu_pod("solo2", memory=1000, cores=100)]
    run = simulate(objs, conf=vgpu_conf())
    assert run.node_of("small") == "n1"
    assert len(placed(run, "solo", "solo2")) == 1
    winner = placed(run, "solo", "solo2")[0]
    assert uuids(run, winner) != uuids(run, "small")
    loser = "solo2" if winner == "solo" else "solo"
    reason = run.reason(loser)
    assert "exclusive use impossible on a shared card" in reason or "insufficient cores" in reason


def test_a_card_at_full_cores_takes_no_more_sharers() -> None:
    run = simulate([vgpu_node("n1", [card("GPU-0")]), vgpu_pod("all", memory=1000, cores=100),
                    vgpu_pod("none", memory=1000, cores=0)], conf=vgpu_conf())
    assert len(placed(run, "all", "none")) == 1


@pytest.mark.parametrize(
    ("cores", "words"),
    [pytest.param("150", "must be at most 100", id="cores-above-100"),
     pytest.param("0.5", "must be a whole number", id="fraction-cores"),
     pytest.param("-10", "is negative", id="negative-cores")],
)
def test_bad_cores_request_is_unschedulable_with_reason(cores: str, words: str) -> None:
    run = simulate([vgpu_node("n1", [card("GPU-0")]), vgpu_pod("bad", memory=1000, cores=cores)],
                   conf=vgpu_conf())
    assert run.node_of("bad") is None
    assert words in run.reason("bad")
    assert run.reason("bad").startswith("0/1 nodes are unavailable: pod default/bad")


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({"nvidia.com/use-gputype": "t4"}, "GPU-T4", id="use-type-case-insensitive"),
        pytest.param({"nvidia.com/nouse-gputype": "A100"}, "GPU-T4", id="nouse-type"),
        pytest.param({"volcano.sh/vgpu-use-gpuuuid": "GPU-A100"}, "GPU-A100", id="use-uuid"),
        pytest.param({"volcano.sh/vgpu-nouse-gpuuuid": "GPU-A100"}, "GPU-T4", id="nouse-uuid"),
    ],
)
def test_card_selection_annotations(annotations: dict[str, str], expected: str) -> None:
    node = vgpu_node("n1", [card("GPU-A100", kind="NVIDIA-A100"),
                            card("GPU-T4", kind="Tesla-T4", mode="mig")])
    run = simulate([node, vgpu_pod("p", memory=1000, annotations=annotations)],
                   conf=vgpu_conf())
    assert uuids(run, "p") == [expected]


def test_selection_that_excludes_every_card_says_why() -> None:
    node = vgpu_node("n1", [card("GPU-A100")])
    run = simulate([node, vgpu_pod("p", memory=1000,
                                   annotations={"nvidia.com/use-gputype": "H100"})],
                   conf=vgpu_conf())
    assert run.node_of("p") is None
    assert "1 type not allowed" in run.reason("p")


@pytest.mark.parametrize(("policy", "same_card"), [("binpack", True), ("spread", False)])
def test_card_order_follows_the_policy(policy: str, same_card: bool) -> None:
    run = simulate([vgpu_node("n1", [card("GPU-0"), card("GPU-1")]),
                    vgpu_pod("a", memory=1000), vgpu_pod("b", memory=1000)],
                   conf=vgpu_conf(policy=policy))
    assert (uuids(run, "a") == uuids(run, "b")) is same_card


@pytest.mark.parametrize(("spread", "same_card"), [(True, False), (False, True)])
def test_podgroup_spread_policy_keeps_members_on_different_cards(spread: bool,
                                                                 same_card: bool) -> None:
    annotations = {"volcano.sh/vgpu-podgroup-policy": "spread"} if spread else {}
    members = gang("job", 2, limits={"volcano.sh/vgpu-number": "1",
                                     "volcano.sh/vgpu-memory": "1000"}, annotations=annotations)
    run = simulate([vgpu_node("n1", [card("GPU-0"), card("GPU-1")]), *members],
                   conf=vgpu_conf(policy="binpack"))
    assert (uuids(run, "job-task-0") == uuids(run, "job-task-1")) is same_card


def test_podgroup_spread_with_one_card_places_one_member() -> None:
    members = gang("job", 2, min_member=1, limits={"volcano.sh/vgpu-number": "1",
                                                   "volcano.sh/vgpu-memory": "1000"},
                   annotations={"volcano.sh/vgpu-podgroup-policy": "spread"})
    run = simulate([vgpu_node("n1", [card("GPU-0")]), *members], conf=vgpu_conf())
    assert len(placed(run, "job-task-0", "job-task-1")) == 1


def test_multi_vgpu_request_uses_distinct_cards() -> None:
    run = simulate([vgpu_node("n1", [card("GPU-0"), card("GPU-1"), card("GPU-2")]),
                    vgpu_pod("p", number=2, memory=1000)], conf=vgpu_conf())
    assert len(set(uuids(run, "p"))) == 2


def test_malformed_register_means_no_vgpu_and_a_warning_naming_the_node() -> None:
    objs = [vgpu_node("broken", text="GPU-0,ten,16000,NVIDIA-A100,true,hami-core:"),
            vgpu_pod("p", memory=1000)]
    run = simulate(objs, conf=vgpu_conf())
    assert run.node_of("p") is None
    assert "node(s) had no registered vGPU card" in run.reason("p")
    warnings = run.events("InvalidDeviceRegistration")
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
    assert warnings[0]["involvedObject"] == {"apiVersion": "v1", "kind": "Node",
                                             "name": "broken", "namespace": "", "uid": ""}
    assert "node broken" in warnings[0]["message"]


def test_duplicate_uuids_count_once() -> None:
    node = vgpu_node("n1", text="GPU-0,1,16000,NVIDIA-A100,true,hami-core:"
                                "GPU-0,1,16000,NVIDIA-A100,true,hami-core:")
    run = simulate([node, vgpu_pod("a", memory=1000), vgpu_pod("b", memory=1000)],
                   conf=vgpu_conf())
    assert len(placed(run, "a", "b")) == 1
    warnings = run.events("InvalidDeviceRegistration")
    assert any("GPU-0" in w["message"] and "more than once" in w["message"] for w in warnings)


@pytest.mark.parametrize(("legacy", "fits"), [(False, False), (True, True)])
def test_five_field_register_needs_the_legacy_opt_in(legacy: bool, fits: bool) -> None:
    """Volcano's ``decodeNodeDevices`` (pkg/scheduler/api/devices/nvidia/vgpu/utils.go:63-67)
    gives a node no vGPU when an entry has fewer than six fields; Lahar does the same and
    names the node, and ``deviceshare.VGPURegisterLegacyFields`` reads older plugins' five."""
    node = vgpu_node("n1", text="GPU-0,4,16000,NVIDIA-A100,true:")
    conf = deviceshare_conf(VGPUEnable=True, VGPURegisterLegacyFields=legacy)
    run = simulate([node, vgpu_pod("p", memory=1000)], conf=conf)
    assert bool(run.node_of("p")) is fits
    if fits:
        assert uuids(run, "p") == ["GPU-0"]
    else:
        assert "needs 6" in run.events("InvalidDeviceRegistration")[0]["message"]


@pytest.mark.parametrize(
    ("last_mode", "pod_mode", "fits"),
    [
        pytest.param("hami-core", "mig", False, id="mig-card-on-a-hami-core-node"),
        pytest.param("mig", "hami-core", True, id="mig-without-geometry-is-hami-core"),
        pytest.param("mps", "mps", False, id="mps-node-counts-as-hami-core"),
        pytest.param("mps", "hami-core", True, id="hami-core-pod-on-an-mps-node"),
    ],
)
def test_vgpu_mode_is_compared_with_the_node_mode(last_mode: str, pod_mode: str,
                                                    fits: bool) -> None:
    """Volcano compares ``volcano.sh/vgpu-mode`` once per node
    (``checkNodeGPUSharingPredicateAndScore``, vgpu/utils.go:386-391) with the mode
    ``decodeNodeDevices`` gives the node: its last entry's, ``mig`` only where the device
    ConfigMap knows the card's geometry, every other mode ``hami-core`` (utils.go:86-98,
    ``getSharingMode`` utils.go:369-376). Before, Lahar matched the mode card by card."""
    node = vgpu_node("n1", [card("GPU-0", mode="mig"), card("GPU-1", mode=last_mode)])
    run = simulate([node, vgpu_pod("p", memory=1000, annotations={"volcano.sh/vgpu-mode":
                                                                   pod_mode})],
                   conf=vgpu_conf())
    assert bool(run.node_of("p")) is fits
    if not fits:
        assert (f"pod required sharing mode {pod_mode} is not the same as the node mode "
                f"hami-core") in run.reason("p")


def test_node_lock_lets_consecutive_vgpu_pods_all_land_on_one_node() -> None:
    pods = [vgpu_pod(f"p{i}", memory=1000) for i in range(3)]
    run = simulate([vgpu_node("n1", [card("GPU-0")]), *pods], conf=vgpu_conf(lock=True))
    assert placed(run, "p0", "p1", "p2") == ["p0", "p1", "p2"]
    for i in range(3):
        assert run.pod(f"p{i}")["metadata"]["annotations"]["volcano.sh/bind-phase"] == "success"
    assert "hamivgpu" not in run.cluster.objects["Node"]["n1"]["metadata"]["annotations"]


def hami_node(name: str) -> Obj:
    devices = [{"id": "GPU-h0", "index": 0, "count": 10, "devmem": 24000, "devcore": 100,
                "type": "NVIDIA-L4", "health": True, "mode": "hami-core"}]
    return make_node(name, cpu="32", memory="128Gi", extra={"nvidia.com/gpu": "10"},
                     annotations={"hami.io/node-nvidia-register": json.dumps(devices)})


def test_hami_profile_reads_and_writes_hami_names() -> None:
    pod = make_pod("p", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000",
                                "nvidia.com/gpucores": "30"})
    written: list[dict[str, str]] = []
    locks: list[str] = []
    cluster, cache, scheduler = build_simulation(
        [Manifest("n", hami_node("n1")), Manifest("p", pod)],
        conf=conf_of(vgpu_conf(profile="hami", lock=True)))
    cache.pre_bind_hooks.append(lambda task: written.append(dict(task.bind_annotations)))
    cache.pre_bind_hooks.append(lambda task: locks.append(
        cluster.objects["Node"]["n1"]["metadata"]["annotations"].get("hami.io/mutex.lock", "")))
    scheduler.run_once()
    cache.flush()
    seconds = str(int(EPOCH))
    assert written == [{
        "hami.io/vgpu-node": "n1", "hami.io/vgpu-time": seconds,
        "hami.io/vgpu-devices-allocated": "GPU-h0,NVIDIA,3000,30:;",
        "hami.io/vgpu-devices-to-allocate": "GPU-h0,NVIDIA,3000,30:;",
        "hami.io/bind-phase": "allocating", "hami.io/bind-time": seconds}]
    assert locks == ["2026-01-01T00:00:00Z,default,p"]
    assert cluster.objects["Pod"]["default/p"]["spec"]["nodeName"] == "n1"
    assert "hami.io/mutex.lock" not in cluster.objects["Node"]["n1"]["metadata"]["annotations"]


@pytest.mark.parametrize(("pod_mode", "expected"),
                         [("mps", "GPU-h1"), ("hami-core,mps", "GPU-h0")])
def test_hami_profile_matches_the_mode_card_by_card(pod_mode: str, expected: str) -> None:
    """HAMi's ``checkType`` (pkg/device/nvidia/device.go:493-497) keeps a card whose mode the
    pod's ``nvidia.com/vgpu-mode`` contains, card by card (no node mode in HAMi)."""
    devices = [{"id": f"GPU-h{i}", "index": i, "count": 10, "devmem": 24000, "devcore": 100,
                "type": "NVIDIA-L4", "health": True, "mode": mode}
               for i, mode in enumerate(("hami-core", "mps"))]
    node = make_node("n1", cpu="32", memory="128Gi", extra={"nvidia.com/gpu": "20"},
                     annotations={"hami.io/node-nvidia-register": json.dumps(devices)})
    pod = make_pod("p", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"},
                   annotations={"nvidia.com/vgpu-mode": pod_mode})
    run = simulate([node, pod], conf=vgpu_conf(profile="hami", policy="spread"))
    held = devices_of(run.pod("p"), "hami.io/vgpu-devices-allocated")
    assert [uuid for container in held for uuid, _, _ in container] == [expected]
