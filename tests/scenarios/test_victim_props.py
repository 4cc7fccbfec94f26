"""Invariants of preempt and reclaim over random clusters.

Clusters: a few nodes full of running, low-priority gangs in one or two queues, and pending
higher-priority gangs. One session runs allocate, then preempt (or reclaim), and a sink
records what is committed. Properties:

* no eviction is committed on a node where the preemptor then does not fit (every node with a
  committed eviction holds a pipelined preemptor, and its future idle is not negative);
* preempt never evicts across queues;
* with gang's Preemptable on (and no later tier to overrule it), no victim gang drops below
  its ``minAvailable``;
* after evictions and the following cycles' allocations, no node is over-committed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actions import ACTIONS
from scheduler.api.pod import pod_requests
from scheduler.api.resource import MIN_RESOURCE, resource_from_list
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskStatus
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.conf import parse_conf
from scheduler.framework.eviction import EvictableIndex
from scheduler.framework.session import Session
from tests.builders import make_node, make_pod, make_podgroup, make_queue, simulate
from tests.scenarios.preemption_helpers import priority_classes

GANG_GUARDED = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""

VOLCANO_DEFAULT = """
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
"""

PRIORITY_NAMES = ["low-priority", "middle-priority", "high-priority"]
PRIORITY_VALUES = {"low-priority": 10, "middle-priority": 50, "high-priority": 100}


@st.composite
def crowded_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [*priority_classes(), make_queue("q2")]
    node_cpus = [draw(st.integers(2, 6)) for _ in range(draw(st.integers(1, 4)))]
    free = {f"n{i}": cpu for i, cpu in enumerate(node_cpus)}
    objs += [make_node(name, cpu=str(cpu), memory="16Gi") for name, cpu in free.items()]
    for j in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 4))
        cpu = draw(st.integers(1, 2))
        priority = draw(st.sampled_from(PRIORITY_NAMES[:2]))
        queue = draw(st.sampled_from(["default", "q2"]))
        placed = []
        for t in range(size):
            node = next((n for n, room in free.items() if room >= cpu), None)
            if node is None:
                break
            free[node] -= cpu
            placed.append(make_pod(
                f"run{j}-{t}", cpu=str(cpu), group=f"run{j}", node=node, phase="Running",
                priority=PRIORITY_VALUES[priority], priority_class=priority))
        if not placed:
            continue
        objs.append(make_podgroup(f"run{j}", min_member=draw(st.integers(1, len(placed))),
                                  queue=queue, priority_class=priority, phase="Running"))
        objs += placed
    for j in range(draw(st.integers(1, 3))):
        size = draw(st.integers(1, 3))
        priority = draw(st.sampled_from(PRIORITY_NAMES[1:]))
        queue = draw(st.sampled_from(["default", "q2"]))
        objs.append(make_podgroup(f"new{j}", min_member=draw(st.integers(1, size)),
                                  queue=queue, priority_class=priority))
        objs += [
            make_pod(f"new{j}-{t}", cpu=str(draw(st.integers(1, 3))), group=f"new{j}",
                     priority=PRIORITY_VALUES[priority], priority_class=priority)
            for t in range(size)
        ]
    return objs


class RecordingSink:
    """Passes everything to the cache, remembering the committed evictions."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.evictions: list[TaskInfo] = []

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.evictions.append(task)
        self.inner.evict(task, reason)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def one_session(objs: Sequence[dict[str, Any]], conf: str, actions: Sequence[str]
                ) -> tuple[Session, RecordingSink]:
    manifests = [Manifest(f"prop#{i}", obj) for i, obj in enumerate(objs)]
    _, _, scheduler = build_simulation(manifests, conf=parse_conf(conf), seed=1)
    session = scheduler.open_session()
    sink = RecordingSink(session.sink)
    session.sink = sink
    for name in actions:
        ACTIONS[name]().execute(session)
    return session, sink


def _queue_of(session: Session, task: TaskInfo) -> str:
    return session.jobs[task.job].queue


