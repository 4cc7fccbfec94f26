"""The HAMi-core switches a vGPU ``Allocate`` answers with, and where the agent takes them.

HAMi ``pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go:833-847`` (``Allocate``),
volcano-vgpu ``pkg/plugin/server.go:438-451``; the settings as HAMi's device plugin
(``cmd/device-plugin/nvidia/vgpucfg.go:48-65`` flags and environment variables,
``pkg/device/nvidia/device.go:94-128`` ``NvidiaConfig``/``NodeDefaultConfig``,
``nvinternal/plugin/server.go:128-157`` ``readFromConfigFile``) and volcano-vgpu
(``pkg/util/util.go:569-617`` ``LoadNvidiaConfig``) read them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.commands.cli import build_parser
from scheduler.commands.nodeagent import _core_settings
from scheduler.devices.base import DeviceConfig
from scheduler.devices.names import HAMI, VOLCANO, VGpuNames
from scheduler.devices.node.allocate import Allocator, ContainerAnswer
from scheduler.devices.node.coresettings import (
    CoreSettingsError,
    flag_settings,
    read_device_config,
    read_node_config,
)
from scheduler.devices.node.resources import AgentConfig, AgentConfigError, Endpoint
from tests.devices.nodeagent.cluster import MemoryCluster, pod, vgpu_annotations
from tests.devices.nodeagent.conftest import inventory

INV = inventory(gpus=1)
A = INV.gpus[0].uuid
SWITCHES = ("CUDA_OVERSUBSCRIBE", "LIBCUDA_LOG_LEVEL", "GPU_CORE_UTILIZATION_POLICY")


def answer(names: VGpuNames, *, env: list[dict[str, str]] | None = None,
           **settings: Any) -> ContainerAnswer:
    cluster = MemoryCluster()
    cluster.pods.append(pod("p", containers=[("main", {names.count: "1"})],
                            env={"main": env or []},
                            annotations=vgpu_annotations(names, f"{A},NVIDIA,1024,30:"
                                                         + (";" if names is HAMI else ""),
                                                         bind_time=1)))
    config = AgentConfig(node_name="gpu-1", devices=DeviceConfig(vgpu=True,
                                                                 profile=names.profile),
                         **settings)
    config.check()
    allocator = Allocator(access=cluster, config=config, inventory=lambda: INV,
                          sleep=lambda _: None, new_id=lambda: "c0ffee")
    (got,) = allocator.allocate(Endpoint(names.count, "vgpu"), [["x"]])
    return got


def switches(got: ContainerAnswer) -> dict[str, str]:
    return {k: v for k, v in got.envs.items() if k in SWITCHES}


def test_defaults_set_no_switch() -> None:
    for names in (HAMI, VOLCANO):
        assert switches(answer(names)) == {}


def test_hami_oversubscribes_on_memory_scaling_and_passes_log_level_and_core_switch() -> None:
    """HAMi server.go:839-847: ``DeviceMemoryScaling > 1`` → ``CUDA_OVERSUBSCRIBE``;
    ``LogLevel`` → ``LIBCUDA_LOG_LEVEL``; ``DisableCoreLimit`` → ``GPU_CORE_UTILIZATION_POLICY
    =disable`` (``util.CoreLimitSwitch``, ``pkg/util/types.go:40``)."""
    got = answer(HAMI, device_memory_scaling=1.5, libcuda_log_level="3",
                 disable_core_limit=True)
    assert switches(got) == {"CUDA_OVERSUBSCRIBE": "true", "LIBCUDA_LOG_LEVEL": "3",
                             "GPU_CORE_UTILIZATION_POLICY": "disable"}
    assert got.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1024m"
    assert switches(answer(HAMI, device_cores_scaling=2.0)) == {}


def test_volcano_oversubscribes_on_core_scaling_and_multiplies_the_memory_factor() -> None:
    """volcano-vgpu server.go:441 (``Usedmem * GPUMemoryFactor``), 446-451
    (``DeviceCoresScaling > 1`` → ``CUDA_OVERSUBSCRIBE``; ``DisableCoreLimit``)."""
    got = answer(VOLCANO, device_cores_scaling=2.0, gpu_memory_factor=4,
                 disable_core_limit=True)
    assert switches(got) == {"CUDA_OVERSUBSCRIBE": "true",
                             "GPU_CORE_UTILIZATION_POLICY": "disable"}
    assert got.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "4096m"
    assert switches(answer(VOLCANO, device_memory_scaling=2.0)) == {}
    # HAMi has no memory factor on the limit
    assert answer(HAMI, gpu_memory_factor=4).envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1024m"


def test_core_policy_is_injected_unless_default_or_the_container_sets_it() -> None:
    """HAMi ``pkg/device/nvidia/device.go:360-366`` (``MutateAdmission``) adds a
    ``gpuCorePolicy`` other than ``default`` to the container's environment."""
    assert switches(answer(HAMI, gpu_core_policy="force")) == {
        "GPU_CORE_UTILIZATION_POLICY": "force"}
    assert switches(answer(HAMI, gpu_core_policy="default")) == {}
    own = [{"name": "GPU_CORE_UTILIZATION_POLICY", "value": "default"}]
    assert switches(answer(VOLCANO, gpu_core_policy="force", env=own)) == {}


