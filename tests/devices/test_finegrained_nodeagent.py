"""The node side as a library: the Device object from NVML (fake NVML, fake sysfs) and the
container environment of an allocation.

Matches koordlet's GPU reporting (``pkg/koordlet/statesinformer/impl/states_device_linux.go``)
and its GPU runtime hook (``pkg/koordlet/runtimehooks/hooks/gpu``) in koordinator-sh/koordinator.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from scheduler.commands.device import report_main
from scheduler.devices.base import DeviceConfig, Reporter
from scheduler.devices.finegrained.family import FineGrainedFamily
from scheduler.devices.finegrained.model import parse_device_object
from scheduler.devices.node.report import NoGpus, Sysfs, build_device_object, normalise_bus_id
from scheduler.devices.node.runtime import container_env


class FakeError(Exception):
    pass


class FakeNvml:
    """NVML with ``gpus`` as (uuid, minor, bytes, NVML bus id, name); ``broken`` indices fail."""

    def __init__(self, gpus: list[tuple[str, int, int, str, str]], *, broken: frozenset[int] = frozenset(),
                 start: bool = True) -> None:
        self.gpus, self.broken, self.start = gpus, broken, start
        self.shut = False

    def nvmlInit(self) -> None:
        if not self.start:
            raise FakeError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index in self.broken:
            raise FakeError("GPU is lost")
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return self.gpus[handle][0].encode()

    def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
        return self.gpus[handle][1]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(total=self.gpus[handle][2], used=0, free=self.gpus[handle][2])

    def nvmlDeviceGetPciInfo(self, handle: int) -> Any:
        return SimpleNamespace(busId=self.gpus[handle][3])

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self.gpus[handle][4]

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"


def fake_sysfs(root: Path, devices: dict[str, tuple[str, int]]) -> Sysfs:
    """``bus/pci/devices/<bdf>`` links into ``devices/<root complex>/.../<bdf>``."""
    for bdf, (complex_id, numa) in devices.items():
        real = root / "devices" / complex_id / f"{complex_id[3:]}:00.0" / bdf
        real.mkdir(parents=True)
        (real / "numa_node").write_text(f"{numa}\n")
        link = root / "bus/pci/devices" / bdf
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(real, link)
    return Sysfs(str(root))


GPUS = [("GPU-aaa", 0, 80 * 2**30, "00000000:1B:00.0", "NVIDIA A100-SXM4-80GB"),
        ("GPU-bbb", 1, 80 * 2**30, "00000000:9C:00.0", "NVIDIA A100-SXM4-80GB")]


def test_device_object_from_nvml_and_sysfs(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path, {"0000:1b:00.0": ("pci0000:1a", 0),
                                  "0000:9c:00.0": ("pci0000:9b", -1)})
    nvml = FakeNvml(GPUS)
    obj = build_device_object("n1", nvml, sysfs=sysfs, error=FakeError)
    assert nvml.shut
    assert obj["metadata"]["labels"] == {
        "node.koordinator.sh/gpu-vendor": "nvidia",
        "node.koordinator.sh/gpu-model": "A100-SXM4-80GB",
        "node.koordinator.sh/gpu-driver-version": "550.54.15"}
    first, second = obj["spec"]["devices"]
    assert first == {"type": "gpu", "id": "GPU-aaa", "minor": 0, "health": True,
                     "resources": {"koordinator.sh/gpu-core": "100",
                                   "koordinator.sh/gpu-memory": str(80 * 2**30),
                                   "koordinator.sh/gpu-memory-ratio": "100"},
                     "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:1a",
                                  "busID": "0000:1b:00.0"}}
    assert second["topology"]["nodeID"] == 0  # -1 in sysfs is reported as NUMA node 0
    assert second["topology"]["pcieID"] == "pci0000:9b"
    warnings: list[str] = []
    spec = parse_device_object(obj, warnings.append)  # the scheduler reads what it reports
    assert not warnings and [d.pcie for d in spec.devices] == ["pci0000:1a", "pci0000:9b"]


def test_unreadable_gpu_is_unhealthy_and_mixed_models_leave_the_model_empty(
        tmp_path: Path) -> None:
    gpus = [*GPUS, ("GPU-ccc", 2, 40 * 2**30, "00000000:3D:00.0", "NVIDIA A100-PCIE-40GB")]
    obj = build_device_object("n1", FakeNvml(gpus, broken={1}), sysfs=Sysfs(str(tmp_path)),
                              error=FakeError)
    broken = [d for d in obj["spec"]["devices"] if not d["health"]]
    assert len(broken) == 1 and broken[0]["conditions"][0]["message"] == "GPU is lost"
    # koordlet's fillGPUDevice leaves a value it cannot tell out rather than writing it empty
    assert "node.koordinator.sh/gpu-model" not in obj["metadata"]["labels"]


def test_no_driver_or_no_gpu_is_no_gpus() -> None:
    with pytest.raises(NoGpus):
        build_device_object("n1", FakeNvml(GPUS, start=False), error=FakeError)
    with pytest.raises(NoGpus):
        build_device_object("n1", FakeNvml([]), error=FakeError)


def test_bus_ids_are_normalised_to_sysfs_spelling() -> None:
    assert normalise_bus_id(b"00000000:3B:00.0") == "0000:3b:00.0"
    assert normalise_bus_id("0000:3b:00.0") == "0000:3b:00.0"


def _args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(node_name="n1", sysfs=str(tmp_path), dry_run=True)


def test_report_dry_run_prints_the_object(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = report_main(_args(tmp_path), loader=lambda: (FakeNvml(GPUS), FakeError))
    assert code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["kind"] == "Device" and len(printed["spec"]["devices"]) == 2


def test_report_without_gpus_says_so_and_exits_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report_main(_args(tmp_path), loader=lambda: (FakeNvml([]), FakeError)) == 0
    assert "no NVIDIA GPUs" in capsys.readouterr().out

    def missing() -> Any:
        raise ImportError("pynvml")

    assert report_main(_args(tmp_path), loader=missing,
                       driver_dir=str(tmp_path / "absent")) == 0
    assert "no NVIDIA driver" in capsys.readouterr().out
    assert report_main(_args(tmp_path), loader=missing, driver_dir=str(tmp_path)) == 1
    assert "nvidia-ml-py" in capsys.readouterr().err


ALLOCATION = json.dumps({"gpu": [
    {"minor": 3, "resources": {"koordinator.sh/gpu-core": "30",
                               "koordinator.sh/gpu-memory": "8Gi",
                               "koordinator.sh/gpu-memory-ratio": "50"}}]})


def test_visible_devices_are_minors_and_hami_core_limits_only_for_isolated_shares() -> None:
    assert container_env(ALLOCATION) == {"NVIDIA_VISIBLE_DEVICES": "3"}
    isolated = container_env(ALLOCATION,
                             labels={"koordinator.sh/gpu-isolation-provider": "HAMi-core"})
    assert isolated == {"NVIDIA_VISIBLE_DEVICES": "3",
                        "CUDA_DEVICE_MEMORY_LIMIT": str(8 * 2**30),
                        "CUDA_DEVICE_SM_LIMIT": "30"}
    whole = json.dumps({"gpu": [{"minor": m, "resources": {
        "koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100",
        "koordinator.sh/gpu-memory": "80Gi"}} for m in (1, 4)]})
    assert container_env(whole, isolate=True) == {"NVIDIA_VISIBLE_DEVICES": "1,4"}
    assert container_env(json.dumps({"rdma": [{"minor": 0, "resources": {}}]})) == {}
    with pytest.raises(ValueError):
        container_env("{broken")


def test_env_of_an_allocation_the_scheduler_made() -> None:
    from scheduler.api.node import node_from_object
    from scheduler.api.task import task_from_pod
    from tests.devices.finegrained_helpers import device_object, fg_node, fg_pod, gpu

    family = FineGrainedFamily(DeviceConfig(finegrained=True), Reporter())
    devices = family.build(node_from_object(fg_node("n1", gpus=2)),
                           device_object("n1", [gpu(0), gpu(1)]))
    task = task_from_pod(fg_pod("p", gpu_core=25, gpu_memory_ratio=25))
    request = family.parse_request(task)
    assert request is not None
    annotations = devices.allocate(task, request, now=0.0)
    env = container_env(annotations["scheduling.koordinator.sh/device-allocated"], isolate=True)
    assert env == {"NVIDIA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_MEMORY_LIMIT": str(4 * 2**30),
                   "CUDA_DEVICE_SM_LIMIT": "25"}
