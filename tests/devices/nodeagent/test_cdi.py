"""``--cdi``: ``Allocate`` names devices by CDI, and the agent writes the CDI spec.

Follows HAMi ``pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go``
``getAllocateResponse`` / ``updateResponseForCDI`` (``CdiDevices`` of
``QualifiedName("gpu", id)`` and no ``NVIDIA_VISIBLE_DEVICES`` when every strategy is a CDI
one), HAMi ``nvinternal/cdi/cdi.go`` ``CreateSpecFile`` (``/var/run/cdi``, file named by
``GenerateNameForSpec`` = ``<vendor>-<class>.json``) with the vendor its plugin manager sets
(``k8s.device-plugin.nvidia.com``), and the spec layout nvidia-container-toolkit's ``nvcdi``
generates (``cdiVersion`` 0.5.0, a device per UUID and ``all``, common ``containerEdits``
with ``NVIDIA_VISIBLE_DEVICES=void``, control device nodes and read-only bind mounts).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.names import VOLCANO
from scheduler.devices.node.allocate import Allocator
from scheduler.devices.node.cdi import CdiSpecWriter, build_spec, discover_driver
from scheduler.devices.node.modes import FakeMig
from scheduler.devices.node.resources import AgentConfig, Endpoint
from tests.builders import make_node
from tests.devices.nodeagent.cluster import MemoryCluster, pod, vgpu_annotations
from tests.devices.nodeagent.conftest import Running, inventory
from tests.devices.nodeagent.fakekubelet import FakeKubelet

INV = inventory(gpus=2)
A, B = INV.gpus[0].uuid, INV.gpus[1].uuid
KIND = "k8s.device-plugin.nvidia.com/gpu"


def _driver_root(root: Path) -> Path:
    """A host with the driver's files: control nodes, a library with its soname, a tool."""
    (root / "dev").mkdir(parents=True)
    for node in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"):
        (root / "dev" / node).write_text("")
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.535.54.03").write_text("elf")
    os.symlink("libcuda.so.535.54.03", lib / "libcuda.so.1")
    (lib / "libnvidia-ml.so.535.54.03").write_text("elf")
    (lib / "libc.so.6").write_text("not ours")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/nvidia-smi").write_text("#!")
    return root