PROPS = settings(max_examples=80, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPS
@given(crowded_clusters(), st.sampled_from(["preempt", "reclaim"]))
def test_evictions_only_where_the_evictor_then_fits(objs: list[dict], action: str) -> None:
    session, sink = one_session(objs, VOLCANO_DEFAULT, ["enqueue", "allocate", action])
    for victim in sink.evictions:
        node = session.nodes[victim.node_name]
        pipelined = [t for t in node.tasks.values() if t.status is TaskStatus.PIPELINED]
        assert pipelined, f"{victim.key} evicted on {node.name} for nobody"
        future = node.future_idle
        assert future.milli_cpu > -MIN_RESOURCE and future.memory > -MIN_RESOURCE


@PROPS
@given(crowded_clusters())
def test_preempt_never_evicts_across_queues(objs: list[dict]) -> None:
    session, sink = one_session(objs, VOLCANO_DEFAULT, ["enqueue", "allocate", "preempt"])
    for victim in sink.evictions:
        node = session.nodes[victim.node_name]
        preemptor_queues = {
            _queue_of(session, t) for t in node.tasks.values()
            if t.status is TaskStatus.PIPELINED
        }
        assert _queue_of(session, victim) in preemptor_queues


@PROPS
@given(crowded_clusters())
def test_gang_preemptable_keeps_victim_gangs_at_min_available(objs: list[dict]) -> None:
    session, sink = one_session(objs, GANG_GUARDED, ["enqueue", "allocate", "preempt"])
    hit = {victim.job for victim in sink.evictions}
    for uid in hit:
        job = session.jobs[uid]
        assert job.ready_task_num() >= job.min_available, f"{uid} broken below its gang"


@PROPS
@given(crowded_clusters())
def test_no_node_over_committed_after_eviction_and_reallocation(objs: list[dict]) -> None:
    run = simulate(objs, conf=VOLCANO_DEFAULT, max_cycles=6)
    used: dict[str, float] = defaultdict(float)
    for pod in run.cluster.objects.get("Pod", {}).values():
        node = pod["spec"].get("nodeName")
        if node:
            used[node] += pod_requests(pod)[1].milli_cpu
    for node in run.cluster.objects["Node"].values():
        allocatable = resource_from_list(node["status"]["allocatable"])
        assert used[node["metadata"]["name"]] <= allocatable.milli_cpu + MIN_RESOURCE


def _outcome(session: Session, sink: RecordingSink) -> tuple[list[str], list[tuple[str, str]]]:
    pipelined = sorted(
        (task.name, task.node_name) for job in session.jobs.values()
        for task in job.task_status_index.get(TaskStatus.PIPELINED, {}).values())
    return sorted(t.name for t in sink.evictions), pipelined


@PROPS
@given(crowded_clusters(), st.sampled_from([GANG_GUARDED, VOLCANO_DEFAULT]),
       st.sampled_from(["preempt", "reclaim"]))
def test_the_evictable_bound_never_changes_a_decision(
    objs: list[dict], conf: str, action: str
) -> None:
    """The vector bound only skips nodes that would fail anyway: with an unlimited bound the
    same tasks are evicted and the same preemptors pipelined on the same nodes."""
    conf = conf.replace('actions: "enqueue, allocate, preempt"',
                        'actions: "enqueue, allocate, reclaim, preempt"')
    bounded = _outcome(*one_session(objs, conf, ["enqueue", "allocate", action]))
    original = EvictableIndex.total

    def unlimited(self: EvictableIndex, queues: Any, **kwargs: Any) -> Any:
        shape = (len(self.session.table), len(self.session.table.dims))
        return np.full(shape, np.inf)

    EvictableIndex.total = unlimited  # type: ignore[method-assign]
    try:
        unbounded = _outcome(*one_session(objs, conf, ["enqueue", "allocate", action]))
    finally:
        EvictableIndex.total = original  # type: ignore[method-assign]
    assert bounded == unbounded
