"""Backfill releases best-effort tasks an earlier action left pipelined and places them."""

import random
from typing import Any

from actions.backfill import Backfill
from scheduler.api.job import JobInfo
from scheduler.api.node import node_from_object
from scheduler.api.podgroup import PHASE_RUNNING, PodGroup
from scheduler.api.queue import QueueInfo
from scheduler.api.task import task_from_pod
from scheduler.api.types import JobID, QueueID, TaskStatus
from scheduler.framework.session import Session
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.statement import Statement
from tests.builders import make_node, make_pod


class _Sink:
    def __init__(self) -> None:
        self.bound: list[str] = []

    def bind(self, tasks: list[Any]) -> None:
        self.bound += [t.name for t in tasks]

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def test_pipelined_best_effort_task_is_placed_again() -> None:
    """Volcano ``backfill.go`` pickUpPendingTasks: best-effort tasks in ``Pipelined`` are
    un-pipelined (``stmt.UnPipeline``) and tried again with the pending ones."""
    node = node_from_object(make_node("n1", cpu="4"))
    job = JobInfo(
        uid=JobID("default/j"),
        name="j",
        namespace="default",
        podgroup=PodGroup("j", "default", phase=PHASE_RUNNING),
        queue=QueueID("default"),
    )
    task = task_from_pod(make_pod("be", cpu=None, group="j"))
    job.add_task(task)
    sink = _Sink()
    session = Session(
        Snapshot(
            nodes=[node],
            jobs={job.uid: job},
            queues={QueueID("default"): QueueInfo(uid=QueueID("default"), name="default")},
        ),
        tiers=[],
        sink=sink,  # type: ignore[arg-type]
        clock=lambda: 0.0,
        rng=random.Random(0),
    )
    Statement(session).pipeline(task, node)
    assert task.status is TaskStatus.PIPELINED
    Backfill().execute(session)
    assert sink.bound == ["be"]
    assert task.status is TaskStatus.BINDING
    assert node.pipelined.is_empty()
