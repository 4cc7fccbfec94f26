"""The statement operations preempt and reclaim rely on: per-node statements merged into the
job's, a single eviction undone (the dry run's reprieve), and the nominated node a pipeline
after evictions records (Volcano's ``Statement.Pipeline(task, node, evictionOccurred)`` and
``Statement.Merge``)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.api.job import JobInfo
from scheduler.api.node import node_from_object
from scheduler.api.podgroup import PodGroup
from scheduler.api.task import TaskInfo, task_from_pod
from scheduler.api.types import JobID, QueueID, TaskStatus
from scheduler.framework.session import Session
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.statement import Statement
from tests.builders import make_node, make_pod


class Sink:
    def __init__(self) -> None:
        self.evicted: list[str] = []

    def bind(self, tasks: Any) -> None: ...

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.evicted.append(task.name)

    def update_podgroup(self, job: Any, event: Any) -> None: ...

    def update_task_condition(self, task: Any, *, reason: str, message: str) -> None: ...

    def update_queue_allocated(self, queue: Any, allocated: Any) -> None: ...


def _session() -> tuple[Session, Sink, dict[str, TaskInfo]]:
    node = node_from_object(make_node("n1", cpu="2"))
    job = JobInfo(uid=JobID("default/j"), name="j", namespace="default",
                  podgroup=PodGroup("j", "default", min_member=1), queue=QueueID("default"))
    tasks = {}
    for name, on_node in (("v1", True), ("v2", True), ("p", False)):
        task = task_from_pod(make_pod(name, cpu="1", group="j", node="n1" if on_node else None,
                                      phase="Running" if on_node else None))
        job.add_task(task)
        if on_node:
            node.add_task(task)
        tasks[name] = task
    sink = Sink()
    session = Session(Snapshot(nodes=[node], jobs={job.uid: job}), tiers=[], sink=sink,
                      clock=lambda: 0.0, rng=random.Random(0))
    return session, sink, tasks


def test_merged_node_statement_commits_with_the_job() -> None:
    session, sink, tasks = _session()
    node = session.nodes["n1"]
    job_statement, node_statement = Statement(session), Statement(session)
    node_statement.evict(tasks["v1"], "preempt")
    assert node_statement.pipeline(tasks["p"], node, eviction_occurred=True) is None
    job_statement.merge(node_statement)
    assert len(node_statement) == 0 and len(job_statement) == 2
    assert tasks["p"].nominated_node == "n1"
    job_statement.commit()
    assert sink.evicted == ["v1"]
    assert tasks["p"].status is TaskStatus.PIPELINED


def test_discard_restores_the_nominated_node_and_the_victims() -> None:
    session, sink, tasks = _session()
    tasks["p"].nominated_node = "elsewhere"
    statement = Statement(session)
    statement.evict(tasks["v1"], "preempt")
    statement.pipeline(tasks["p"], session.nodes["n1"], eviction_occurred=True)
    assert tasks["p"].nominated_node == "n1"
    statement.discard()
    assert tasks["p"].nominated_node == "elsewhere"
    assert tasks["v1"].status is TaskStatus.RUNNING and tasks["p"].status is TaskStatus.PENDING
    assert session.nodes["n1"].future_idle.milli_cpu == 0
    assert sink.evicted == []


def test_pipeline_without_eviction_keeps_the_nominated_node() -> None:
    session, _, tasks = _session()
    statement = Statement(session)
    statement.pipeline(tasks["p"], session.nodes["n1"])
    assert tasks["p"].nominated_node == ""


def test_unevict_undoes_one_eviction_only() -> None:
    session, _, tasks = _session()
    statement = Statement(session)
    statement.evict(tasks["v1"], "dry run")
    statement.evict(tasks["v2"], "dry run")
    statement.unevict(tasks["v1"])
    assert tasks["v1"].status is TaskStatus.RUNNING
    assert tasks["v2"].status is TaskStatus.RELEASING
    assert statement.evicted() == [tasks["v2"]]
    with pytest.raises(ValueError, match="not evicted"):
        statement.unevict(tasks["v1"])
    statement.discard()
    assert session.nodes["n1"].releasing.milli_cpu == 0


def test_allocation_version_moves_with_every_change() -> None:
    session, _, tasks = _session()
    before = session.allocation_version
    statement = Statement(session)
    statement.evict(tasks["v1"], "preempt")
    statement.discard()
    assert session.allocation_version == before + 2
