"""The capacity plugin's answers on hand-made sessions: allocatable, preemptive, reclaimable,
enqueueable, queue order and victim queue order, flat and hierarchical.

Reference: Volcano ``pkg/scheduler/plugins/capacity/capacity.go`` — ``buildQueueAttrs``,
``buildHierarchicalQueueAttrs``/``checkHierarchicalQueue``, the functions registered in
``OnSessionOpen`` (AllocatableFn, PreemptiveFn, ReclaimableFn, JobEnqueueableFn, QueueOrderFn,
VictimQueueOrderFn) and ``updateQueueAttrShare``/``compareShareWithDeserved``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from plugins.capacity import Capacity, CapacityArgs
from scheduler.api.job import JobInfo
from scheduler.api.node import node_from_object
from scheduler.api.podgroup import podgroup_from_object
from scheduler.api.queue import queue_from_object
from scheduler.api.task import TaskInfo, task_from_pod
from scheduler.api.types import JobID, QueueID, Vote
from scheduler.conf import parse_conf
from scheduler.framework.queuetree import QueueTreeError, build_queue_tree
from scheduler.framework.session import PluginEntry, Session
from scheduler.framework.snapshot import Snapshot
from tests.builders import make_node, make_pod, make_podgroup, make_queue

Obj = dict[str, Any]


def queue(name: str, *, parent: str | None = None, priority: int | None = None,
          state: str | None = None, **resources: Any) -> Obj:
    """A Queue with ``deserved``, ``capability`` and ``guarantee`` resource lists."""
    obj = make_queue(name, priority=priority, state=state)
    for key in ("deserved", "capability"):
        if key in resources:
            obj["spec"][key] = dict(resources[key])
    if "guarantee" in resources:
        obj["spec"]["guarantee"] = {"resource": dict(resources["guarantee"])}
    if parent is not None:
        obj["spec"]["parent"] = parent
    return obj


def job(name: str, queue_name: str, *, running: int = 0, pending: int = 0, cpu: str | None = "1",
        min_resources: Mapping[str, str] | None = None, phase: str = "Running",
        **pod_kwargs: Any) -> list[Obj]:
    """A PodGroup with ``running`` pods on node ``n1`` and ``pending`` pods."""
    group = make_podgroup(name, queue=queue_name, min_resources=min_resources, phase=phase)
    pods = [make_pod(f"{name}-r{i}", cpu=cpu, group=name, node="n1", **pod_kwargs)
            for i in range(running)]
    pods += [make_pod(f"{name}-p{i}", cpu=cpu, group=name, **pod_kwargs) for i in range(pending)]
    return [group, *pods]


def open_session(objects: Iterable[Obj], *, hierarchy: bool = False,
                 level: int = 0) -> tuple[Session, Capacity]:
    nodes, jobs, queues, tasks = [], {}, {}, []
    for obj in objects:
        kind = obj["kind"]
        if kind == "Node":
            nodes.append(node_from_object(obj))
        elif kind == "Queue":
            info = queue_from_object(obj)
            queues[info.uid] = info
        elif kind == "PodGroup":
            pg = podgroup_from_object(obj)
            uid = JobID(f"{pg.namespace}/{pg.name}")
            jobs[uid] = JobInfo(uid=uid, name=pg.name, namespace=pg.namespace, podgroup=pg,
                                queue=QueueID(pg.queue), min_available=pg.min_member)
        else:
            tasks.append(task_from_pod(obj))
    by_name = {node.name: node for node in nodes}
    for task in tasks:
        jobs[task.job].add_task(task)
        if task.node_name:
            by_name[task.node_name].add_task(task)
    plugin = Capacity(CapacityArgs(ancestor_reclaim_level=level))
    sink: Any = None
    session = Session(Snapshot(nodes=nodes, jobs=jobs, queues=queues),
                      tiers=[[PluginEntry(plugin, {"enableHierarchy": hierarchy})]],
                      sink=sink, clock=lambda: 0.0, rng=random.Random(0))
    session.open()
    return session, plugin


def task(session: Session, name: str) -> TaskInfo:
    return next(t for j in session.jobs.values() for t in j.tasks.values() if t.name == name)


def pending(session: Session, job_name: str) -> TaskInfo:
    return next(t for t in session.jobs[JobID(f"default/{job_name}")].tasks.values()
                if not t.node_name)


def q(session: Session, name: str) -> Any:
    return session.queues[QueueID(name)]


NODE = make_node("n1", cpu="8", memory="32Gi", extra={"nvidia.com/gpu": "4"})


# -- flat ---------------------------------------------------------------------------------------
def test_capability_not_deserved_is_the_allocation_limit() -> None:
    ssn, cap = open_session([NODE, queue("q1", deserved={"cpu": "2"}, capability={"cpu": "4"}),
                             *job("a", "q1", running=3, pending=2)])
    attr = cap.attrs[QueueID("q1")]
    assert attr.real_capability.milli_cpu == 4000 and attr.deserved.milli_cpu == 2000
    assert attr.share == 1.5
    nxt = pending(ssn, "a")
    assert cap.allocatable(q(ssn, "q1"), nxt)
    ssn.place(nxt, ssn.nodes["n1"], nxt.status.ALLOCATED)
    assert attr.allocated.milli_cpu == 4000 and attr.share == 2.0
    assert not cap.allocatable(q(ssn, "q1"), pending(ssn, "a"))


def test_other_queues_guarantee_caps_real_capability_and_deserved() -> None:
    ssn, cap = open_session([NODE, queue("q1", deserved={"cpu": "6"}),
                             queue("q2", guarantee={"cpu": "6"}),
                             *job("a", "q1", running=2, pending=1)])
    attr = cap.attrs[QueueID("q1")]
    assert attr.real_capability.milli_cpu == 2000
    assert attr.deserved.milli_cpu == 2000  # capped by what q2's guarantee leaves
    assert not cap.allocatable(q(ssn, "q1"), pending(ssn, "a"))


def test_closed_queue_allocates_nothing() -> None:
    ssn, cap = open_session([NODE, queue("q1", state="Closed"), *job("a", "q1", pending=1)])
    assert not cap.allocatable(q(ssn, "q1"), pending(ssn, "a"))
    assert cap.job_enqueueable(ssn.jobs[JobID("default/a")]) is Vote.REJECT


@pytest.mark.parametrize(
    ("running", "capability", "expected"),
    [(2, None, True), (4, None, False), (2, {"cpu": "2"}, False)],
    ids=["under-deserved", "at-deserved", "beyond-capability"],
)
def test_preemptive_while_a_requested_dimension_is_under_deserved(
        running: int, capability: Mapping[str, str] | None, expected: bool) -> None:
    spec: dict[str, Any] = {"deserved": {"cpu": "4"}}
    if capability is not None:
        spec["capability"] = capability
    ssn, cap = open_session([NODE, queue("q1", **spec), *job("a", "q1", running=running,
                                                              pending=1)])
    assert cap.preemptive(q(ssn, "q1"), pending(ssn, "a")) is expected


def test_preemptive_needs_one_requested_dimension_within_deserved() -> None:
    gpu_pod: dict[str, Any] = {"limits": {"nvidia.com/gpu": "1"}}
    ssn, cap = open_session([NODE, queue("q1", deserved={"cpu": "4"}),
                             *job("a", "q1", running=1, pending=1, **gpu_pod)])
    # gpu is not deserved at all, but cpu is still within deserved: the queue may reclaim
    assert cap.preemptive(q(ssn, "q1"), pending(ssn, "a"))
    ssn2, cap2 = open_session([NODE, queue("q1", deserved={"cpu": "1"}),
                               *job("a", "q1", running=1, pending=1, **gpu_pod)])
    assert not cap2.preemptive(q(ssn2, "q1"), pending(ssn2, "a"))


def _reclaim(objects: list[Obj], reclaimer_job: str, **kwargs: Any) -> list[str]:
    ssn, cap = open_session(objects, **kwargs)
    reclaimer = pending(ssn, reclaimer_job)
    candidates = [t for j in ssn.jobs.values() for t in j.tasks.values()
                  if t.node_name and j.queue != ssn.jobs[reclaimer.job].queue]
    victims, vote = cap.reclaimable(reclaimer, candidates)
    assert vote is Vote.PERMIT
    return sorted(v.name for v in victims)


def test_reclaim_takes_victims_only_down_to_deserved() -> None:
    victims = _reclaim([NODE, queue("q1", deserved={"cpu": "2"}), queue("q2", deserved={"cpu": "6"}),
                        *job("a", "q1", running=4), *job("b", "q2", pending=1)], "b")
    assert len(victims) == 2 and all(v.startswith("a-r") for v in victims)


def test_reclaim_never_takes_a_queue_below_its_guarantee() -> None:
    # q1 is over its deserved cpu all along, but its memory guarantee stops the second victim
    objs = [NODE, queue("q1", deserved={"cpu": "1"}, guarantee={"memory": "3Gi"}),
            queue("q2", deserved={"cpu": "5"}),
            *job("a", "q1", running=4, memory="1Gi"), *job("b", "q2", pending=1)]
    assert len(_reclaim(objs, "b")) == 1


def test_best_effort_queue_and_undeserved_dimensions_are_always_victims() -> None:
    objs = [NODE, queue("be"), queue("gpuonly", deserved={"nvidia.com/gpu": "2"}),
            queue("q2", deserved={"cpu": "4"}), *job("a", "be", running=2),
            *job("g", "gpuonly", running=2), *job("b", "q2", pending=1)]
    assert len(_reclaim(objs, "b")) == 4


def test_reclaim_skips_victims_sharing_no_resource_with_the_reclaimer() -> None:
    objs = [NODE, queue("be"), queue("q2", deserved={"nvidia.com/gpu": "2"}),
            *job("a", "be", running=2),
            *job("b", "q2", pending=1, cpu=None, limits={"nvidia.com/gpu": "1"})]
    assert _reclaim(objs, "b") == []


def test_queue_order_priority_then_share_then_deserved_before_best_effort() -> None:
    ssn, cap = open_session([
        NODE, queue("low", deserved={"cpu": "4"}), queue("busy", deserved={"cpu": "2"}),
        queue("vip", priority=10, deserved={"cpu": "1"}), queue("be"),
        queue("full", deserved={"cpu": "1"}),
        *job("l", "low", running=1), *job("b", "busy", running=2), *job("v", "vip", running=1),
        *job("e", "be", running=1), *job("f", "full", running=1)])
    names = ["be", "busy", "full", "low", "vip"]
    ordered = sorted((q(ssn, n) for n in names), key=functools.cmp_to_key(cap.queue_order))
    # vip by priority; low (share .25); then busy, full (share 1, with deserved) before be
    assert [x.name for x in ordered][:2] == ["vip", "low"]
    assert [x.name for x in ordered][-1] == "be"


def test_enqueue_checks_min_resources_against_real_capability() -> None:
    ssn, cap = open_session([
        NODE, queue("q1", deserved={"cpu": "2"}, capability={"cpu": "4"}),
        *job("run", "q1", running=1),
        *(obj for n in ("j1", "j2", "j3")
          for obj in job(n, "q1", pending=2, phase="Pending", min_resources={"cpu": "2"})),
        *job("free", "q1", pending=9, phase="Pending")])
    j1, j2, j3 = (ssn.jobs[JobID(f"default/{n}")] for n in ("j1", "j2", "j3"))
    assert cap.job_enqueueable(ssn.jobs[JobID("default/free")]) is Vote.PERMIT
    # "run" has no minResources, so all it holds is elastic and does not count against j1, j2
    for admitted in (j1, j2):
        assert cap.job_enqueueable(admitted) is Vote.PERMIT
        cap.job_enqueued(admitted)
    assert cap.attrs[QueueID("q1")].inqueue.milli_cpu == 4000
    assert cap.job_enqueueable(j3) is Vote.REJECT
    assert j3.enqueue_message == "queue resource quota insufficient: insufficient cpu"


def test_a_negative_ancestor_reclaim_level_is_a_warning_and_zero() -> None:
    """``capacity.go`` (``New``): a negative ``ancestorReclaimLevel`` is logged and 0 is used."""
    conf = parse_conf(
        "tiers: [{plugins: [{name: capacity, arguments: {ancestorReclaimLevel: -1}}]}]")
    assert any("'ancestorReclaimLevel' is -1" in w and "0 is used" in w for w in conf.warnings)


# -- hierarchical -------------------------------------------------------------------------------
TREE = [
    NODE,
    queue("eng", capability={"cpu": "6"}, deserved={"cpu": "6"}, guarantee={"cpu": "2"}),
    queue("dev", parent="eng", deserved={"cpu": "2"}),
    queue("prod", parent="eng", deserved={"cpu": "3"}, guarantee={"cpu": "2"}),
    queue("research", deserved={"cpu": "2"}),
]


def test_children_inherit_capability_and_are_bounded_by_their_parent() -> None:
    _, cap = open_session([*TREE, *job("d", "dev", running=1)], hierarchy=True)
    dev, prod = cap.attrs[QueueID("dev")], cap.attrs[QueueID("prod")]
    assert dev.ancestors == ("root", "eng")
    assert dev.capability.milli_cpu == 6000  # inherited from eng
    assert dev.capability.memory == cap.attrs[QueueID("root")].capability.memory
    assert dev.real_capability.milli_cpu == 4000  # 6 less prod's guarantee of 2
    assert prod.real_capability.milli_cpu == 6000
    assert cap.attrs[QueueID("eng")].allocated.milli_cpu == 1000  # rolled up
    assert cap.attrs[QueueID("root")].deserved.milli_cpu == 8000  # sum of eng and research


def test_only_leaf_queues_allocate_and_ancestors_bound_them() -> None:
    ssn, cap = open_session([*TREE, *job("d", "dev", running=3),
                             *job("p", "prod", pending=1, cpu="3")], hierarchy=True)
    p = pending(ssn, "p")
    assert not cap.allocatable(q(ssn, "eng"), p)
    # prod alone could take 3 cpu (real capability 6), but eng would hold 3 + 3 = 6 ≤ 6 ...
    assert cap.allocatable(q(ssn, "prod"), p)
    ssn.place(p, ssn.nodes["n1"], p.status.ALLOCATED)
    extra = task_from_pod(make_pod("p-extra", cpu="1", group="p"))
    ssn.jobs[JobID("default/p")].add_task(extra)
    # ... and nothing more: eng is at its capability of 6
    assert not cap.allocatable(q(ssn, "prod"), extra)


@pytest.mark.parametrize(
    "broken",
    [
        [queue("orphan", parent="nowhere")],
        [queue("a", parent="b"), queue("b", parent="a")],
    ],
    ids=["missing-parent", "cycle"],
)
def test_a_broken_branch_is_left_out_and_the_rest_schedules(broken: list[Obj]) -> None:
    """Volcano's ``buildHierarchicalQueueAttrs`` stops the whole plugin on a missing parent or
    a cycle; here only the broken queues (and those below them) are left out, so one Queue
    cannot stop the cluster (docs/queues.md)."""
    jobs = [*job("d", "dev", pending=1), *job("x", broken[0]["metadata"]["name"], pending=1)]
    ssn, cap = open_session([*TREE, *broken, *jobs], hierarchy=True)
    assert cap.ready
    assert {str(uid) for uid in cap.left_out} == {o["metadata"]["name"] for o in broken}
    assert cap.allocatable(q(ssn, "dev"), pending(ssn, "d"))
    valid = cap.job_valid(ssn.jobs[JobID("default/x")])
    assert valid is not None and valid[0] == "InvalidQueue"


def test_a_job_in_a_parent_queue_stops_the_tree() -> None:
    _, cap = open_session([*TREE, *job("e", "eng", pending=1)], hierarchy=True)
    assert not cap.ready


def test_an_explicit_root_queue_bounds_everything() -> None:
    ssn, cap = open_session([*TREE, queue("root", capability={"cpu": "3"}),
                             *job("r", "research", running=3, pending=1)], hierarchy=True)
    assert cap.attrs[QueueID("eng")].capability.milli_cpu == 6000
    assert not cap.allocatable(q(ssn, "research"), pending(ssn, "r"))


def test_hierarchical_queue_order_compares_the_subtrees() -> None:
    ssn, cap = open_session([*TREE, *job("d", "dev", running=1), *job("p", "prod", running=1),
                             *job("r", "research", running=2)], hierarchy=True)
    # research share 1.0; eng share 2/6 (dev .5, prod .33): a dev job goes first
    assert cap.queue_order(q(ssn, "dev"), q(ssn, "research")) == -1
    assert cap.queue_order(q(ssn, "prod"), q(ssn, "dev")) == -1
    assert cap.queue_order(q(ssn, "dev"), q(ssn, "eng")) == -1  # leaves first


def test_victim_queue_order_takes_from_the_closest_relative_first() -> None:
    ssn, cap = open_session([*TREE, *job("d", "dev", pending=1)], hierarchy=True)
    assert cap.victim_queue_order(q(ssn, "prod"), q(ssn, "research"), q(ssn, "dev")) == -1
    assert cap.victim_queue_order(q(ssn, "research"), q(ssn, "prod"), q(ssn, "dev")) == 1
    flat_ssn, flat = open_session([*TREE, *job("d", "dev", pending=1)])
    assert flat.victim_queue_order(q(flat_ssn, "prod"), q(flat_ssn, "research"),
                                   q(flat_ssn, "dev")) == 0


@pytest.mark.parametrize(("level", "expected"), [(0, False), (1, True)])
def test_ancestor_reclaim_level_lets_a_queue_reclaim_through_its_parent(
        level: int, expected: bool) -> None:
    # dev is at its deserved 2, but eng (deserved 6) holds only 2
    ssn, cap = open_session([*TREE, *job("d", "dev", running=2, pending=1)], hierarchy=True,
                            level=level)
    assert cap.preemptive(q(ssn, "dev"), pending(ssn, "d")) is expected


@pytest.mark.parametrize(("level", "victims"), [(0, 2), (1, 0)])
def test_ancestor_reclaim_level_protects_a_subtree_within_its_deserved(
        level: int, victims: int) -> None:
    # dev holds 4 (over its 2) but eng holds 4 of its 6: from research only level 0 reclaims
    objs = [*TREE, *job("d", "dev", running=4), *job("r", "research", pending=1)]
    assert len(_reclaim(objs, "r", hierarchy=True, level=level)) == victims


@pytest.mark.parametrize(("gate", "inqueue"), [("example.com/wait", 2000),
                                               ("scheduling.volcano.sh/queue-allocation-gate",
                                                4000)])
def test_inqueue_reservation_leaves_out_pods_held_by_a_scheduling_gate(gate: str,
                                                                        inqueue: int) -> None:
    """``DeductSchGatedResources``: gated pods cannot start, so their requests are not held in
    reserve, except pods held only by Volcano's own queue-allocation gate."""
    objs = job("j", "q1", pending=4, phase="Inqueue", min_resources={"cpu": "4"})
    for pod in objs[1:3]:
        pod["spec"]["schedulingGates"] = [{"name": gate}]
    _, cap = open_session([NODE, queue("q1", deserved={"cpu": "8"}), *objs])
    assert cap.attrs[QueueID("q1")].inqueue.milli_cpu == inqueue


