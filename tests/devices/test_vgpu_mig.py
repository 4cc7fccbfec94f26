"""vGPU MIG instances from Volcano's device ConfigMap.

Unit cases ported from ``pkg/scheduler/api/devices/nvidia/vgpu/mig_test.go`` (cited per
test); the behaviour is ``mig.go`` (``MIGFactory``, ``findMatch``, ``pickFromGroup``,
``addMigUsed``/``subMigUsed``) and ``decodeNodeDevices`` in ``utils.go``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.task import TaskInfo, task_from_pod
from scheduler.commands.cli import main
from scheduler.devices.codec import RegisteredCard
from scheduler.devices.mig import (
    Geometry,
    MigTemplate,
    MigUsage,
    add_used,
    decode_mig_id,
    find_match,
    parse_device_config,
    sub_used,
)
from scheduler.devices.names import VOLCANO
from scheduler.devices.vgpu import VGpuCard, VGpuDevices
from tests.builders import make_pod, simulate
from tests.devices.conftest import card, deviceshare_conf, vgpu_node, vgpu_pod

Obj = dict[str, Any]
T = MigTemplate


# -- findMatch (mig_test.go:25 TestFindMatch) ------------------------------------------------
@pytest.mark.parametrize(("uuid", "request_mem", "usage", "geometries", "expected"), [
    pytest.param("gpu-1234", 10, MigUsage(0, {"1g.10gb": []}),
                 [Geometry("default", (T("1g.10gb", 10240, 2),))],
                 ("gpu-1234[default-0]", 10240), id="match-1g.10gb-available"),      # :37
    pytest.param("gpu-1234", 20000, MigUsage(0, {"1g.10gb": []}),
                 [Geometry("default", (T("1g.10gb", 10, 1),))],
                 None, id="memory-too-high"),                                        # :68
    pytest.param("gpu-1234", 10, MigUsage(0, {}), [Geometry("")],
                 None, id="empty-geometry"),                                         # :99
    pytest.param("gpu-0002", 20, MigUsage(0, {"1g.10gb": []}),
                 [Geometry("default", (T("2g.20gb", 20, 1),))],
                 None, id="no-matching-template-in-a-used-geometry"),                # :114
    pytest.param("gpu-1234", 10, MigUsage(0, {"1g.10gb": [0]}),
                 [Geometry("default", (T("1g.10gb", 10, 1),))],
                 None, id="instance-already-in-use"),                                # :145
    pytest.param("gpu-1234", 20, MigUsage(-1, {}),
                 [Geometry("group1", (T("1g.10gb", 10, 1),)),
                  Geometry("group2", (T("2g.20gb", 24, 1),))],
                 ("gpu-1234[group2-0]", 24), id="first-geometry-that-fits"),         # :176
    pytest.param("gpu-0005", 5, MigUsage(0, {"1g.10gb": []}),
                 [Geometry("default", (T("1g.10gb", 10, 1),))],
                 ("gpu-0005[default-0]", 10), id="smaller-request-still-matches"),   # :210
])
def test_find_match(uuid: str, request_mem: int, usage: MigUsage, geometries: list[Geometry],
                    expected: tuple[str, int] | None) -> None:
    """mig_test.go:25 TestFindMatch (mig.go findMatch/pickFromGroup); line per case."""
    assert find_match(uuid, request_mem, usage, geometries) == expected


# -- addMigUsed / subMigUsed (mig_test.go:255 TestAddAndSubMigUsed) ------------------------------
@pytest.mark.parametrize(("geometry", "group", "position", "memory", "slot"), [
    pytest.param(Geometry("group-a", (T("1g.10gb", 10240, 2),)), "group-a", 1, 10240,
                 ("1g.10gb", 1), id="add-then-sub"),                                 # :268
    pytest.param(Geometry("group-b", (T("2g.20gb", 20480, 3),)), "group-b", 1, 20480,
                 ("2g.20gb", 1), id="add-twice-same-instance-then-sub"),             # :290
    pytest.param(Geometry("group-c", (T("3g.30gb", 30720, 1),)), "group-c", 0, 30720,
                 ("3g.30gb", 0), id="single-slot"),                                  # :312
    pytest.param(Geometry("group-d", (T("1g.10gb", 10240, 1),)), "nonexistent-group", 0, 0,
                 None, id="unknown-group-returns-0"),                                # :334
])
def test_add_and_sub_used(geometry: Geometry, group: str, position: int, memory: int,
                          slot: tuple[str, int] | None) -> None:
    """mig_test.go:255 TestAddAndSubMigUsed (mig.go addMigUsed/subMigUsed)."""
    usage = MigUsage()
    assert add_used(usage, [geometry], group, position) == memory
    if slot is not None:
        assert slot[1] in usage.used[slot[0]]
    assert sub_used(usage, [geometry], group, position) == memory
    assert usage.used == {}


# -- MIGFactory with gpuMemoryFactor (mig_test.go:395, :520, :657) ------------------------------
GROUP1 = (Geometry("group1", (T("1g.10gb", 10240, 2), T("2g.20gb", 20480, 1))),)


def mig_ledger(factor: int) -> VGpuDevices:
    info = RegisteredCard(uuid="gpu-1234", index=0, split=10, memory=40960,
                          type="NVIDIA A100-SXM4-40GB", mode="mig")
    return VGpuDevices(node_name="n1", cards=[VGpuCard(info, templates=GROUP1)], names=VOLCANO,
                       mig_mode=True, exclusive_mode=False, memory_factor=factor)


def task(name: str) -> TaskInfo:
    return task_from_pod(make_pod(name))


@pytest.mark.parametrize(("factor", "request_mem", "device_id", "charged"), [
    pytest.param(1, 10, "gpu-1234[group1-0]", 10240, id="factor-1-10MB-takes-1g.10gb"),  # :412
    pytest.param(2, 6144, "gpu-1234[group1-2]", 10240, id="factor-2-6GB-takes-2g.20gb"),  # :432
])
def test_try_add_pod_with_memory_factor(factor: int, request_mem: int, device_id: str,
                                        charged: int) -> None:
    """mig_test.go:395 TestMIGFactory_TryAddPod_WithMemoryFactor: the request is multiplied
    by the factor before matching, the instance's memory divided by it when charged; the
    instance itself is not marked used by a fit."""
    ledger = mig_ledger(factor)
    card = ledger.cards[0]
    assert ledger._mig_fit(card, request_mem) == (device_id, charged)
    assert card.mig.used == {}


@pytest.mark.parametrize(("factor", "charged"), [
    pytest.param(1, 10240, id="factor-1"),                                           # :542
    pytest.param(2, 5120, id="factor-2"),                                            # :567
])
def test_add_and_sub_pod_with_memory_factor(factor: int, charged: int) -> None:
    """mig_test.go:520 TestMIGFactory_AddPod_WithMemoryFactor and :657
    TestMIGFactory_SubPod_WithMemoryFactor: a pod holding gpu-1234[group1-0] charges the
    1g.10gb instance's 10240 MiB divided by the factor, and leaving frees all of it."""
    ledger = mig_ledger(factor)
    card = ledger.cards[0]
    pod = task("pod-1")
    ledger._charge(pod, (("gpu-1234[group1-0]", 10, 50, ""),))
    assert (card.used_num, card.used_mem, card.used_cores) == (1, charged, 50)
    assert card.mig.used == {"1g.10gb": [0]} and card.mig.index == 0
    # AddQueueResource counts the 10 MiB the device list records (device_info.go)
    assert ledger.queue_resources(pod)["volcano.sh/vgpu-memory"] == 10_000.0
    ledger.sub_task(pod)
    assert (card.used_num, card.used_mem, card.used_cores) == (0, 0, 0)
    assert card.mig.used == {}


