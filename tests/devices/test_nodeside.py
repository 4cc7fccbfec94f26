"""The node side of the handshake against hand-written annotations in the plugins' formats."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from scheduler.cluster.sim import ConflictError
from scheduler.devices.codec import ContainerDevice
from scheduler.devices.names import HAMI, VOLCANO, VGpuNames
from scheduler.devices.node.handshake import (
    FAILED,
    SUCCESS,
    HandshakeResult,
    handshake_gpushare,
    handshake_node,
)
from scheduler.devices.node.nodelock import format_lock
from tests.builders import make_node

NOW = 1_767_225_600.0
LOCKED = format_lock(NOW - 5)

VOLCANO_REGISTER = ("GPU-0aa1,10,32768,NVIDIA-Tesla V100-PCIE-32GB,true,hami-core:"
                    "GPU-1bb2,10,32768,NVIDIA-Tesla V100-PCIE-32GB,true,hami-core:")
HAMI_REGISTER = ('[{"id":"GPU-0aa1","count":10,"devmem":32768,"devcore":100,'
                 '"type":"NVIDIA-Tesla V100","mode":"hami-core","health":true},'
                 '{"id":"GPU-1bb2","index":1,"count":10,"devmem":32768,"devcore":100,'
                 '"type":"NVIDIA-Tesla V100","mode":"hami-core","health":true}]')
REGISTER = {"volcano": VOLCANO_REGISTER, "hami": HAMI_REGISTER}
# two containers: the first on both cards, the second on card 0
DEVICES = {
    "volcano": "GPU-0aa1,NVIDIA,4096,25:GPU-1bb2,NVIDIA,4096,25:;GPU-0aa1,NVIDIA,2048,0:",
    "hami": "GPU-0aa1,NVIDIA,4096,25:GPU-1bb2,NVIDIA,4096,25:;GPU-0aa1,NVIDIA,2048,0:;",
}
DECODED = (
    (ContainerDevice("GPU-0aa1", "NVIDIA", 4096, 25), ContainerDevice("GPU-1bb2", "NVIDIA",
                                                                      4096, 25)),
    (ContainerDevice("GPU-0aa1", "NVIDIA", 2048, 0),),
)


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[list[dict[str, Any]]]:
    """Keep log lines in memory: an earlier test may have pointed structlog at a closed stream."""
    with structlog.testing.capture_logs() as logs:
        yield logs


class FakeCluster:
    """Nodes and pods with the four calls of the handshake; Node replaces check versions."""

    def __init__(self, node: dict[str, Any]) -> None:
        node["metadata"]["resourceVersion"] = "1"
        self.nodes = {node["metadata"]["name"]: node}
        self.pods: list[dict[str, Any]] = []
        self.conflicts_to_inject = 0
        self.replaces = 0
        self.patches: list[tuple[str, dict[str, str | None]]] = []
        self.gone: set[str] = set()

    def get_node(self, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.nodes[name])

    def replace_node(self, node: dict[str, Any]) -> dict[str, Any]:
        self.replaces += 1
        name = node["metadata"]["name"]
        if self.conflicts_to_inject:
            self.conflicts_to_inject -= 1
            self.nodes[name]["metadata"]["resourceVersion"] += "'"
        if node["metadata"]["resourceVersion"] != self.nodes[name]["metadata"]["resourceVersion"]:
            raise ConflictError(f"node {name} changed")
        stored = copy.deepcopy(node)
        stored["metadata"]["resourceVersion"] += "+"
        self.nodes[name] = stored
        return copy.deepcopy(stored)

    def list_pods_on_node(self, node_name: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(p) for p in self.pods if p["spec"].get("nodeName") == node_name]

    def patch_pod_annotations(self, namespace: str, name: str,
                              annotations: dict[str, str | None]) -> None:
        key = f"{namespace}/{name}"
        if key in self.gone:
            raise LookupError(f"pods {name!r} not found")
        self.patches.append((key, dict(annotations)))
        pod = next(p for p in self.pods if p["metadata"]["name"] == name
                   and p["metadata"]["namespace"] == namespace)
        current = pod["metadata"]["annotations"]
        for k, v in annotations.items():
            if v is None:
                current.pop(k, None)
            else:
                current[k] = v

    def node_annotations(self, name: str = "gpu-1") -> dict[str, str]:
        return dict(self.nodes[name]["metadata"]["annotations"])

    def pod_annotations(self, name: str) -> dict[str, str]:
        return next(dict(p["metadata"]["annotations"]) for p in self.pods
                    if p["metadata"]["name"] == name)


def vgpu_cluster(names: VGpuNames, *, register: str | None = None,
                 lock: str | None = LOCKED) -> FakeCluster:
    annotations = {names.register: register if register is not None else REGISTER[names.profile]}
    if lock is not None:
        annotations[names.lock] = lock
    return FakeCluster(make_node("gpu-1", annotations=annotations))


def bound_pod(name: str, *, node: str = "gpu-1", phase: str = "Pending",
              annotations: dict[str, str], namespace: str = "ml") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations)},
        "spec": {"nodeName": node, "containers": [{"name": "main"}]},
        "status": {"phase": phase},
    }


def allocating(names: VGpuNames, *, bind_time: int, devices: str | None = None,
               phase: str = "allocating") -> dict[str, str]:
    annotations = {
        names.assigned_node: "gpu-1", names.assigned_time: str(bind_time),
        names.bind_phase: phase, names.bind_time: str(bind_time),
    }
    if devices is not None:
        annotations[names.to_allocate] = devices
        annotations[names.allocated] = devices
    return annotations


PROFILES = pytest.mark.parametrize("names", [VOLCANO, HAMI], ids=lambda n: n.profile)


@PROFILES
def test_success_decodes_devices_marks_success_and_releases_the_lock(names: VGpuNames) -> None:
    cluster = vgpu_cluster(names, lock=f"{LOCKED},ml,train-0" if names.lock_with_owner else LOCKED)
    cluster.pods.append(bound_pod("train-0", annotations=allocating(
        names, bind_time=100, devices=DEVICES[names.profile])))
    result = handshake_node(cluster, "gpu-1", names, NOW)
    assert result == HandshakeResult(pod="ml/train-0", outcome=SUCCESS, devices=DECODED,
                                     lock_released=True)
    assert cluster.pod_annotations("train-0")[names.bind_phase] == "success"
    assert names.lock not in cluster.node_annotations()
    assert cluster.node_annotations()[names.register] == REGISTER[names.profile]


@PROFILES
def test_oldest_bind_time_first(names: VGpuNames) -> None:
    cluster = vgpu_cluster(names)
    for name, stamp in (("late", 300), ("first", 100), ("middle", 200)):
        cluster.pods.append(bound_pod(name, annotations=allocating(
            names, bind_time=stamp, devices=DEVICES[names.profile])))
    served = []
    for _ in range(4):
        result = handshake_node(cluster, "gpu-1", names, NOW)
        served.append(result.pod if result else None)
    assert served == ["ml/first", "ml/middle", "ml/late", None]


@PROFILES
def test_only_allocating_pods_of_this_node_count(names: VGpuNames) -> None:
    cluster = vgpu_cluster(names)
    devices = DEVICES[names.profile]
    cluster.pods += [
        bound_pod("done", annotations=allocating(names, bind_time=1, devices=devices,
                                                  phase="success")),
        bound_pod("failed-before", annotations=allocating(names, bind_time=2, devices=devices,
                                                           phase="failed")),
        bound_pod("elsewhere", node="gpu-2", annotations=allocating(names, bind_time=3,
                                                                    devices=devices)),
        bound_pod("finished", phase="Succeeded", annotations=allocating(names, bind_time=4,
                                                                         devices=devices)),
        bound_pod("plain", annotations={}),
    ]
    assert handshake_node(cluster, "gpu-1", names, NOW) is None
    assert cluster.patches == []


@PROFILES
def test_nothing_pending_leaves_the_lock(names: VGpuNames) -> None:
    """A lock without a pending pod belongs to a bind in flight; it expires by its TTL."""
    cluster = vgpu_cluster(names)
    assert handshake_node(cluster, "gpu-1", names, NOW) is None
    assert cluster.node_annotations()[names.lock] == LOCKED


@PROFILES
def test_pending_pods_before_running_ones(names: VGpuNames) -> None:
    cluster = vgpu_cluster(names)
    devices = DEVICES[names.profile]
    cluster.pods += [
        bound_pod("running-old", phase="Running", annotations=allocating(names, bind_time=1,
                                                                         devices=devices)),
        bound_pod("pending-new", annotations=allocating(names, bind_time=9, devices=devices)),
    ]
    first = handshake_node(cluster, "gpu-1", names, NOW)
    second = handshake_node(cluster, "gpu-1", names, NOW)
    assert (first and first.pod, second and second.pod) == ("ml/pending-new", "ml/running-old")


def test_hami_serves_the_pod_named_by_the_lock_first() -> None:
    cluster = vgpu_cluster(HAMI, lock=f"{LOCKED},ml,second")
    for name, stamp in (("first", 100), ("second", 200)):
        cluster.pods.append(bound_pod(name, annotations=allocating(
            HAMI, bind_time=stamp, devices=DEVICES["hami"])))
    result = handshake_node(cluster, "gpu-1", HAMI, NOW)
    assert result is not None and result.pod == "ml/second" and result.lock_released


def test_hami_does_not_release_a_lock_held_by_another_pod() -> None:
    cluster = vgpu_cluster(HAMI, lock=f"{LOCKED},ml,someone-else")
    cluster.pods.append(bound_pod("train-0", annotations=allocating(
        HAMI, bind_time=100, devices=DEVICES["hami"])))
    result = handshake_node(cluster, "gpu-1", HAMI, NOW)
    assert result is not None and result.outcome == SUCCESS and not result.lock_released
    assert cluster.node_annotations()[HAMI.lock] == f"{LOCKED},ml,someone-else"


BROKEN = [
    pytest.param(None, "no ", id="missing"),
    pytest.param("", "no ", id="empty"),
    pytest.param("GPU-0aa1,NVIDIA,4096:", "unreadable", id="three-fields"),
    pytest.param("GPU-0aa1,NVIDIA,lots,0:", "unreadable", id="memory-not-int"),
    pytest.param("garbage", "unreadable", id="garbage"),
    pytest.param(";", "no device", id="no-devices"),
    pytest.param("GPU-ffff,NVIDIA,1024,0:", "GPU-ffff, which node gpu-1 does not register",
                 id="unknown-card"),
]


@PROFILES
@pytest.mark.parametrize(("devices", "fragment"), BROKEN)
def test_broken_annotation_fails_the_pod_and_still_releases(names: VGpuNames,
                                                            devices: str | None,
                                                            fragment: str) -> None:
    cluster = vgpu_cluster(names, lock=f"{LOCKED},ml,bad" if names.lock_with_owner else LOCKED)
    annotations = allocating(names, bind_time=100)
    if devices is not None:
        annotations[names.to_allocate] = devices
    cluster.pods.append(bound_pod("bad", annotations=annotations))
    result = handshake_node(cluster, "gpu-1", names, NOW)
    assert result is not None and result.outcome == FAILED and result.lock_released
    assert fragment in result.reason
    assert "ml/bad" in result.reason or "gpu-1" in result.reason
    assert cluster.pod_annotations("bad")[names.bind_phase] == "failed"
    assert names.lock not in cluster.node_annotations()


@PROFILES
@pytest.mark.parametrize("register", ["", "GPU-0aa1,ten", "[{"], ids=["empty", "short", "json"])
def test_malformed_node_register_fails_the_pod(names: VGpuNames, register: str) -> None:
    cluster = vgpu_cluster(names, register=register)
    cluster.pods.append(bound_pod("p", annotations=allocating(
        names, bind_time=1, devices=DEVICES[names.profile])))
    result = handshake_node(cluster, "gpu-1", names, NOW)
    assert result is not None and result.outcome == FAILED
    assert "gpu-1" in result.reason and names.register in result.reason


def test_broken_pod_does_not_block_the_next_one() -> None:
    cluster = vgpu_cluster(VOLCANO)
    bad = allocating(VOLCANO, bind_time=1)
    bad[VOLCANO.to_allocate] = "nonsense"
    cluster.pods += [bound_pod("bad", annotations=bad),
                     bound_pod("good", annotations=allocating(VOLCANO, bind_time=2,
                                                              devices=DEVICES["volcano"]))]
    outcomes = [handshake_node(cluster, "gpu-1", VOLCANO, NOW) for _ in range(2)]
    assert [(r.pod, r.outcome) for r in outcomes if r] == [("ml/bad", FAILED),
                                                          ("ml/good", SUCCESS)]


def test_unreadable_bind_time_is_served_first() -> None:
    cluster = vgpu_cluster(VOLCANO)
    odd = allocating(VOLCANO, bind_time=5, devices=DEVICES["volcano"])
    odd[VOLCANO.bind_time] = "yesterday"
    cluster.pods += [bound_pod("normal", annotations=allocating(VOLCANO, bind_time=1,
                                                                devices=DEVICES["volcano"])),
                     bound_pod("odd", annotations=odd)]
    result = handshake_node(cluster, "gpu-1", VOLCANO, NOW)
    assert result is not None and result.pod == "ml/odd"


@PROFILES
def test_lock_release_retries_conflicts(names: VGpuNames) -> None:
    cluster = vgpu_cluster(names, lock=f"{LOCKED},ml,p" if names.lock_with_owner else LOCKED)
    cluster.conflicts_to_inject = 3
    cluster.pods.append(bound_pod("p", annotations=allocating(
        names, bind_time=1, devices=DEVICES[names.profile])))
    sleeps: list[float] = []
    result = handshake_node(cluster, "gpu-1", names, NOW, sleep=sleeps.append)
    assert result is not None and result.lock_released
    assert cluster.replaces == 4 and sleeps == [0.1] * 3
    assert names.lock not in cluster.node_annotations()


def test_lock_release_gives_up_after_five_conflicts_without_raising() -> None:
    cluster = vgpu_cluster(VOLCANO)
    cluster.conflicts_to_inject = 5
    cluster.pods.append(bound_pod("p", annotations=allocating(
        VOLCANO, bind_time=1, devices=DEVICES["volcano"])))
    result = handshake_node(cluster, "gpu-1", VOLCANO, NOW, sleep=lambda _: None)
    assert result is not None and result.outcome == SUCCESS and not result.lock_released


def test_vanished_pod_still_releases_the_lock() -> None:
    cluster = vgpu_cluster(VOLCANO)
    cluster.pods.append(bound_pod("p", annotations=allocating(
        VOLCANO, bind_time=1, devices=DEVICES["volcano"])))
    cluster.gone.add("ml/p")
    result = handshake_node(cluster, "gpu-1", VOLCANO, NOW)
    assert result is not None and result.lock_released and "could not update pod" in result.reason


def test_handshake_through_the_embedded_cluster() -> None:
    from scheduler.cluster.manifests import Manifest
    from scheduler.cluster.sim import SimCluster

    cluster = SimCluster()
    node = make_node("gpu-1", annotations={VOLCANO.register: VOLCANO_REGISTER,
                                           VOLCANO.lock: LOCKED})
    pod = bound_pod("p", annotations=allocating(VOLCANO, bind_time=1, devices=DEVICES["volcano"]))
    cluster.load([Manifest(source="t", obj=node), Manifest(source="t", obj=pod)])
    result = handshake_node(cluster, "gpu-1", VOLCANO, cluster.clock())
    assert result is not None and result.outcome == SUCCESS and result.lock_released
    assert VOLCANO.lock not in cluster.get_node("gpu-1")["metadata"]["annotations"]


# -- GPU share ---------------------------------------------------------------------------------
def gpushare_cluster(cards: int = 2) -> FakeCluster:
    node = make_node("gpu-1", annotations={"gpu": LOCKED},
                     extra={"volcano.sh/gpu-memory": str(16384 * cards),
                            "volcano.sh/gpu-number": str(cards)})
    return FakeCluster(node)


def share_pod(name: str, *, index: str, nanos: int, assigned: str | None = None
              ) -> dict[str, Any]:
    annotations = {"volcano.sh/gpu-index": index, "volcano.sh/predicate-time": str(nanos)}
    if assigned is not None:
        annotations["volcano.sh/gpu-assigned"] = assigned
    return bound_pod(name, annotations=annotations)


def test_gpushare_marks_the_oldest_unassigned_pod() -> None:
    cluster = gpushare_cluster()
    cluster.pods += [share_pod("b", index="1", nanos=2_000),
                     share_pod("a", index="0", nanos=1_000),
                     share_pod("done", index="0", nanos=10, assigned="true")]
    result = handshake_gpushare(cluster, "gpu-1", NOW)
    assert result == HandshakeResult(pod="ml/a", outcome=SUCCESS, cards=(0,), lock_released=True)
    assert cluster.pod_annotations("a")["volcano.sh/gpu-assigned"] == "true"
    assert "gpu" not in cluster.node_annotations()
    second = handshake_gpushare(cluster, "gpu-1", NOW)
    assert second is not None and second.pod == "ml/b" and not second.lock_released
    assert handshake_gpushare(cluster, "gpu-1", NOW) is None


def test_gpushare_number_mode_index_list() -> None:
    cluster = gpushare_cluster(cards=4)
    cluster.pods.append(share_pod("n", index="0,2,3", nanos=1, assigned="false"))
    result = handshake_gpushare(cluster, "gpu-1", NOW)
    assert result is not None and result.cards == (0, 2, 3)


def test_gpushare_broken_index_is_passed_over() -> None:
    cluster = gpushare_cluster(cards=2)
    cluster.pods += [share_pod("bad", index="x", nanos=1),
                     share_pod("gone-card", index="5", nanos=2),
                     share_pod("good", index="1", nanos=3)]
    result = handshake_gpushare(cluster, "gpu-1", NOW)
    assert result is not None and (result.pod, result.outcome) == ("ml/good", SUCCESS)
    assert "ml/bad" in result.reason and "ml/gone-card" in result.reason
    assert "volcano.sh/gpu-assigned" not in cluster.pod_annotations("bad")
    cluster.nodes["gpu-1"]["metadata"]["annotations"]["gpu"] = LOCKED
    only_broken = handshake_gpushare(cluster, "gpu-1", NOW)
    assert only_broken is not None and only_broken.outcome == FAILED
    assert only_broken.pod == "ml/bad" and only_broken.lock_released