@pytest.mark.parametrize(("settings", "fragment"), [
    ({"device_memory_scaling": 0.0}, "scaling must be above 0"),
    ({"libcuda_log_level": "loud"}, "log level must be a number"),
    ({"gpu_core_policy": "always"}, "core policy must be default, force or disable"),
])
def test_bad_settings_are_refused(settings: dict[str, Any], fragment: str) -> None:
    config = AgentConfig(node_name="n", devices=DeviceConfig(vgpu=True), **settings)
    with pytest.raises(AgentConfigError, match=fragment):
        config.check()


DEVICE_CONFIG = """
nvidia:
  resourceCountName: nvidia.com/gpu
  deviceSplitCount: 4
  deviceMemoryScaling: 1.5
  deviceCoreScaling: 1
  libCudaLogLevel: 1
  gpuCorePolicy: force
  gpuMemoryFactor: 2
"""


def test_device_config_then_flags_then_the_node_s_entry(tmp_path: Path) -> None:
    """Lowest first: the device ConfigMap, flags that were set (volcano-vgpu util.go:590-598
    lets a flag override only when ``c.IsSet``), this node's config.json entry (HAMi
    server.go:140-143, ``mergo.WithOverride``; Go's JSON keys match case-insensitively)."""
    device = tmp_path / "device-config.yaml"
    device.write_text(DEVICE_CONFIG)
    node = tmp_path / "config.json"
    node.write_text(json.dumps({"nodeconfig": [
        {"name": "other", "devicememoryscaling": 9},
        {"name": "gpu-1", "deviceMemoryScaling": 2.5, "enablenumatopology": True,
         "operatingmode": "hami-core"}]}))
    args = build_parser(only="node-agent").parse_args(
        ["node-agent", "--vgpu", "--device-config", str(device), "--node-config", str(node),
         "--libcuda-log-level", "4", "--split-count", "8"])
    assert _core_settings(args, "gpu-1") == {
        "split_count": 8, "device_memory_scaling": 2.5, "device_cores_scaling": 1.0,
        "libcuda_log_level": "4",
        "gpu_core_policy": "force", "gpu_memory_factor": 2, "numa_topology": True}
    plain = build_parser(only="node-agent").parse_args(["node-agent", "--vgpu"])
    assert _core_settings(plain, "gpu-1") == {}


def test_the_peers_environment_variables_stand_for_unset_flags() -> None:
    """HAMi vgpucfg.go:42-65: ``DEVICE_SPLIT_COUNT``, ``DEVICE_MEMORY_SCALING``,
    ``DEVICE_CORES_SCALING``, ``DISABLE_CORE_LIMIT``."""
    env = {"DEVICE_SPLIT_COUNT": "5", "DEVICE_MEMORY_SCALING": "2", "DEVICE_CORES_SCALING": "3",
           "DISABLE_CORE_LIMIT": "true"}
    assert flag_settings({}, env) == {"split_count": 5, "device_memory_scaling": 2.0,
                                      "device_cores_scaling": 3.0, "disable_core_limit": True}
    assert flag_settings({"device_memory_scaling": 1.25}, env)["device_memory_scaling"] == 1.25
    with pytest.raises(CoreSettingsError, match=r"\$DEVICE_CORES_SCALING: 'lots' is not a "
                                                r"number"):
        flag_settings({}, {"DEVICE_CORES_SCALING": "lots"})


@pytest.mark.parametrize(("text", "fragment"), [
    ("nvidia: [1]", "cfg.yaml: nvidia must be a map"),
    ("nvidia: {deviceSplitCount: many}", "cfg.yaml: nvidia.deviceSplitCount: 'many' is not an "
                                         "integer"),
    ("nvidia: {disableCoreLimit: maybe}", "nvidia.disableCoreLimit: 'maybe' is not true"),
    ("{", "cfg.yaml: not YAML"),
])
def test_device_config_errors_name_file_and_key(text: str, fragment: str) -> None:
    with pytest.raises(CoreSettingsError, match=fragment):
        read_device_config(text, source="cfg.yaml")


def test_node_config_errors_name_file_and_entry() -> None:
    bad = json.dumps({"nodeconfig": [{"name": "n", "devicecorescaling": "x"}]})
    with pytest.raises(CoreSettingsError, match=r"c.json: nodeconfig\[0\].devicecorescaling"):
        read_node_config(bad, node_name="n", source="c.json")
    with pytest.raises(CoreSettingsError, match=r"c\.json: not JSON"):
        read_node_config("{", node_name="n", source="c.json")
    assert read_node_config(bad, node_name="elsewhere", source="c.json") == {}
