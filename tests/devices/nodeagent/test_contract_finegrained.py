"""Fine-grained ``Allocate`` contract: the environment and device nodes koordlet's runtime
hooks inject (``pkg/koordlet/runtimehooks/hooks/gpu/gpu.go`` ``InjectContainerGPUEnv``,
``hooks/rdma/rdma.go`` ``InjectDevice``), given from the device plugin instead."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.node.allocate import AllocationError, Allocator, DeviceNode, Mount
from scheduler.devices.node.resources import AgentConfig, Endpoint
from tests.devices.nodeagent.cluster import MemoryCluster, pod
from tests.devices.nodeagent.conftest import inventory

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
GPU_SHARE = {"gpu": [{"minor": 1, "resources": {
    "koordinator.sh/gpu-core": "30", "koordinator.sh/gpu-memory": "8Gi",
    "koordinator.sh/gpu-memory-ratio": "50"}}]}
JOINT = {"gpu": [{"minor": m, "resources": {"koordinator.sh/gpu-core": "100",
                                            "koordinator.sh/gpu-memory-ratio": "100",
                                            "koordinator.sh/gpu-memory": "16Gi"}}
                 for m in (0, 1)],
         "rdma": [{"minor": 0, "resources": {"koordinator.sh/rdma": "1"},
                   "extension": {"vfs": [{"minor": -1, "busID": "0000:18:00.1"}]}},
                  {"minor": 1, "resources": {"koordinator.sh/rdma": "1"}}]}


def setup(sysfs: str = "/nonexistent") -> tuple[MemoryCluster, Allocator]:
    cluster = MemoryCluster()
    config = AgentConfig(node_name="gpu-1", sysfs=sysfs,
                         devices=DeviceConfig(finegrained=True))
    return cluster, Allocator(access=cluster, config=config,
                              inventory=lambda: inventory(2, nics=2))


def test_shared_gpu_with_hami_core_isolation() -> None:
    cluster, allocator = setup()
    cluster.pods.append(pod("share", annotations={ALLOCATED: json.dumps(GPU_SHARE)},
                            labels={"koordinator.sh/gpu-isolation-provider": "HAMi-core"},
                            containers=[("main", {"koordinator.sh/gpu-core": "30",
                                                  "koordinator.sh/gpu-memory-ratio": "50"})]))
    (core,) = allocator.allocate(Endpoint("koordinator.sh/gpu-core", "finegrained"), [["x"] * 30])
    assert dict(core.envs) == {"NVIDIA_VISIBLE_DEVICES": "1",
                               "CUDA_DEVICE_MEMORY_LIMIT": str(8 * 2**30),
                               "CUDA_DEVICE_SM_LIMIT": "30",
                               "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so"}
    assert core.mounts == (Mount("/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", True),
                           Mount("/tmp/vgpulock", "/tmp/vgpulock", False))
    (ratio,) = allocator.allocate(Endpoint("koordinator.sh/gpu-memory-ratio", "finegrained"),
                                  [["x"] * 50])
    assert ratio.pod == "ml/share" and ratio.envs == core.envs


def test_whole_gpus_and_rdma_vf_and_pf(tmp_path: Path) -> None:
    for bus, verbs in (("0000:18:00.1", "uverbs4"), ("0000:19:00.0", "uverbs1")):
        (tmp_path / "bus/pci/devices" / bus / "infiniband_verbs" / verbs).mkdir(parents=True)
    cluster, allocator = setup(sysfs=str(tmp_path))
    cluster.pods.append(pod("joint", annotations={ALLOCATED: json.dumps(JOINT)},
                            containers=[("main", {"nvidia.com/gpu": "2",
                                                  "koordinator.sh/rdma": "2"})]))
    (gpus,) = allocator.allocate(Endpoint("nvidia.com/gpu", "finegrained"), [["a", "b"]])
    assert dict(gpus.envs) == {"NVIDIA_VISIBLE_DEVICES": "0,1"} and not gpus.mounts
    (rdma,) = allocator.allocate(Endpoint("koordinator.sh/rdma", "finegrained"), [["r1", "r2"]])
    assert rdma.devices == (DeviceNode("/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm"),
                            DeviceNode("/dev/infiniband/uverbs4", "/dev/infiniband/uverbs4"),
                            DeviceNode("/dev/infiniband/uverbs1", "/dev/infiniband/uverbs1"))
    # both hooks act on every container: each answer carries the GPUs and the RDMA devices
    assert rdma.envs == gpus.envs and gpus.devices == rdma.devices
    assert os.path.isdir(tmp_path)


def test_each_container_once_then_the_next_pod() -> None:
    cluster, allocator = setup()
    text = json.dumps({"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "100"}}]})
    cluster.pods += [pod("b", annotations={ALLOCATED: text}, created="2026-01-02T00:00:00Z",
                         containers=[("main", {"nvidia.com/gpu": "1"})]),
                     pod("a", annotations={ALLOCATED: text}, created="2026-01-01T00:00:00Z",
                         containers=[("main", {"nvidia.com/gpu": "1"})])]
    endpoint = Endpoint("nvidia.com/gpu", "finegrained")
    served = [allocator.allocate(endpoint, [["x"]])[0].pod for _ in range(2)]
    assert served == ["ml/a", "ml/b"]
    with pytest.raises(AllocationError, match="no pending pod with a"):
        allocator.allocate(endpoint, [["x"]])


@pytest.mark.parametrize("text", ["{broken", json.dumps({"gpu": [{"minor": 9,
                                                                 "resources": {}}]})],
                         ids=["not-json", "unknown-minor"])
def test_unusable_allocation_names_the_pod(text: str) -> None:
    cluster, allocator = setup()
    cluster.pods.append(pod("bad", annotations={ALLOCATED: text},
                            containers=[("main", {"nvidia.com/gpu": "1"})]))
    with pytest.raises(AllocationError, match="pod ml/bad"):
        allocator.allocate(Endpoint("nvidia.com/gpu", "finegrained"), [["x"]])


def test_every_container_the_plugin_reaches_gets_the_pod_s_whole_injection(
        tmp_path: Path) -> None:
    """koordlet runs its GPU hook (``hooks/gpu/gpu.go:54-133`` ``InjectContainerGPUEnv``) and
    its RDMA hook (``hooks/rdma/rdma.go:56-137`` ``InjectDevice``) at the creation of every
    container of the pod (``runtimehooks/nri/handlers.go:76-97`` ``CreateContainer``, no
    filter on what the container asks for): a container asking only for RDMA sees the GPUs,
    one asking only for a GPU share gets the RDMA devices, and one asking for the combined
    ``koordinator.sh/gpu`` (a resource kubelet only calls ``Allocate`` for because the agent
    serves it) gets all of it too."""
    (tmp_path / "bus/pci/devices/0000:18:00.1/infiniband_verbs/uverbs4").mkdir(parents=True)
    cluster, allocator = setup(sysfs=str(tmp_path))
    text = json.dumps({"gpu": GPU_SHARE["gpu"], "rdma": [JOINT["rdma"][0]]})
    cluster.pods.append(pod("mixed", annotations={ALLOCATED: text},
                            labels={"koordinator.sh/gpu-isolation-provider": "HAMi-core"},
                            containers=[("train", {"koordinator.sh/gpu-core": "30",
                                                   "koordinator.sh/gpu-memory-ratio": "50"}),
                                        ("net", {"koordinator.sh/rdma": "1"}),
                                        ("combined", {"koordinator.sh/gpu": "50"})]))
    answers = {}
    for resource, count in (("koordinator.sh/gpu-core", 30), ("koordinator.sh/rdma", 1),
                            ("koordinator.sh/gpu", 50)):
        (answers[resource],) = allocator.allocate(Endpoint(resource, "finegrained"),
                                                  [["x"] * count])
    assert [a.container for a in answers.values()] == ["train", "net", "combined"]
    env = {"NVIDIA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_MEMORY_LIMIT": str(8 * 2**30),
           "CUDA_DEVICE_SM_LIMIT": "30", "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so"}
    devices = (DeviceNode("/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm"),
               DeviceNode("/dev/infiniband/uverbs4", "/dev/infiniband/uverbs4"))
    for answer in answers.values():
        assert dict(answer.envs) == env and answer.devices == devices
        assert Mount("/tmp/vgpulock", "/tmp/vgpulock", False) in answer.mounts


def test_the_combined_gpu_resource_is_served_like_gpu_core() -> None:
    """``koordinator.sh/gpu`` is counted in percent of a card like ``gpu-core``
    (``apis/extension/device_share.go:50``): 100 IDs per card, and no longer a status
    quantity the reporter writes (kubelet counts a served resource itself)."""
    from scheduler.devices.node.resources import endpoints, status_resources, virtual_devices

    config = AgentConfig(node_name="gpu-1", devices=DeviceConfig(finegrained=True))
    served = {e.resource: e for e in endpoints(config)}
    assert "koordinator.sh/gpu" in served
    ids = [d.id for d in virtual_devices(served["koordinator.sh/gpu"], inventory(2), config)]
    assert len(ids) == 200 and ids[0].endswith("::0")
    assert "koordinator.sh/gpu" not in status_resources(config, inventory(2))
