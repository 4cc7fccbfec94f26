"""Invariants of gangpreempt and gangreclaim over random clusters.

Clusters: a few nodes full of running gangs in two queues (some PodGroups say
``volcano.sh/preemptable: "false"``), and pending gangs of higher priority. One session runs
enqueue and allocate, then the gang action(s); a sink records what is committed. Properties:

* no gang is left partially evicted: a victim job that met its ``minAvailable`` still does,
  unless none of its tasks holds a node any more;
* evictions happen only for a preemptor that then fits: every committed eviction goes with a
  job whose pending tasks are all pipelined (nominated) and which is pipelined, and no node's
  future idle is negative;
* gangpreempt takes only strictly lower-priority jobs of the preemptor's own queue, gangreclaim
  only jobs of other, reclaimable queues; neither takes a job whose PodGroup says no;
* gangreclaim respects the queues' deserved shares (capacity): a reclaiming queue ends within
  its deserved share, and a victim queue is not taken below it by more than one task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actions import ACTIONS
from scheduler.api.job import JobInfo
from scheduler.api.resource import MIN_RESOURCE
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, JobID, TaskStatus
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.conf import parse_conf
from scheduler.framework.gangevict import pending_for_eviction
from scheduler.framework.session import Session
from tests.builders import make_node, make_pod, make_podgroup
from tests.scenarios.gangevict_helpers import capacity_queue
from tests.scenarios.preemption_helpers import PRIORITIES, priority_classes

CAPACITY = """
actions: "enqueue, allocate, gangpreempt, gangreclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false}, {name: conformance},
            {name: capacity}]
- plugins: [{name: overcommit}, {name: drf, enablePreemptable: false}, {name: predicates},
            {name: nodeorder}]
