"""GPU share ``Allocate`` contract, following volcano-device-plugin's
``pkg/plugin/nvidia/server.go`` ``Allocate`` and ``utils.go`` (``IsGPUAssignedPod``,
``GetPredicateTimeFromPodAnnotation``, ``GetGPUIDsFromPodAnnotation``) in volcano-sh/devices,
with the ``gpu`` node lock released as ``lock.ReleaseNodeLock`` does."""

from __future__ import annotations

import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.node.allocate import AllocationError, Allocator
from scheduler.devices.node.nodelock import format_lock
from scheduler.devices.node.resources import AgentConfig, Endpoint
from tests.builders import make_node
from tests.devices.nodeagent.cluster import MemoryCluster, pod
from tests.devices.nodeagent.conftest import inventory

NOW = 1_767_225_600.0
MEMORY = Endpoint("volcano.sh/gpu-memory", "gpushare")
NUMBER = Endpoint("volcano.sh/gpu-number", "gpushare")


def setup(*, number: bool = False, factor: int = 1) -> tuple[MemoryCluster, Allocator]:
    cluster = MemoryCluster(make_node("gpu-1", annotations={"gpu": format_lock(NOW - 5)}))
    config = AgentConfig(node_name="gpu-1", gpu_memory_factor=factor, devices=DeviceConfig(
        gpu_sharing=not number, gpu_number=number, node_lock=True))
    return cluster, Allocator(access=cluster, config=config, inventory=lambda: inventory(4),
                              clock=lambda: NOW, sleep=lambda _: None)


def share(name: str, *, index: str, nanos: int, memory: str = "4096",
          assigned: str | None = None, containers: int = 1) -> dict:
    annotations = {"volcano.sh/gpu-index": index, "volcano.sh/predicate-time": str(nanos)}
    if assigned is not None:
        annotations["volcano.sh/gpu-assigned"] = assigned
    return pod(name, annotations=annotations, containers=[
        (f"c{i}", {"volcano.sh/gpu-memory": memory}) for i in range(containers)])


def test_memory_mode_answer_assigned_mark_and_unlock() -> None:
    cluster, allocator = setup(factor=2)
    cluster.pods += [share("late", index="0", nanos=2_000), share("early", index="2", nanos=1_000),
                     share("done", index="1", nanos=10, assigned="true")]
    (answer,) = allocator.allocate(MEMORY, [[f"2-{j}" for j in range(4096)]])
    assert dict(answer.envs) == {"NVIDIA_VISIBLE_DEVICES": "2",
                                 "VOLCANO_GPU_ALLOCATED": str(4096 * 2),
                                 "VOLCANO_GPU_MEMORY_TOTAL": "16384"}
    assert answer.pod == "ml/early" and not answer.mounts and not answer.devices
    assert cluster.pod_annotations("early")["volcano.sh/gpu-assigned"] == "true"
    assert "gpu" not in cluster.node_annotations()
    (again,) = allocator.allocate(MEMORY, [["x"] * 4096])
    assert again.pod == "ml/late"


def test_request_size_picks_the_pod() -> None:
    cluster, allocator = setup()
    cluster.pods += [share("big", index="0", nanos=1, memory="8000"),
                     share("small", index="1", nanos=2, memory="1000")]
    (answer,) = allocator.allocate(MEMORY, [["x"] * 1000])
    assert answer.pod == "ml/small"


def test_number_mode_lists_every_card() -> None:
    cluster, allocator = setup(number=True)
    cluster.pods.append(pod("n", annotations={"volcano.sh/gpu-index": "0,2,3",
                                              "volcano.sh/predicate-time": "5"},
                            containers=[("main", {"volcano.sh/gpu-number": "3"})]))
    (answer,) = allocator.allocate(NUMBER, [["a", "b", "c"]])
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == "0,2,3"
    assert answer.envs["VOLCANO_GPU_ALLOCATED"] == "3"


def test_two_gpu_containers_mark_the_pod_assigned_after_the_second() -> None:
    cluster, allocator = setup()
    cluster.pods.append(share("two", index="1", nanos=1, containers=2))
    allocator.allocate(MEMORY, [["x"] * 4096])
    assert "volcano.sh/gpu-assigned" not in cluster.pod_annotations("two")
    (second,) = allocator.allocate(MEMORY, [["x"] * 4096])
    assert second.container == "c1"
    assert cluster.pod_annotations("two")["volcano.sh/gpu-assigned"] == "true"


@pytest.mark.parametrize(("index", "fragment"), [
    ("x", "unreadable volcano.sh/gpu-index 'x'"),
    ("7", "names a card node gpu-1 does not have (it has 4)")])
def test_malformed_or_unknown_index_names_the_pod_and_unlocks(index: str, fragment: str) -> None:
    cluster, allocator = setup()
    cluster.pods.append(share("bad", index=index, nanos=1))
    with pytest.raises(AllocationError, match="pod ml/bad") as caught:
        allocator.allocate(MEMORY, [["x"] * 4096])
    assert fragment in str(caught.value)
    assert "gpu" not in cluster.node_annotations()
    assert "volcano.sh/gpu-assigned" not in cluster.pod_annotations("bad")


def test_no_matching_pod_unlocks_and_says_what_was_asked() -> None:
    cluster, allocator = setup()
    cluster.pods.append(share("other", index="0", nanos=1, memory="2000"))
    with pytest.raises(AllocationError, match=r"asking for 4096 volcano\.sh/gpu-memory"):
        allocator.allocate(MEMORY, [["x"] * 4096])
    assert "gpu" not in cluster.node_annotations()


def test_preferred_ids_are_on_the_chosen_card() -> None:
    cluster, allocator = setup()
    cluster.pods.append(share("p", index="3", nanos=1, memory="2"))
    available = ["0-0", "0-1", "3-0", "3-1", "3-2"]
    assert allocator.preferred(MEMORY, available, [], 2) == ["3-0", "3-1"]
