"""The vGPU family's MIG and MPS modes served by the agent.

MIG follows HAMi ``pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go`` ``Allocate``
(``GetContainerDeviceStrArray``: an id with ``[`` is a MIG instance, answered with
``GetMigUUIDFromIndex(uuid, position)``, i.e. NVML's ``DeviceGetMigDeviceHandleByIndex``; in
MIG mode none of HAMi-core's variables or mounts) and volcano-vgpu ``pkg/plugin/vgpu/util/util.go``
``ExtractMigTemplatesFromUUID`` (``UUID[group-position]``). MPS follows NVIDIA's device
plugin ``internal/plugin/mps.go`` ``updateReponse`` (pipe directory variable, pipe and shm
mounts from the MPS root, the client's ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.mig import encode_mig_id
from scheduler.devices.names import HAMI, VOLCANO, VGpuNames
from scheduler.devices.node.allocate import AllocationError, Allocator, Mount
from scheduler.devices.node.modes import FakeMig, NvmlMig, mode_answer, parse_fake_mig
from scheduler.devices.node.nodelock import format_lock
from scheduler.devices.node.resources import AgentConfig, Endpoint
from tests.builders import make_node
from tests.devices.nodeagent.cluster import MemoryCluster, pod, vgpu_annotations
from tests.devices.nodeagent.conftest import Running, inventory
from tests.devices.nodeagent.fakekubelet import FakeKubelet

NOW = 1_767_225_600.0
INV = inventory(gpus=2)
A, B = INV.gpus[0].uuid, INV.gpus[1].uuid
GEOMETRY = "1g.10gb=9728:4,2g.20gb=19968:1"


def setup(names: VGpuNames, mode: str, *, mig: Any = None) -> tuple[MemoryCluster, Allocator]:
    lock = format_lock(NOW - 5, owner="ml/p" if names.lock_with_owner else None)
    cluster = MemoryCluster(make_node("gpu-1", annotations={names.lock: lock}))
    config = AgentConfig(node_name="gpu-1", devices=DeviceConfig(
        vgpu=True, node_lock=True, profile=names.profile), vgpu_mode=mode,
        mps_root="/run/nvidia/mps")
    allocator = Allocator(access=cluster, config=config, inventory=lambda: INV,
                          clock=lambda: NOW, sleep=lambda _: None, new_id=lambda: "c0ffee",
                          mig=mig, mode_answer=mode_answer)
    return cluster, allocator


def add_pod(cluster: MemoryCluster, names: VGpuNames, text: str, count: int) -> None:
    if names.profile == "hami":
        text += ";"
    cluster.pods.append(pod("p", containers=[("main", {names.count: str(count)})],
                            annotations=vgpu_annotations(names, text, bind_time=1)))


def test_fake_mig_geometry_parses_with_and_without_memory() -> None:
    assert parse_fake_mig(GEOMETRY) == (("1g.10gb", 9728, 4), ("2g.20gb", 19968, 1))
    assert parse_fake_mig("3g.40gb:2") == (("3g.40gb", 40960, 2),)
    for bad in ("", "1g.10gb", "1g.10gb=x:1", "1g:2", "1g.10gb:0"):
        with pytest.raises(ValueError, match="--fake-mig"):
            parse_fake_mig(bad)


@pytest.mark.parametrize("names", [VOLCANO, HAMI], ids=lambda n: n.profile)
def test_mig_instance_is_answered_with_its_mig_uuid(names: VGpuNames) -> None:
    """Position 4 of group ``g0`` on card B is the fifth instance (after the four 1g ones)."""
    mig = FakeMig(parse_fake_mig(GEOMETRY))
    cluster, allocator = setup(names, "mig", mig=mig)
    add_pod(cluster, names, f"{encode_mig_id(B, 'g0', 4)},NVIDIA,19968,0:"
                            f"{encode_mig_id(A, 'g0', 1)},NVIDIA,9728,0:", 2)
    (answer,) = allocator.allocate(Endpoint(names.count, "vgpu"), [["x-0", "x-1"]])
    b_instances = mig.instances(INV.gpus[1])
    a_instances = mig.instances(INV.gpus[0])
    assert b_instances[4] is not None and a_instances[1] is not None
    assert b_instances[4].profile == "2g.20gb"
    assert dict(answer.envs) == {
        "NVIDIA_VISIBLE_DEVICES": f"{b_instances[4].uuid},{a_instances[1].uuid}"}
    assert answer.mounts == ()  # no HAMi-core in MIG mode
    assert cluster.pod_annotations("p")[names.bind_phase] == "success"
    assert names.lock not in cluster.node_annotations()


def test_a_position_the_card_lacks_fails_the_pod_naming_card_and_position() -> None:
    cluster, allocator = setup(VOLCANO, "mig", mig=FakeMig(parse_fake_mig("3g.40gb:2")))
    add_pod(cluster, VOLCANO, f"{encode_mig_id(A, 'g1', 5)},NVIDIA,9728,0:", 1)
    with pytest.raises(AllocationError) as caught:
        allocator.allocate(Endpoint(VOLCANO.count, "vgpu"), [["x-0"]])
    assert str(caught.value) == (
        f"pod ml/p: GPU {A} on node gpu-1 has no MIG device at position 5 (geometry group "
        f"g1; the card has 2): partition it as the geometry says")
    assert cluster.pod_annotations("p")[VOLCANO.bind_phase] == "failed"


def test_mig_devices_from_nvml_by_index_with_capability_nodes(tmp_path: Any) -> None:
    """NVML MIG index = the position (HAMi ``GetMigUUIDFromIndex``); an index without a device
    is a hole; the capability minors come from ``/proc/driver/nvidia-caps/mig-minors``."""
    caps = tmp_path / "driver" / "nvidia-caps"
    caps.mkdir(parents=True)
    (caps / "mig-minors").write_text("gpu1/gi3/access 30\ngpu1/gi3/ci0/access 31\n")

    class Error(Exception):
        pass

    class Memory:
        total = 19968 * 2**20

    class Nvml:
        def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str: return uuid
        def nvmlDeviceGetMaxMigDeviceCount(self, handle: str) -> int: return 3

        def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: str, index: int) -> tuple[str, int]:
            if index == 1:
                raise Error("not found")
            return handle, index

        def nvmlDeviceGetUUID(self, mig: tuple[str, int]) -> bytes:
            return f"MIG-{mig[1]}".encode()

        def nvmlDeviceGetMemoryInfo(self, mig: object) -> Memory: return Memory()

        def nvmlDeviceGetName(self, mig: object) -> str:
            return "NVIDIA A100-SXM4-40GB MIG 2g.20gb"

        def nvmlDeviceGetGpuInstanceId(self, mig: tuple[str, int]) -> int: return 3
        def nvmlDeviceGetComputeInstanceId(self, mig: tuple[str, int]) -> int: return 0

    found = NvmlMig(nvml=Nvml(), error=Error, proc_root=str(tmp_path)).instances(INV.gpus[1])
    assert found[1] is None and found[0] is not None and found[2] is not None
    assert (found[2].uuid, found[2].profile, found[2].memory) == ("MIG-2", "2g.20gb", 19968)
    assert found[0].caps == ("/dev/nvidia-caps/nvidia-cap30", "/dev/nvidia-caps/nvidia-cap31")


@pytest.mark.parametrize("names", [VOLCANO, HAMI], ids=lambda n: n.profile)
def test_mps_mode_answers_the_daemon_directories_and_thread_percentage(names: VGpuNames
                                                                      ) -> None:
    cluster, allocator = setup(names, "mps")
    add_pod(cluster, names, f"{A},NVIDIA,4096,30:{B},NVIDIA,2048,30:", 2)
    (answer,) = allocator.allocate(Endpoint(names.count, "vgpu"), [["x-0", "x-1"]])
    inside = f"/mps/{names.count}"
    host = f"/run/nvidia/mps/{names.count}"
    assert dict(answer.envs) == {
        "NVIDIA_VISIBLE_DEVICES": f"{A},{B}",
        "CUDA_MPS_PIPE_DIRECTORY": f"{inside}/pipe", "CUDA_MPS_LOG_DIRECTORY": f"{inside}/log",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=4096M,1=2048M"}
    assert answer.mounts == (Mount(f"{inside}/pipe", f"{host}/pipe", False),
                             Mount(f"{inside}/log", f"{host}/log", False),
                             Mount("/dev/shm", f"{host}/shm", False))
    assert cluster.pod_annotations("p")[names.bind_phase] == "success"


def test_mps_whole_card_sets_no_thread_percentage() -> None:
    cluster, allocator = setup(VOLCANO, "mps")
    add_pod(cluster, VOLCANO, f"{A},NVIDIA,0,100:", 1)
    (answer,) = allocator.allocate(Endpoint(VOLCANO.count, "vgpu"), [["x-0"]])
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in answer.envs
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in answer.envs


def test_agent_in_mig_mode_registers_mig_cards_and_serves_instances(
        kubelet: FakeKubelet, start_agent: Callable[..., Running]) -> None:
    """The register says ``mig`` (what the scheduler's MIG placement keys on) and kubelet's
    Allocate gets the instance's UUID."""
    from scheduler.devices.codec import parse_register
    from scheduler.devices.node.agent import NodeAgent

    mig = FakeMig(parse_fake_mig(GEOMETRY))
    cluster = MemoryCluster(make_node("gpu-1", annotations={VOLCANO.lock: format_lock(NOW)}))
    run = start_agent(DeviceConfig(vgpu=True, node_lock=True), cluster=cluster, vgpu_mode="mig")
    agent: NodeAgent = run.agent
    agent.allocator.mig = mig  # type: ignore[union-attr]
    assert kubelet.wait_registered({VOLCANO.count})
    assert agent.reported.wait(5)
    cards = parse_register(cluster.node_annotations()[VOLCANO.register])
    assert {c.mode for c in cards} == {"mig"}
    gpu = run.source.read().gpus[0]
    add = f"{encode_mig_id(gpu.uuid, 'g0', 0)},NVIDIA,9728,0:"
    cluster.pods.append(pod("p", containers=[("main", {VOLCANO.count: "1"})],
                            annotations=vgpu_annotations(VOLCANO, add, bind_time=1)))
    answer = kubelet.allocate(VOLCANO.count, 1)
    first = mig.instances(gpu)[0]
    assert first is not None and answer.envs["NVIDIA_VISIBLE_DEVICES"] == first.uuid


@pytest.mark.parametrize(("flags", "message"), [
    (["--vgpu-mode", "mig"], "--vgpu-mode mig on fake GPUs needs --fake-mig"),
    (["--vgpu-mode", "mig", "--fake-mig", "1g.10gb"], "--fake-mig entry '1g.10gb'"),
    (["--metrics-address", "nowhere"], "--metrics-address 'nowhere' is not HOST:PORT"),
    (["--device-memory-scaling", "0"], "must be above 0"),
])
def test_bad_mode_flags_are_refused_before_serving(flags: list[str], message: str,
                                                   capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    from scheduler.commands.cli import build_parser

    args = build_parser().parse_args(["node-agent", "--vgpu", "--fake-gpus", "1",
                                      "--kubeconfig", "tests/data/bad/kubeconfig-refused.yaml",
                                      "--kubelet-dir", str(tmp_path), *flags])
    assert args.func(args) == 2
    assert message in capsys.readouterr().err