def test_reclaim_takes_the_last_tasks_in_task_order_first() -> None:
    """``BuildVictimsPriorityQueue``: within a job the reverse task order (the highest pod index
    of a ``<job>-<role>-<i>`` name first), so the queue keeps its first tasks."""
    objs = [NODE, queue("q1", deserved={"cpu": "2"}), queue("q2", deserved={"cpu": "6"}),
            make_podgroup("a", queue="q1", phase="Running"),
            *(make_pod(f"a-w-{i}", cpu="1", group="a", node="n1") for i in (2, 0, 3, 1)),
            *job("b", "q2", pending=1)]
    assert _reclaim(objs, "b") == ["a-w-2", "a-w-3"]


def test_queue_tree_links_parents_and_names_what_is_broken() -> None:
    queues = {q.uid: q for q in map(queue_from_object, [
        queue("root", parent="elsewhere"), queue("a"), queue("b", parent="a"),
        queue("c", parent="b"), queue("d", parent="root")])}
    tree = build_queue_tree(queues)
    assert tree.ancestors[QueueID("c")] == ("root", "a", "b")
    assert tree.ancestors[QueueID("root")] == ()  # root's own parent is never followed
    assert tree.children[QueueID("root")] == ["a", "d"]
    assert [tree.is_leaf(QueueID(n)) for n in ("a", "c", "d")] == [False, True, True]
    assert tree.top_down()[:3] == ["root", "a", "d"]
    assert build_queue_tree({}).ancestors == {"root": ()}  # implicit root
    cycle = {q.uid: q for q in map(queue_from_object, [
        queue("x", parent="y"), queue("y", parent="z"), queue("z", parent="x")])}
    with pytest.raises(QueueTreeError, match=r"Queue x: spec.parent forms a cycle \(x -> y -> z -> x\)"):
        build_queue_tree(cycle)