def test_spec_has_the_toolkit_layout_and_no_hook(tmp_path: Path) -> None:
    root = _driver_root(tmp_path / "driver")
    spec = build_spec(INV, discover_driver(str(root)), dev_root=str(root))
    assert spec["cdiVersion"] == "0.5.0" and spec["kind"] == KIND
    names = [d["name"] for d in spec["devices"]]
    assert names == [A, B, "all"]
    assert spec["devices"][1]["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/nvidia1", "hostPath": f"{root}/dev/nvidia1"}]
    edits = spec["containerEdits"]
    assert edits["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert [n["path"] for n in edits["deviceNodes"]] == ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    lib = "/usr/lib/x86_64-linux-gnu"
    mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
    real = f"{root}{lib}/libcuda.so.535.54.03"
    assert mounts == {f"{lib}/libcuda.so.535.54.03": real, f"{lib}/libcuda.so.1": real,
                      f"{lib}/libnvidia-ml.so.535.54.03": f"{root}{lib}/libnvidia-ml.so.535.54.03",
                      "/usr/bin/nvidia-smi": f"{root}/usr/bin/nvidia-smi"}
    assert all(m["options"] == ["ro", "nosuid", "nodev", "bind"] for m in edits["mounts"])
    assert "hooks" not in edits  # runtimes need no NVIDIA hook


def test_mig_instances_are_cdi_devices_of_their_own(tmp_path: Path) -> None:
    mig = FakeMig((("3g.40gb", 40960, 2),))
    instances = {g.uuid: [i for i in mig.instances(g) if i] for g in INV.gpus}
    spec = build_spec(INV, discover_driver(str(tmp_path)), mig=instances)
    names = [d["name"] for d in spec["devices"]]
    assert names == [A, *[i.uuid for i in instances[A]], B, *[i.uuid for i in instances[B]],
                     "all"]
    assert spec["devices"][1]["containerEdits"]["deviceNodes"] == [{"path": "/dev/nvidia0"}]


def test_writer_writes_atomically_and_only_on_change(tmp_path: Path) -> None:
    writer = CdiSpecWriter(cdi_root=str(tmp_path / "cdi"), driver_root=str(tmp_path))
    assert writer.sync(INV)
    path = tmp_path / "cdi" / "k8s.device-plugin.nvidia.com-gpu.json"
    assert writer.path == str(path) and json.loads(path.read_text())["kind"] == KIND
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert not writer.sync(INV)
    assert writer.sync(inventory(gpus=3))
    assert len(json.loads(path.read_text())["devices"]) == 4
    assert sorted(os.listdir(tmp_path / "cdi")) == [path.name]  # no temporary left behind


@pytest.mark.parametrize("family", ["vgpu", "gpushare", "finegrained"])
def test_allocate_answers_cdi_names_instead_of_visible_devices(family: str) -> None:
    """vGPU names UUIDs, GPU share card indices, fine-grained minors: all become the cards'
    CDI names; the family's other variables stay."""
    cluster = MemoryCluster(make_node("gpu-1"))
    if family == "vgpu":
        devices = DeviceConfig(vgpu=True)
        endpoint = Endpoint(VOLCANO.count, "vgpu")
        cluster.pods.append(pod("p", containers=[("main", {VOLCANO.count: "2"})],
                                annotations=vgpu_annotations(
                                    VOLCANO, f"{A},NVIDIA,4096,25:{B},NVIDIA,4096,25:",
                                    bind_time=1)))
    elif family == "gpushare":
        devices = DeviceConfig(gpu_sharing=True)
        endpoint = Endpoint("volcano.sh/gpu-memory", "gpushare")
        cluster.pods.append(pod("p", containers=[("main", {"volcano.sh/gpu-memory": "2"})],
                                annotations={"volcano.sh/gpu-index": "1,0",
                                             "volcano.sh/predicate-time": "1"}))
    else:
        devices = DeviceConfig(finegrained=True)
        endpoint = Endpoint("nvidia.com/gpu", "finegrained")
        allocated = json.dumps({"gpu": [{"minor": 1, "resources": {}}]})
        cluster.pods.append(pod("p", containers=[("main", {"nvidia.com/gpu": "1"})],
                                annotations={"scheduling.koordinator.sh/device-allocated":
                                             allocated}))
    config = AgentConfig(node_name="gpu-1", devices=devices, cdi=True)
    allocator = Allocator(access=cluster, config=config, inventory=lambda: INV,
                          clock=lambda: 0.0, sleep=lambda _: None)
    count = {"vgpu": 2, "gpushare": 2, "finegrained": 1}[family]
    (answer,) = allocator.allocate(endpoint, [[f"id-{i}" for i in range(count)]])
    assert "NVIDIA_VISIBLE_DEVICES" not in answer.envs
    expected = {"vgpu": [A, B], "gpushare": [B, A], "finegrained": [B]}[family]
    assert answer.cdi_devices == tuple(f"{KIND}={u}" for u in expected)
    if family == "vgpu":
        assert answer.envs["CUDA_DEVICE_MEMORY_LIMIT_1"] == "4096m"
    if family == "gpushare":
        assert answer.envs["VOLCANO_GPU_ALLOCATED"] == "2"


def test_agent_writes_the_spec_and_kubelet_gets_cdi_devices(
        kubelet: FakeKubelet, start_agent: Callable[..., Running], tmp_path: Path) -> None:
    cdi_root = tmp_path / "cdi"
    run = start_agent(DeviceConfig(gpu_sharing=True), cdi=True, cdi_root=str(cdi_root))
    spec = json.loads((cdi_root / "k8s.device-plugin.nvidia.com-gpu.json").read_text())
    uuids = [g.uuid for g in run.source.read().gpus]
    assert [d["name"] for d in spec["devices"]] == [*uuids, "all"]
    assert kubelet.wait_registered({"volcano.sh/gpu-memory"})
    run.cluster.pods.append(pod("p", annotations={"volcano.sh/gpu-index": "1",
                                                  "volcano.sh/predicate-time": "1"},
                                containers=[("main", {"volcano.sh/gpu-memory": "10"})]))
    answer = kubelet.allocate("volcano.sh/gpu-memory", 10)
    assert [d.name for d in answer.cdi_devices] == [f"{KIND}={uuids[1]}"]
    assert "NVIDIA_VISIBLE_DEVICES" not in answer.envs
    shutil.rmtree(cdi_root)