"""

PROPORTION = """
actions: "enqueue, allocate, gangpreempt, gangreclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
"""

QUEUES = ["q1", "q2"]


def _whole(allow: bool) -> str:
    return "".join(f"- name: {action}\n  arguments: {{allowWholeBundle: {str(allow).lower()}}}\n"
                   for action in ("gangpreempt", "gangreclaim"))


@st.composite
def crowded_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    node_cpus = [draw(st.integers(2, 6)) for _ in range(draw(st.integers(1, 4)))]
    total = sum(node_cpus)
    objs: list[dict[str, Any]] = [*priority_classes()]
    first = draw(st.integers(1, max(total - 1, 1)))  # the two deserved shares fill the cluster
    objs += [capacity_queue(q, share, reclaimable=draw(st.integers(0, 3)) > 0)
             for q, share in zip(QUEUES, (first, max(total - first, 1)), strict=True)]
    busy = draw(st.sampled_from(QUEUES))  # most running gangs are its, most new ones the other's
    idle = QUEUES[1 - QUEUES.index(busy)]
    free = {f"n{i}": cpu for i, cpu in enumerate(node_cpus)}
    objs += [make_node(name, cpu=str(cpu), memory="64Gi") for name, cpu in free.items()]
    for j in range(draw(st.integers(1, 5))):
        cpu, priority = draw(st.integers(1, 2)), draw(st.sampled_from(["low-priority",
                                                                        "middle-priority"]))
        placed = []
        for t in range(draw(st.integers(1, 4))):
            node = next((n for n, room in free.items() if room >= cpu), None)
            if node is None:
                break
            free[node] -= cpu
            placed.append(make_pod(f"run{j}-{t}", cpu=str(cpu), group=f"run{j}", node=node,
                                   phase="Running", priority=PRIORITIES[priority],
                                   priority_class=priority))
        if not placed:
            continue
        group = make_podgroup(f"run{j}", min_member=draw(st.integers(1, len(placed))),
                              queue=draw(st.sampled_from([busy, busy, busy, idle])),
                              priority_class=priority, phase="Running")
        if draw(st.integers(0, 4)) == 0:
            group["metadata"]["annotations"] = {"volcano.sh/preemptable": "false"}
        objs += [group, *placed]
    for j in range(draw(st.integers(1, 3))):
        size, priority = draw(st.integers(1, 3)), draw(st.sampled_from(["middle-priority",
                                                                         "high-priority"]))
        objs.append(make_podgroup(f"new{j}", min_member=draw(st.integers(1, size)),
                                  queue=draw(st.sampled_from([idle, idle, busy])),
                                  priority_class=priority))
        objs += [make_pod(f"new{j}-{t}", cpu=str(draw(st.integers(1, 2))), group=f"new{j}",
                          priority=PRIORITIES[priority], priority_class=priority)
                 for t in range(size)]
    return objs


class RecordingSink:
    """Passes everything on, remembering the committed evictions."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.evictions: list[TaskInfo] = []

    def evict(self, task: TaskInfo, reason: str, **options: Any) -> None:
        self.evictions.append(task)
        self.inner.evict(task, reason, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def one_session(objs: Sequence[dict[str, Any]], conf: str, actions: Sequence[str]
                ) -> tuple[Session, RecordingSink, dict[JobID, int]]:
    """Enqueue and allocate, then ``actions``; also each job's ready count before them."""
    manifests = [Manifest(f"prop#{i}", obj) for i, obj in enumerate(objs)]
    _, _, scheduler = build_simulation(manifests, conf=parse_conf(conf), seed=1)
    session = scheduler.open_session()
    for name in ("enqueue", "allocate"):
        ACTIONS[name]().execute(session)
    ready = {uid: job.ready_task_num() for uid, job in session.jobs.items()}
    sink = RecordingSink(session.sink)
    session.sink = sink
    for name in actions:
        ACTIONS[name]().execute(session)
    return session, sink, ready


def preemptors(session: Session) -> list[JobInfo]:
    """Jobs with tasks pipelined onto a node evictions were made for."""
    return [job for job in session.jobs.values()
            if any(t.nominated_node for t in job.tasks_in(TaskStatus.PIPELINED))]


def allocated_cpu(session: Session, queue: str) -> float:
    return sum(t.resreq.milli_cpu for job in session.jobs.values() if job.queue == queue
               for t in job.tasks_in(ALLOCATED_STATUS | TaskStatus.PIPELINED))


PROPS = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ACTION_SETS = st.sampled_from([("gangpreempt",), ("gangreclaim",),
                               ("gangpreempt", "gangreclaim")])


@PROPS
@given(crowded_clusters(), st.sampled_from([CAPACITY, PROPORTION]), ACTION_SETS,
       st.booleans())
def test_no_gang_is_left_partially_evicted(objs: list[dict], conf: str,
                                           actions: tuple[str, ...], whole: bool) -> None:
    session, sink, ready = one_session(objs, conf + "configurations:\n" + _whole(whole),
                                       actions)
    for uid in {victim.job for victim in sink.evictions}:
        job = session.jobs[uid]
        if ready[uid] < job.min_available:
            continue  # below its gang before: nothing left to break
        assert job.ready_task_num() >= job.min_available or not job.tasks_in(ALLOCATED_STATUS), (
            f"{uid}: {job.ready_task_num()} of minAvailable {job.min_available} left running")


@PROPS
@given(crowded_clusters(), st.sampled_from([CAPACITY, PROPORTION]), ACTION_SETS)
def test_evictions_only_for_a_preemptor_that_then_fits(objs: list[dict], conf: str,
                                                       actions: tuple[str, ...]) -> None:
    session, sink, _ = one_session(objs, conf, actions)
    gainers = preemptors(session)
    if sink.evictions:
        assert gainers, "evictions committed for nobody"
    for job in gainers:
        assert session.job_pipelined(job), f"{job.uid} evicted for but not pipelined"
        assert pending_for_eviction(session, job) == [], f"{job.uid} still has pending tasks"
    for node in session.node_list:
        future = node.future_idle
        assert future.milli_cpu > -MIN_RESOURCE, f"{node.name} over-committed"


@PROPS
@given(crowded_clusters(), st.sampled_from([CAPACITY, PROPORTION]), ACTION_SETS)
def test_victims_come_from_the_right_jobs(objs: list[dict], conf: str,
                                          actions: tuple[str, ...]) -> None:
    session, sink, _ = one_session(objs, conf, actions)
    gainers = preemptors(session)
    for victim in sink.evictions:
        job = session.jobs[victim.job]
        assert job.podgroup.annotations.get("volcano.sh/preemptable") != "false"
        same_queue_higher = [g for g in gainers if g.queue == job.queue
                             and g.priority > job.priority]
        other_queue = [g for g in gainers if g.queue != job.queue]
        if actions == ("gangpreempt",):
            assert same_queue_higher, f"{victim.key} evicted for no higher job of its queue"
        elif actions == ("gangreclaim",):
            assert other_queue and session.queues[job.queue].reclaimable
        else:
            assert same_queue_higher or (other_queue and session.queues[job.queue].reclaimable)


@PROPS
@given(crowded_clusters())
def test_gangreclaim_respects_deserved_shares(objs: list[dict]) -> None:
    session, sink, _ = one_session(objs, CAPACITY, ["gangreclaim"])
    deserved = {q.uid: q.deserved.milli_cpu for q in session.queues.values()
                if q.deserved is not None}
    for queue in {job.queue for job in preemptors(session)}:
        assert allocated_cpu(session, queue) <= deserved[queue] + MIN_RESOURCE, (
            f"{queue} reclaimed beyond its deserved share")
    taken: dict[str, float] = {}
    for victim in sink.evictions:
        queue = session.jobs[victim.job].queue
        taken[queue] = max(taken.get(queue, 0.0), victim.resreq.milli_cpu)
    for queue, largest in taken.items():
        assert allocated_cpu(session, queue) + largest > deserved[queue] - MIN_RESOURCE, (
            f"{queue} reclaimed below its deserved share")
