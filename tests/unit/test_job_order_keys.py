"""What the job-order heaps read is kept between changes, and equals reading it afresh.

``JobInfo.count`` keeps each status mask's count until the task index changes (and the job
counts its scheduling-gated tasks as they come and go), and a session
whose job orders are all key orders keeps each job's key until the job's tasks change: both
must give what a recount and the plugin-by-plugin comparison give, after any changes.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PodGroup
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import (
    ALLOCATED_STATUS,
    READY_STATUS,
    JobID,
    QueueID,
    TaskID,
    TaskStatus,
)
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.framework.heap import PriorityQueue
from scheduler.framework.session import Session
from tests.builders import conf_of, make_node, make_pod, make_podgroup, make_priority_class

STATUSES = list(TaskStatus)
MASKS = [READY_STATUS, ALLOCATED_STATUS, TaskStatus.PENDING, TaskStatus.PIPELINED,
         TaskStatus.PENDING | TaskStatus.PIPELINED | ALLOCATED_STATUS | TaskStatus.SUCCEEDED,
         *STATUSES]

_op = st.tuples(st.sampled_from(["add", "delete", "move"]), st.integers(0, 7),
                st.sampled_from(STATUSES), st.booleans())


def _task(i: int, status: TaskStatus, best_effort: bool) -> TaskInfo:
    request = Resource() if best_effort else Resource(1000, 0)
    return TaskInfo(uid=TaskID(f"t{i}"), name=f"t{i}", namespace="ns", job=JobID("ns/j"),
                    resreq=request, init_resreq=request, status=status, best_effort=best_effort,
                    sched_gated=i % 3 == 0)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(_op, max_size=40), min_available=st.integers(1, 4))
def test_kept_counts_equal_a_recount(ops: list[tuple[str, int, TaskStatus, bool]],
                                     min_available: int) -> None:
    job = JobInfo(uid=JobID("ns/j"), name="j", namespace="ns",
                  podgroup=PodGroup("j", "ns", min_member=min_available),
                  queue=QueueID("default"), min_available=min_available)
    for kind, i, status, best_effort in ops:
        before = job.revision
        task = job.tasks.get(TaskID(f"t{i}"))
        unmoved = task is not None and task.status is status
        if kind == "add" and task is None:
            job.add_task(_task(i, status, best_effort))
        elif kind == "delete" and task is not None:
            job.delete_task(task)
        elif kind == "move" and task is not None:
            job.update_task_status(task, status)
        else:
            continue
        assert job.revision == before if kind == "move" and unmoved else job.revision > before
        for mask in MASKS:
            fresh = sum(1 for t in job.tasks.values() if t.status & mask)
            assert job.count(mask) == fresh, mask
        ready = sum(1 for t in job.tasks.values() if t.status & READY_STATUS)
        pending_best_effort = sum(1 for t in job.tasks.values()
                                  if t.status is TaskStatus.PENDING and t.best_effort)
        assert job.is_ready() == (ready + pending_best_effort >= min_available)
        assert job.gated_tasks == sum(1 for t in job.tasks.values() if t.sched_gated)


CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def _cluster(seed: int) -> list[Manifest]:
    rng = random.Random(seed)
    objs = [make_node(f"n{i}", cpu="8") for i in range(4)]
    objs += [make_priority_class("low", 10), make_priority_class("high", 1000)]
    for j in range(12):
        size = rng.randint(1, 3)
        objs.append(make_podgroup(f"g{j}", min_member=rng.randint(1, size),
                                  priority_class=rng.choice(["low", "high", None])))
        for t in range(size):
            node = f"n{rng.randrange(4)}" if rng.random() < 0.3 else None
            objs.append(make_pod(f"g{j}-{t}", group=f"g{j}", cpu=rng.choice(["1", "2"]),
                                 node=node))
    return [Manifest(f"test#{i}", obj) for i, obj in enumerate(objs)]


def _chain(session: Session, left: JobInfo, right: JobInfo) -> int:
    keys, session._order_keys = session._order_keys, None
    try:
        return session.job_order(left, right)
    finally:
        session._order_keys = keys


def _same_order(session: Session) -> None:
    jobs = list(session.jobs.values())
    for left, right in itertools.permutations(jobs, 2):
        assert session.job_order(left, right) == _chain(session, left, right), (left.uid,
                                                                                right.uid)


def test_key_order_is_the_plugin_order_before_and_after_placements() -> None:
    for seed in range(4):
        _, _, scheduler = build_simulation(_cluster(seed), conf=conf_of(CONF), seed=seed)
        session = scheduler.open_session()
        assert session._order_keys is not None  # every job order here is a key order
        _same_order(session)
        for name in scheduler.conf.actions:
            scheduler.actions[name].execute(session)
            _same_order(session)  # kept keys of jobs whose tasks moved were renewed


def test_a_job_order_without_a_key_is_compared_plugin_by_plugin() -> None:
    conf = CONF.replace("{name: drf}", "{name: drf}, {name: sla, arguments: "
                        "{sla-waiting-time: 1h}}")
    _, _, scheduler = build_simulation(_cluster(0), conf=conf_of(conf), seed=0)
    session = scheduler.open_session()
    assert session._order_keys is None


def _outcome(seed: int, conf: str) -> tuple[dict[str, object], list[tuple[str, str]]]:
    cluster, cache, scheduler = build_simulation(_cluster(seed), conf=conf_of(conf), seed=seed)
    for _ in range(3):
        scheduler.run_once()
        cache.flush()
        cluster.clock.advance(1.0)
    binds = {key: pod["spec"].get("nodeName") for key, pod in cluster.objects["Pod"].items()}
    return binds, [(e["reason"], e["message"]) for e in cluster.events]


def test_keyed_job_queues_pop_as_comparator_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    """The actions' keyed job queues pop what comparator queues pop; no queued job's key
    changes while it waits (checked at every pop)."""
    pop = PriorityQueue.pop

    def checked(self: PriorityQueue[object]) -> object:
        if self._key is not None:
            assert all(entry[0] == self._key(entry[2]) for entry in self._heap)
        return pop(self)

    conf = CONF.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, backfill, preempt"')
    for seed in range(6):
        monkeypatch.setattr(PriorityQueue, "pop", checked)
        keyed = _outcome(seed, conf)
        monkeypatch.setattr(Session, "job_order_key", lambda self: None)
        assert keyed == _outcome(seed, conf)
        monkeypatch.undo()
