"""Objects that name what does not exist, or that the scheduler cannot read, are left out and
explained on the objects they affect; nothing else changes.

A PodGroup that cannot be read or that was deleted while its pods wait, a PodGroup of a queue
that does not exist, a Koordinator ``Device`` object of a node that does not exist or with a
malformed ``spec.devices``, and (capacity with ``enableHierarchy``) queues whose ``spec.parent``
forms a cycle or names a queue that does not exist.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from scheduler.api.queue import queue_from_object
from scheduler.api.types import QueueID
from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import SimCluster
from scheduler.cluster.simulation import build_simulation
from scheduler.conf import load_conf, parse_conf
from scheduler.framework.queuetree import QueueTreeError, build_queue_tree, build_usable_tree
from scheduler.loop import Scheduler
from tests.builders import Obj, make_node, make_pod, make_podgroup, simulate

ROOT = Path(__file__).resolve().parents[2]
FINEGRAINED = (ROOT / "conf" / "finegrained.conf").read_text()


def _cluster(objs: list[Obj], conf: str | None = None
             ) -> tuple[SimCluster, SchedulerCache, Scheduler]:
    manifests = [Manifest(f"test#{i}", obj) for i, obj in enumerate(objs)]
    cluster, cache, scheduler = build_simulation(
        manifests, conf=load_conf(None) if conf is None else parse_conf(conf))
    cluster.take_changes()
    return cluster, cache, scheduler


def _cycle(cache: SchedulerCache, scheduler: Scheduler, times: int = 1) -> None:
    for _ in range(times):
        scheduler.run_once()
        cache.flush()


def _condition(cluster: SimCluster, pod: str) -> Mapping[str, Any]:
    status = cluster.objects["Pod"][f"default/{pod}"].get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"), {})


def _events(cluster: SimCluster, *, kind: str, name: str) -> list[Obj]:
    return [e for e in cluster.events
            if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name]


# -- PodGroups ----------------------------------------------------------------------------------

def test_pods_of_a_podgroup_that_cannot_be_read_get_a_condition_naming_it_and_the_field() -> None:
    cluster, cache, scheduler = _cluster([make_node("n1"), make_pod("p0", group="bad"),
                                          *([make_podgroup("ok"), make_pod("ok-0", group="ok")])])
    broken = make_podgroup("bad", min_member=-3)
    with capture_logs() as logs:
        cache.apply("ADDED", "PodGroup", broken)
        cache.apply("ADDED", "PodGroup", copy.deepcopy(broken))  # the same problem: said once
    _cycle(cache, scheduler, 2)
    assert cluster.objects["Pod"]["default/ok-0"]["spec"]["nodeName"] == "n1"
    condition = _condition(cluster, "p0")
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert condition["message"] == ("PodGroup default/bad: field spec.minMember: must be an "
                                    "integer >= 0, got -3; the PodGroup is ignored until it is "
                                    "fixed")
    (event,) = _events(cluster, kind="Pod", name="p0")
    assert event["reason"] == "FailedScheduling" and event["message"] == condition["message"]
    assert [e["reason"] for e in _events(cluster, kind="PodGroup", name="bad")] == ["Invalid"]
    assert len([entry for entry in logs if entry["event"] == "object ignored"]) == 1

    fixed = make_podgroup("bad")
    cache.apply("MODIFIED", "PodGroup", fixed)
    cluster.objects["PodGroup"]["default/bad"] = fixed
    _cycle(cache, scheduler)
    assert cluster.objects["Pod"]["default/p0"]["spec"].get("nodeName") == "n1"


def test_pods_arriving_after_their_unreadable_podgroup_are_told_and_its_deletion_too() -> None:
    cluster, cache, scheduler = _cluster([make_node("n1")])
    broken = make_podgroup("bad", min_resources={"cpu": "-1"})
    cache.apply("ADDED", "PodGroup", broken)
    _cycle(cache, scheduler, 2)  # no pod yet
    pod = make_pod("p0", group="bad")
    cluster.load([Manifest("late", pod)])
    cache.apply("ADDED", "Pod", cluster.objects["Pod"]["default/p0"])
    _cycle(cache, scheduler)
    assert _condition(cluster, "p0")["message"].startswith(
        "PodGroup default/bad: field spec.minResources: ")
    cache.apply("DELETED", "PodGroup", broken)  # read by name only
    _cycle(cache, scheduler)
    assert "was deleted" in _condition(cluster, "p0")["message"]
    assert "PodGroup default/bad" not in cache.broken and cache.unreadable_groups == {}


def test_a_broken_update_of_a_podgroup_keeps_its_last_readable_version() -> None:
    cluster, cache, scheduler = _cluster([make_node("n1"), make_podgroup("pg", min_member=2),
                                          make_pod("p0", group="pg")])
    _cycle(cache, scheduler)
    cache.apply("MODIFIED", "PodGroup", make_podgroup("pg", min_member=-1))
    _cycle(cache, scheduler)
    assert "2 minAvailable" in _condition(cluster, "p0")["message"]  # still the gang's reason
    assert cache.unreadable_groups == {}


def test_pods_of_a_deleted_podgroup_are_told_it_was_deleted() -> None:
    cluster, cache, scheduler = _cluster([make_node("n1"), make_podgroup("pg", min_member=5),
                                          make_pod("p0", group="pg")])
    _cycle(cache, scheduler)
    assert "5 minAvailable" in _condition(cluster, "p0")["message"]
    podgroup = cluster.objects["PodGroup"].pop("default/pg")
    with capture_logs() as logs:
        cache.apply("DELETED", "PodGroup", podgroup)
    _cycle(cache, scheduler, 2)
    message = ("PodGroup default/pg (annotation scheduling.k8s.io/group-name) was deleted; "
               "the pod waits until a PodGroup of that name exists")
    assert _condition(cluster, "p0")["message"] == message
    assert [e["message"] for e in _events(cluster, kind="Pod", name="p0")][-1] == message
    assert [(e["event"], e["podgroup"]) for e in logs
            if e["log_level"] == "warning"] == [("PodGroup deleted while it still has pods",
                                                 "default/pg")]
    cache.apply("DELETED", "Pod", cluster.objects["Pod"].pop("default/p0"))
    _cycle(cache, scheduler)
    assert cache.deleted_groups == {}  # nothing left to tell


def test_a_deleted_podgroup_without_pods_is_forgotten_quietly() -> None:
    cluster, cache, scheduler = _cluster([make_node("n1"), make_podgroup("pg")])
    with capture_logs() as logs:
        cache.apply("DELETED", "PodGroup", cluster.objects["PodGroup"].pop("default/pg"))
        _cycle(cache, scheduler)
    assert cache.deleted_groups == {}
    assert not [e for e in logs if e["log_level"] == "warning"]


def test_pods_of_a_podgroup_whose_queue_does_not_exist_are_told_the_queue() -> None:
    run = simulate([make_node("n1"), make_podgroup("pg", queue="ghost"),
                    make_pod("p0", group="pg"), make_pod("free")])
    message = ("queue ghost of PodGroup default/pg does not exist; create it or change "
               "spec.queue")
    assert run.reason("p0") == message
    assert [e["message"] for e in run.events("FailedScheduling")
            if e["involvedObject"]["name"] == "p0"] == [message]
    assert run.node_of("free") == "n1"


# -- Device objects -----------------------------------------------------------------------------

def _gpu_node(name: str) -> Obj:
    return make_node(name, cpu="16", memory="64Gi", extra={
        "nvidia.com/gpu": "1", "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory-ratio": "100", "koordinator.sh/gpu-memory": "80Gi"})


def _device(node: str, devices: Any) -> Obj:
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
            "metadata": {"name": node}, "spec": {"devices": devices}}


GPU = [{"type": "gpu", "minor": 0, "health": True,
        "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi",
                      "koordinator.sh/gpu-memory-ratio": "100"}}]


def _gpu_pod(name: str) -> Obj:
    return make_pod(name, limits={"nvidia.com/gpu": "1"})


def _placements(run: Any) -> dict[str, str]:
    return {name: node for name, node in run.binds().items()}


def test_a_device_of_a_node_that_does_not_exist_is_ignored_with_one_warning() -> None:
    valid = [_gpu_node("g1"), _device("g1", GPU), _gpu_pod("a"), _gpu_pod("b"), make_pod("c")]
    alone = simulate(valid, conf=FINEGRAINED)
    with capture_logs() as logs:
        run = simulate([*valid, _device("gone", GPU)], conf=FINEGRAINED)
    assert _placements(run) == _placements(alone)
    assert run.reason("b") == alone.reason("b")
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [(e["event"], e["kind"], list(e["objects"])) for e in warnings] == [
        ("left out of scheduling", "Device", ["gone"])]
    (event,) = run.events("NodeNotFound")
    assert event["involvedObject"]["kind"] == "Device"
    assert event["involvedObject"]["name"] == "gone"
    assert event["message"] == ("Device gone: metadata.name names node gone, which does not "
                                "exist; the object is ignored")


def test_a_device_object_whose_node_arrives_later_is_not_reported() -> None:
    _, cache, scheduler = _cluster([], conf=FINEGRAINED)
    with capture_logs() as logs:
        cache.apply("ADDED", "Device", _device("g1", GPU))
        cache.apply("ADDED", "Node", _gpu_node("g1"))
        _cycle(cache, scheduler, 2)
    assert not [e for e in logs if e["log_level"] == "warning"]
    assert cache.left_out.get("Device", {}) == {}
    with capture_logs() as logs:
        cache.apply("DELETED", "Node", _gpu_node("g1"))
        _cycle(cache, scheduler, 2)
    assert [e["objects"] for e in logs if e["log_level"] == "warning"] == [{
        "g1": "Device g1: metadata.name names node g1, which does not exist; "
              "the object is ignored"}]


def test_a_device_of_an_unreadable_node_is_not_called_a_device_of_a_missing_node() -> None:
    broken = _gpu_node("g1")
    broken["status"]["allocatable"]["cpu"] = "lots"
    _, cache, scheduler = _cluster([], conf=FINEGRAINED)
    cache.apply("ADDED", "Device", _device("g1", GPU))
    with capture_logs() as logs:
        cache.apply("ADDED", "Node", broken)
        _cycle(cache, scheduler)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["object ignored"]


def test_a_device_whose_devices_field_is_not_a_list_is_reported_and_offers_nothing() -> None:
    with capture_logs() as logs:
        run = simulate([_gpu_node("g1"), _device("g1", {"type": "gpu", "minor": 0}),
                        _gpu_pod("a"), make_pod("c")], conf=FINEGRAINED)
    message = ("Device g1: field spec.devices: must be a list of devices, got dict; the node "
               "is treated as having no devices")
    assert [e["message"] for e in logs if e["log_level"] == "warning"] == [message]
    assert [e["message"] for e in run.events() if e["involvedObject"]["kind"] == "Device"] == [
        message]
    assert run.node_of("c") == "g1"
    assert run.node_of("a") is None
    assert "Insufficient gpu devices" in run.reason("a")


# -- Queues of a broken hierarchy ---------------------------------------------------------------

HIERARCHY = (ROOT / "conf" / "capacity-hierarchy.conf").read_text() \
    .replace(", reclaim", "")
SAMPLE = [doc for doc in yaml.safe_load_all(
    (ROOT / "conf" / "samples" / "capacity-hierarchy.yaml").read_text()) if doc]


def _queue(name: str, parent: str | None = None, **spec: Any) -> Obj:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": {**spec, **({"parent": parent} if parent else {})}}


def _queues(*objs: Obj) -> dict[QueueID, Any]:
    return {info.uid: info for info in map(queue_from_object, objs)}


def test_the_usable_tree_leaves_out_cycles_missing_parents_and_what_hangs_below() -> None:
    tree = build_usable_tree(_queues(
        _queue("a"), _queue("b", "a"), _queue("qself", "qself"), _queue("qx", "qy"),
        _queue("qy", "qx"), _queue("c1", "qx"), _queue("c2", "c1"), _queue("lost", "nowhere"),
        _queue("l2", "lost"), _queue("root", "qx")))
    assert tree.ancestors == {"root": (), "a": ("root",), "b": ("root", "a")}
    assert tree.children == {"root": ["a"], "a": ["b"], "b": []}
    assert tree.left_out == {
        "qself": "Queue qself: spec.parent forms a cycle (qself -> qself)",
        "qx": "Queue qx: spec.parent forms a cycle (qx -> qy -> qx)",
        "qy": "Queue qy: spec.parent forms a cycle (qy -> qx -> qy)",
        "c1": "Queue c1: spec.parent leads to queue qx, whose spec.parent forms a cycle "
              "(qx -> qy -> qx)",
        "c2": "Queue c2: spec.parent leads to queue qx, whose spec.parent forms a cycle "
              "(qx -> qy -> qx)",
        "lost": "Queue lost: spec.parent names queue 'nowhere', which does not exist",
        "l2": "Queue l2: spec.parent leads to queue lost, whose spec.parent names queue "
              "'nowhere', which does not exist",
    }
    with pytest.raises(QueueTreeError, match=r"^Queue c1: spec.parent leads to queue qx"):
        build_queue_tree(_queues(_queue("qx", "qy"), _queue("qy", "qx"), _queue("c1", "qx")))


BROKEN = {
    "self-cycle": [_queue("qself", "qself", deserved={"cpu": "1"})],
    "two-cycle": [_queue("qx", "qy"), _queue("qy", "qx"), _queue("qchild", "qx")],
    "missing-parent": [_queue("lost", "nowhere", capability={"cpu": "1"}),
                       _queue("below", "lost")],
}


def _broken_pods(queues: list[Obj]) -> list[Obj]:
    """One pod per queue; the first PodGroup with minResources (admission asks the queue
    plugin), the others without (admitted unasked, unless the job is invalid)."""
    pods = []
    for i, queue in enumerate(queues):
        name = queue["metadata"]["name"]
        pods.append(make_podgroup(f"{name}-pg", queue=name,
                                  min_resources={"cpu": "1"} if i == 0 else None))
        pods.append(make_pod(f"{name}-0", group=f"{name}-pg", cpu="1"))
    return pods


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_broken_queues_are_left_out_and_the_rest_schedules_as_if_they_were_absent(
        case: str) -> None:
    broken = BROKEN[case]
    alone = simulate(SAMPLE, conf=HIERARCHY)
    with capture_logs() as logs:
        run = simulate([*SAMPLE, *broken, *_broken_pods(broken)], conf=HIERARCHY)
    valid = {name: node for name, node in run.binds().items()
             if not any(name.startswith(q["metadata"]["name"]) for q in broken)}
    assert valid == alone.binds()
    names = [q["metadata"]["name"] for q in broken]
    reasons = build_usable_tree(_queues(*SAMPLE[2:6], *broken)).left_out
    for name in names:
        assert run.node_of(f"{name}-0") is None
        expected = f"{reasons[name]}; the queue's jobs are left out of scheduling"
        assert run.reason(f"{name}-0") == expected
        group = run.podgroup(f"{name}-pg")["status"]
        assert group["phase"] == "Pending"  # never admitted
        (condition,) = group["conditions"]
        assert (condition["type"], condition["reason"], condition["message"]) == (
            "Unschedulable", "InvalidQueue", expected)
        (event,) = [e for e in run.events("Invalid") if e["involvedObject"]["name"] == name]
        assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Queue"
        assert event["message"] == reasons[name]
    warnings = [e for e in logs if e["log_level"] in ("warning", "error")]
    assert [(e["event"], e["kind"], sorted(e["objects"])) for e in warnings] == [
        ("left out of scheduling", "Queue", sorted(names))]


def test_a_fixed_queue_schedules_again_and_the_fix_is_logged() -> None:
    cluster, cache, scheduler = _cluster(
        [make_node("n1"), _queue("qx", "qy"), _queue("qy", "qx"), *_broken_pods([_queue("qx")])],
        conf=HIERARCHY)
    _cycle(cache, scheduler, 2)
    assert "forms a cycle" in _condition(cluster, "qx-0")["message"]
    with capture_logs() as logs:
        fixed = cluster.objects["Queue"]["qy"] = _queue("qy")
        cache.apply("MODIFIED", "Queue", fixed)
        _cycle(cache, scheduler, 2)
    assert cluster.objects["Pod"]["default/qx-0"]["spec"].get("nodeName") == "n1"
    told = [(e["event"], e["objects"]) for e in logs if "left out" in e["event"]]
    assert told == [("no longer left out of scheduling", ["qx", "qy"])]