def test_decode_needs_exactly_one_dash_in_brackets() -> None:
    """mig.go decodeMIGID: the bracket content splits on '-' into exactly two parts."""
    assert decode_mig_id("GPU-0[group2-3]") == ("group2", 3)
    assert decode_mig_id("GPU-0[group-a-1]") is None
    assert decode_mig_id("GPU-0") is None


# -- through the scheduler ---------------------------------------------------------------------
A100 = "NVIDIA A100-SXM4-40GB"
DEVICE_CONFIG = {"nvidia": {"knownMigGeometries": [{
    "models": ["A100-SXM4-40GB"],
    "allowedGeometries": [
        {"group": "group1", "geometries": [{"name": "1g.5gb", "memory": 5120, "count": 7}]},
        {"group": "group2", "geometries": [{"name": "2g.10gb", "memory": 10240, "count": 3},
                                           {"name": "1g.5gb", "memory": 5120, "count": 1}]},
    ]}]}}


def config_map(*, name: str = "volcano-vgpu-device-config", namespace: str = "kube-system",
               config: Any = DEVICE_CONFIG) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"device-config.yaml": yaml.safe_dump(config)}}


def mig_node(name: str = "n1", *, cards: int = 1, kind: str = A100) -> Obj:
    return vgpu_node(name, [card(f"GPU-{i}", split=7, memory=40960, kind=kind, mode="mig")
                            for i in range(cards)])


def ids(run: Any, pod: str) -> str:
    return str(run.pod(pod)["metadata"]["annotations"].get("volcano.sh/vgpu-ids-new", ""))


def conf(**extra: Any) -> str:
    return deviceshare_conf(VGPUEnable=True, SchedulePolicy="binpack", ScheduleWeight=10,
                            **extra)


def test_mig_node_hands_out_instances_in_position_order() -> None:
    """findMatch on a card without instances tries group1 first (its 1g.5gb fits 4000 MiB);
    later pods fill the next positions of the same geometry (getPosition)."""
    pods = [vgpu_pod(f"p{i}", memory=4000) for i in range(3)]
    run = simulate([mig_node(), config_map(), *pods], conf=conf())
    # the simulated device plugin hands the instances out (the card UUID is registered)
    assert run.pod("p0")["metadata"]["annotations"]["volcano.sh/bind-phase"] == "success"
    assert sorted(ids(run, f"p{i}") for i in range(3)) == [
        f"GPU-0[group1-{i}],NVIDIA,4000,0:" for i in range(3)]


