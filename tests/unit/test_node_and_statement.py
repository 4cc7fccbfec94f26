import random

from scheduler.api.job import JobInfo
from scheduler.api.node import node_from_object
from scheduler.api.podgroup import PodGroup
from scheduler.api.task import task_from_pod
from scheduler.api.types import JobID, QueueID, TaskStatus
from scheduler.framework.session import Session
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.statement import Statement
from tests.builders import make_node, make_pod


class RecordingSink:
    def __init__(self) -> None:
        self.bound: list[str] = []
        self.evicted: list[str] = []

    def bind(self, tasks):  # type: ignore[no-untyped-def]
        self.bound += [t.name for t in tasks]

    def evict(self, task, reason):  # type: ignore[no-untyped-def]
        self.evicted.append(task.name)

    def update_podgroup(self, job, event): ...  # type: ignore[no-untyped-def]

    def update_task_condition(self, task, *, reason, message): ...  # type: ignore[no-untyped-def]

    def update_queue_allocated(self, queue, allocated): ...  # type: ignore[no-untyped-def]


def test_node_accounting_for_releasing_and_pipelined() -> None:
    node = node_from_object(make_node("n1", cpu="4"))
    running = task_from_pod(make_pod("r", cpu="1", node="n1"))
    releasing = task_from_pod(make_pod("x", cpu="2", node="n1", deleting=True))
    assert releasing.status is TaskStatus.RELEASING
    pipelined = task_from_pod(make_pod("p", cpu="3"))
    pipelined.status = TaskStatus.PIPELINED
    for task in (running, releasing, pipelined):
        node.add_task(task)
    assert node.idle.milli_cpu == 1000
    assert node.used.milli_cpu == 3000
    assert node.releasing.milli_cpu == 2000
    assert node.pipelined.milli_cpu == 3000
    assert node.future_idle.milli_cpu == 0
    node.remove_task(releasing)
    assert node.idle.milli_cpu == 3000 and node.releasing.milli_cpu == 0


def _session() -> tuple[Session, RecordingSink, JobInfo]:
    nodes = [node_from_object(make_node("n1", cpu="4"))]
    job = JobInfo(
        uid=JobID("default/j"),
        name="j",
        namespace="default",
        podgroup=PodGroup("j", "default", min_member=2),
        queue=QueueID("default"),
        min_available=2,
    )
    for name in ("a", "b"):
        job.add_task(task_from_pod(make_pod(name, cpu="1", group="j")))
    running = task_from_pod(make_pod("r", cpu="1", group="j", node="n1"))
    job.add_task(running)
    nodes[0].add_task(running)
    sink = RecordingSink()
    session = Session(
        Snapshot(nodes=nodes, jobs={job.uid: job}),
        tiers=[],
        sink=sink,
        clock=lambda: 0.0,
        rng=random.Random(0),
    )
    return session, sink, job


def test_discard_undoes_in_reverse_order() -> None:
    session, sink, job = _session()
    node = session.nodes["n1"]
    a, b, r = (next(t for t in job.tasks.values() if t.name == n) for n in ("a", "b", "r"))
    statement = Statement(session)
    statement.allocate(a, node)
    statement.pipeline(b, node)
    statement.evict(r, "test")
    assert (
        node.idle.milli_cpu == 2000
        and node.pipelined.milli_cpu == 1000
        and node.releasing.milli_cpu == 1000
    )
    assert session.table.future_idle[0, 0] == 2000
    statement.discard()
    assert (a.status, b.status, r.status) == (
        TaskStatus.PENDING,
        TaskStatus.PENDING,
        TaskStatus.RUNNING,
    )
    assert (
        node.idle.milli_cpu == 3000
        and node.pipelined.milli_cpu == 0
        and node.releasing.milli_cpu == 0
    )
    assert session.table.idle[0, 0] == 3000
    assert sink.bound == [] and sink.evicted == []


def test_commit_binds_allocated_and_evicts() -> None:
    session, sink, job = _session()
    node = session.nodes["n1"]
    a, r = (next(t for t in job.tasks.values() if t.name == n) for n in ("a", "r"))
    statement = Statement(session)
    statement.allocate(a, node)
    statement.evict(r, "preempt")
    statement.commit()
    assert sink.bound == ["a"] and sink.evicted == ["r"]
    assert a.status is TaskStatus.BINDING
