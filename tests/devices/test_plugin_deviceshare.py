"""The deviceshare plugin's arguments, the legacy predicates switches, and the cache wiring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.commands.cli import main
from scheduler.conf import ConfError, load_conf, parse_conf
from scheduler.deviceconf import device_config, device_support, with_device_plugin
from tests.builders import simulate
from tests.devices.conftest import BASE_TIERS, deviceshare_conf, gpu_node, gpu_pod, vgpu_conf

ROOT = Path(__file__).resolve().parents[2]


def test_arguments_map_onto_the_device_config() -> None:
    conf = parse_conf(deviceshare_conf(VGPUEnable=True,
                                       NodeLockEnable=True, SchedulePolicy="spread",
                                       ScheduleWeight=7, VGPUProfile="hami"))
    config = device_config(conf)
    assert (config.gpu_sharing, config.gpu_number, config.vgpu, config.node_lock) == (
        False, False, True, True)
    assert (config.policy, config.weight, config.names.profile) == ("spread", 7, "hami")


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        pytest.param({"SchedulePolicy": "fifo"}, "deviceshare.SchedulePolicy", id="policy"),
        pytest.param({"VGPUProfile": "nvidia"}, "deviceshare.VGPUProfile", id="profile"),
    ],
)
def test_bad_arguments_are_conf_errors_naming_the_key(arguments: dict, key: str) -> None:
    with pytest.raises(ConfError, match=key.replace(".", r"\.")) as info:
        parse_conf(deviceshare_conf(**arguments))
    assert "deviceshare" in str(info.value)


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        pytest.param({"ScheduleWeight": "high"}, "deviceshare.ScheduleWeight", id="weight-type"),
        pytest.param({"GPUSharingEnable": "yes"}, "deviceshare.GPUSharingEnable", id="flag"),
    ],
)
def test_wrongly_typed_arguments_warn_and_keep_the_default(arguments: dict, key: str) -> None:
    """Volcano's ``deviceshare.New`` reads these with ``GetInt``/``GetBool``
    (``framework/arguments.go``): a wrong type is logged and the default kept."""
    conf = parse_conf(deviceshare_conf(**arguments))
    assert any(f"(deviceshare): argument {key!r}" in w for w in conf.warnings)

def test_legacy_predicate_switches_turn_devices_on_without_deviceshare() -> None:
    conf_text = BASE_TIERS.replace(
        "{name: predicates}",
        "{name: predicates, arguments: {predicate.GPUNumberEnable: true, "
        "predicate.NodeLockEnable: true}}")
    conf = parse_conf(conf_text)
    config = device_config(conf)
    assert config.gpu_number and config.node_lock and not config.gpu_sharing
    effective = with_device_plugin(conf)
    assert effective.plugin("deviceshare") is not None
    run = simulate([gpu_node("n1"), gpu_pod("w", number=1), gpu_pod("v", number=1)],
                   conf=conf_text)
    indices = {run.pod(name)["metadata"]["annotations"]["volcano.sh/gpu-index"]
               for name in ("w", "v")}
    assert indices == {"0", "1"}


def test_legacy_switches_add_to_deviceshare() -> None:
    conf_text = deviceshare_conf(GPUSharingEnable=True).replace(
        "{name: predicates}", "{name: predicates, arguments: {predicate.NodeLockEnable: true}}")
    config = device_config(parse_conf(conf_text))
    assert config.gpu_sharing and config.node_lock and not config.gpu_number


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        pytest.param({"GPUSharingEnable": True, "GPUNumberEnable": True},
                     "can not define true in both gpu sharing and gpu number", id="share+number"),
        pytest.param({"GPUSharingEnable": True, "VGPUEnable": True},
                     "gpu-share and vgpu can't be used together", id="share+vgpu"),
        pytest.param({"GPUNumberEnable": True, "VGPUEnable": True},
                     "gpu-share and vgpu can't be used together", id="number+vgpu"),
    ],
)
def test_switches_volcano_refuses_together_are_conf_errors(arguments: dict, words: str,
                                                            tmp_path: Path) -> None:
    """Volcano's deviceshare ``enablePredicate`` exits (klog.Fatal) on these combinations;
    here the conf is refused at load with Volcano's words and the argument names."""
    with pytest.raises(ConfError) as info:
        parse_conf(deviceshare_conf(**arguments))
    message = str(info.value)
    assert words in message and "plugin deviceshare" in message
    assert all(f"deviceshare.{key}" in message for key in arguments)
    path = tmp_path / "both.conf"
    path.write_text(deviceshare_conf(**arguments))
    assert main(["conf", "check", str(path)]) != 0