def test_a_request_no_template_fits_is_refused() -> None:
    """pickFromGroup finds no template of 8000 MiB in group1 and group2 offers 10240; once
    the card is fixed to group1 by a 1g.5gb pod, an 8000 MiB pod finds nothing there."""
    held = vgpu_pod("old", memory=4000, node="n1", phase="Running", annotations={
        "volcano.sh/vgpu-node": "n1", "volcano.sh/vgpu-ids-new": "GPU-0[group1-0],NVIDIA,4000,0:"})
    run = simulate([mig_node(), config_map(), held, vgpu_pod("big", memory=8000)], conf=conf())
    assert run.node_of("big") is None
    assert "no MIG instance fits" in run.reason("big")
    fresh = simulate([mig_node(), config_map(), vgpu_pod("big", memory=8000)], conf=conf())
    assert ids(fresh, "big") == "GPU-0[group2-0],NVIDIA,8000,0:"


def test_a_bound_instance_is_skipped_and_charged_at_its_size() -> None:
    """AddResource → MIGFactory.AddPod: a bound pod's instance is marked used (the next pod
    takes position 1) and charges the instance's 5120 MiB, not the 1000 it asked for."""
    held = vgpu_pod("old", memory=1000, node="n1", phase="Running", annotations={
        "volcano.sh/vgpu-node": "n1", "volcano.sh/vgpu-ids-new": "GPU-0[group1-0],NVIDIA,1000,0:"})
    run = simulate([mig_node(), config_map(), held, vgpu_pod("new", memory=1000)], conf=conf())
    assert ids(run, "new") == "GPU-0[group1-1],NVIDIA,1000,0:"


def test_without_the_config_map_mig_cards_share_by_hami_core() -> None:
    """decodeNodeDevices: a mig card whose type no known geometry names falls back to
    HAMi-core, so the plain card UUID is written."""
    run = simulate([mig_node(), vgpu_pod("p", memory=4000)], conf=conf())
    assert ids(run, "p") == "GPU-0,NVIDIA,4000,0:"
    other = simulate([mig_node(kind="Tesla-T4"), config_map(), vgpu_pod("p", memory=4000)],
                     conf=conf())
    assert ids(other, "p") == "GPU-0,NVIDIA,4000,0:"


def test_memory_factor_scales_the_request() -> None:
    """mig.go TryAddPod: with gpuMemoryFactor 2 a 4000 MiB request needs 8000 of a template,
    so group1's 1g.5gb no longer fits and group2's 2g.10gb is taken."""
    config = {"nvidia": {**DEVICE_CONFIG["nvidia"], "gpuMemoryFactor": 2}}
    run = simulate([mig_node(), config_map(config=config), vgpu_pod("p", memory=4000)],
                   conf=conf())
    assert ids(run, "p") == "GPU-0[group2-0],NVIDIA,4000,0:"


def test_an_unreadable_config_map_is_reported_and_defaults_are_used() -> None:
    bad = config_map()
    bad["data"]["device-config.yaml"] = "nvidia: [unclosed"
    run = simulate([mig_node(), bad, vgpu_pod("p", memory=4000)], conf=conf())
    assert ids(run, "p") == "GPU-0,NVIDIA,4000,0:"
    with pytest.raises(ValueError, match=r"nvidia\.knownMigGeometries"):
        parse_device_config(yaml.safe_dump({"nvidia": {"knownMigGeometries": {"x": 1}}}))


def test_exclusivity_rules_do_not_act_on_a_mig_node() -> None:
    """gpuexclusive.go:445-452: only HAMi-core nodes are wrapped."""
    pods = []
    for i in range(2):
        pod = vgpu_pod(f"t{i}", memory=1000)
        pod["metadata"]["labels"] = {"app": "training"}
        pods.append(pod)
    run = simulate([mig_node(), config_map(), *pods],
                   conf=conf(GPUExclusiveRules=[{"app": "training"}]))
    assert ids(run, "t0") and ids(run, "t1")


def test_cli_simulate_reads_the_named_config_map(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``deviceshare.KnownGeometriesCMName``/``Namespace`` name the ConfigMap, which a
    ``lahar simulate`` manifest provides."""
    conf_path = tmp_path / "vgpu.conf"
    conf_path.write_text(conf(KnownGeometriesCMName="geometries",
                              KnownGeometriesCMNamespace="gpu"))
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([
        mig_node(), config_map(name="geometries", namespace="gpu"),
        make_pod("p", limits={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "4000"})]))
    assert main(["simulate", "--conf", str(conf_path), str(cluster), "-o", "yaml"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)["items"]
    pod = next(o for o in out if o["kind"] == "Pod")
    assert pod["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"] == \
        "GPU-0[group1-0],NVIDIA,4000,0:"