@pytest.mark.parametrize(
    ("deviceshare", "predicates", "words", "owner"),
    [
        pytest.param({}, {"GPUSharingEnable": True, "GPUNumberEnable": True},
                     "can not define true in both gpu sharing and gpu number",
                     "plugin predicates", id="legacy-share+number"),
        pytest.param({}, {"GPUNumberEnable": True, "VGPUEnable": True},
                     "gpu-share and vgpu can't be used together", "plugin predicates",
                     id="legacy-number+vgpu"),
        pytest.param({"GPUSharingEnable": True}, {"GPUNumberEnable": True},
                     "can not define true in both gpu sharing and gpu number",
                     "plugins deviceshare and predicates", id="mixed-share+number"),
        pytest.param({"VGPUEnable": True}, {"GPUSharingEnable": True},
                     "gpu-share and vgpu can't be used together",
                     "plugins deviceshare and predicates", id="mixed-vgpu+share"),
    ],
)
def test_legacy_and_mixed_spellings_of_conflicting_switches_are_conf_errors(
        deviceshare: dict, predicates: dict, words: str, owner: str) -> None:
    """Volcano v1.8.2 and before read the GPU switches in predicates' ``enablePredicate`` and
    exit (klog.Fatal) on share+number there; today's deviceshare ``enablePredicate`` does the
    same. The legacy switches add to deviceshare's, so a mix of spellings switching on two
    families is refused too, naming every key involved."""
    legacy = ", ".join(f"predicate.{k}: {json.dumps(v)}" for k, v in predicates.items())
    text = deviceshare_conf(**deviceshare).replace(
        "{name: predicates}", f"{{name: predicates, arguments: {{{legacy}}}}}")
    if not deviceshare:
        text = text.replace("  - {name: deviceshare, arguments: {}}\n", "")
    with pytest.raises(ConfError) as info:
        parse_conf(text)
    message = str(info.value)
    assert words in message and f"{owner}:" in message
    assert all(f"predicate.{key}" in message for key in predicates)
    assert all(f"deviceshare.{key}" in message for key in deviceshare)


def test_one_legacy_switch_beside_deviceshare_is_accepted() -> None:
    text = deviceshare_conf(GPUSharingEnable=True).replace(
        "{name: predicates}", "{name: predicates, arguments: {predicate.GPUSharingEnable: true}}")
    assert device_config(parse_conf(text)).gpu_sharing


def test_no_switch_no_devices() -> None:
    support = device_support(load_conf(None))
    assert not support.enabled and support.cache_options() == {}
    assert with_device_plugin(load_conf(None)) == load_conf(None)


def test_per_device_vgpu_quantities_are_not_summed_by_the_resource_model() -> None:
    options = device_support(parse_conf(vgpu_conf())).cache_options()
    assert options["ignored_resources"] == {"volcano.sh/vgpu-memory",
                                            "volcano.sh/vgpu-memory-percentage",
                                            "volcano.sh/vgpu-cores"}
    assert options["device_dims"] == {"volcano.sh/vgpu-number"}
    hami = device_support(parse_conf(vgpu_conf(profile="hami"))).cache_options()
    assert hami["ignored_resources"] == {"nvidia.com/gpumem", "nvidia.com/gpumem-percentage",
                                         "nvidia.com/gpucores"}


@pytest.mark.parametrize("name", ["gpushare", "vgpu"])
def test_sample_confs_and_clusters_run_through_lahar_simulate(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    conf = ROOT / "conf" / f"{name}.conf"
    sample = ROOT / "conf" / "samples" / f"{name}.yaml"
    assert main(["conf", "check", str(conf)]) == 0
    assert main(["simulate", "--conf", str(conf), str(sample)]) == 0
    out = capsys.readouterr().out
    assert "settled" in out
    if name == "gpushare":
        assert "default/too-big" in out and "more than one card of the node holds" in out
    else:
        assert "No pending pods." in out


def test_a_failed_bind_gives_back_the_node_lock_and_the_pod_is_placed_later() -> None:
    from scheduler.cache.interface import WriteError
    from scheduler.cluster.manifests import Manifest
    from scheduler.cluster.simulation import build_simulation
    from tests.builders import conf_of
    from tests.devices.conftest import gpushare_conf

    failures = [True]
    held: list[str] = []

    def fail_once(task: object) -> None:
        if failures:
            failures.pop()
            held.append(cluster.objects["Node"]["n1"]["metadata"]["annotations"].get("gpu", ""))
            raise WriteError("injected", status=500)

    cluster, cache, scheduler = build_simulation(
        [Manifest("n", gpu_node("n1")), Manifest("p", gpu_pod("p", memory=1000))],
        conf=conf_of(gpushare_conf(lock=True)))
    cache.pre_bind_hooks.append(fail_once)
    scheduler.run_once()
    cache.flush()
    node = cluster.objects["Node"]["n1"]
    pod = cluster.objects["Pod"]["default/p"]
    assert held == ["2026-01-01T00:00:00Z"]  # the lock was taken for the bind that failed
    assert "gpu" not in node["metadata"].get("annotations", {})
    assert not pod["spec"].get("nodeName")
    for _ in range(3):
        cluster.clock.advance(1.0)
        scheduler.run_once()
        cache.flush()
    assert cluster.objects["Pod"]["default/p"]["spec"]["nodeName"] == "n1"
