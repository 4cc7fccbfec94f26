"""How the session combines the eviction hooks, on hand-made sessions with stub plugins.

Each rule is Volcano's ``framework/session_plugins.go``: ``Preemptable``/``Reclaimable`` (per
tier intersection, abstainers skipped, an empty answer ends the tier, the first tier with
victims decides), ``JobStarving`` (AND within the first tier that has the hook, false when
none), ``Preemptive`` (AND), ``VictimQueueOrderFn`` (first non-zero, else reverse queue
order), ``VictimTasks`` (union within a tier, the first tier with any decides) and
``BuildVictimsPriorityQueue``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from actions.shuffle import Shuffle
from scheduler.api.job import JobInfo
from scheduler.api.node import node_from_object
from scheduler.api.podgroup import PodGroup
from scheduler.api.queue import QueueInfo
from scheduler.api.task import TaskInfo, task_from_pod
from scheduler.api.types import JobID, QueueID, TaskStatus, Vote
from scheduler.conf import PLUGIN_FLAGS
from scheduler.framework.session import PluginEntry, Session
from scheduler.framework.snapshot import Snapshot
from tests.builders import make_node, make_pod


class Sink:
    def __init__(self) -> None:
        self.evicted: list[tuple[str, str]] = []

    def bind(self, tasks: Any) -> None: ...

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.evicted.append((task.name, reason))

    def update_podgroup(self, job: Any, event: Any) -> None: ...

    def update_task_condition(self, task: Any, *, reason: str, message: str) -> None: ...

    def update_queue_allocated(self, queue: Any, allocated: Any) -> None: ...


class Answers:
    """A plugin answering Preemptable/Reclaimable with the named tasks (None: abstain)."""

    NAME = "answers"

    def __init__(self, names: Sequence[str] | None) -> None:
        self.names = names

    def _answer(self, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        if self.names is None:
            return [], Vote.ABSTAIN
        return [t for t in candidates if t.name in self.names], Vote.PERMIT

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]
                    ) -> tuple[list[TaskInfo], Vote]:
        return self._answer(candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]
                    ) -> tuple[list[TaskInfo], Vote]:
        return self._answer(candidates)

    def on_session_open(self, session: Session) -> None: ...

    def on_session_close(self, session: Session) -> None: ...


def _job(name: str, queue: str, *, priority: int = 0) -> JobInfo:
    return JobInfo(uid=JobID(f"default/{name}"), name=name, namespace="default",
                   podgroup=PodGroup(name, "default", min_member=1), queue=QueueID(queue),
                   priority=priority)


def _session(tiers: list[list[Any]], *, flags: dict[str, bool] | None = None,
             sink: Sink | None = None, spare_nodes: int = 0
             ) -> tuple[Session, dict[str, TaskInfo]]:
    node = node_from_object(make_node("n1", cpu="8"))
    spares = [node_from_object(make_node(f"spare{i}")) for i in range(spare_nodes)]
    queues = {QueueID(q): QueueInfo(uid=QueueID(q), name=q, creation=float(i))
              for i, q in enumerate(("qa", "qb", "qc"))}
    jobs = {}
    tasks: dict[str, TaskInfo] = {}
    for job_name, queue, names, priority in (
        ("low", "qa", ("l-1-0", "l-1-1"), 1), ("mid", "qb", ("m-1-0",), 5),
        ("other", "qc", ("o-1-0",), 1),
    ):
        job = _job(job_name, queue, priority=priority)
        for i, name in enumerate(names):
            task = task_from_pod(make_pod(name, cpu="1", group=job_name, node="n1",
                                          phase="Running", priority=i))
            job.add_task(task)
            node.add_task(task)
            tasks[name] = task
        jobs[job.uid] = job
    preemptor_job = _job("hi", "qa", priority=9)
    preemptor = task_from_pod(make_pod("h-1-0", cpu="1", group="hi"))
    preemptor_job.add_task(preemptor)
    jobs[preemptor_job.uid] = preemptor_job
    tasks["h-1-0"] = preemptor
    all_flags = {key: True for key in PLUGIN_FLAGS} | (flags or {})
    session = Session(
        Snapshot(nodes=[node, *spares], jobs=jobs, queues=queues),
        tiers=[[PluginEntry(p, all_flags, t) for p in tier] for t, tier in enumerate(tiers)],
        sink=sink or Sink(), clock=lambda: 0.0, rng=random.Random(0))
    return session, tasks


def _victims(tiers: list[list[Any]], kind: str = "preemptable", **kw: Any) -> list[str]:
    session, tasks = _session(tiers, **kw)
    candidates = [t for n, t in tasks.items() if n != "h-1-0"]
    return sorted(t.name for t in getattr(session, kind)(tasks["h-1-0"], candidates))


@pytest.mark.parametrize("kind", ["preemptable", "reclaimable"])
@pytest.mark.parametrize(
    ("tiers", "expected"),
    [
        pytest.param([[Answers(["l-1-0", "l-1-1"]), Answers(["l-1-1", "m-1-0"])]],
                     ["l-1-1"], id="intersection-within-a-tier"),
        pytest.param([[Answers(None), Answers(["m-1-0"])]], ["m-1-0"], id="abstain-skipped"),
        pytest.param([[Answers([]), Answers(["m-1-0"])], [Answers(["o-1-0"])]], ["o-1-0"],
                     id="empty-answer-ends-the-tier"),
        pytest.param([[Answers(["l-1-0"])], [Answers(["m-1-0"])]], ["l-1-0"],
                     id="first-tier-with-victims-decides"),
        pytest.param([[Answers(None)], [Answers(["m-1-0"])]], ["m-1-0"],
                     id="abstaining-tier-falls-through"),
        pytest.param([[Answers(None)]], [], id="nobody-answers"),
        pytest.param([[Answers(["l-1-0"]), Answers(["m-1-0"]), Answers(["l-1-0", "m-1-0"])],
                      [Answers(["o-1-0"])]], ["o-1-0"],
                     id="empty-intersection-ends-the-tier"),
    ],
)
def test_evictable_combination(kind: str, tiers: list[list[Any]], expected: list[str]) -> None:
    assert _victims(tiers, kind) == expected


def test_enable_preemptable_false_takes_the_plugin_out() -> None:
    tiers = [[Answers(["l-1-0"])], [Answers(["m-1-0"])]]
    assert _victims(tiers, flags={"enablePreemptable": False}) == []
    assert _victims(tiers, "reclaimable", flags={"enablePreemptable": False}) == ["l-1-0"]
    assert _victims(tiers, "reclaimable", flags={"enableReclaimable": False}) == []


class Starving:
    NAME = "starving"

    def __init__(self, answer: bool) -> None:
        self.answer = answer

    def job_starving(self, job: JobInfo) -> bool:
        return self.answer


@pytest.mark.parametrize(
    ("tiers", "flags", "expected"),
    [
        pytest.param([], {}, False, id="no-plugin-not-starving"),
        pytest.param([[Starving(True), Starving(True)]], {}, True, id="and-true"),
        pytest.param([[Starving(True), Starving(False)]], {}, False, id="and-false"),
        pytest.param([[Starving(True)], [Starving(False)]], {}, True, id="first-tier-decides"),
        pytest.param([[Starving(True)]], {"enableJobStarving": False}, False, id="flag-off"),
    ],
)
def test_job_starving(tiers: list[list[Any]], flags: dict[str, bool], expected: bool) -> None:
    session, _ = _session(tiers, flags=flags)
    assert session.job_starving(session.jobs[JobID("default/hi")]) is expected


class Preemptive:
    NAME = "preemptive"

    def __init__(self, answer: bool) -> None:
        self.answer = answer

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self.answer


def test_preemptive_is_anded_across_tiers_and_gated_by_its_flag() -> None:
    session, tasks = _session([[Preemptive(True)], [Preemptive(False)]])
    assert not session.preemptive(session.queues[QueueID("qa")], tasks["h-1-0"])
    session, tasks = _session([[Preemptive(False)]], flags={"enablePreemptive": False})
    assert session.preemptive(session.queues[QueueID("qa")], tasks["h-1-0"])


class QueueOrderByName:
    NAME = "queue-order"

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo,
                           preemptor_queue: QueueInfo) -> int:
        # victims of the preemptor's own queue last, then by name descending
        if (left.uid == preemptor_queue.uid) != (right.uid == preemptor_queue.uid):
            return 1 if left.uid == preemptor_queue.uid else -1
        return (left.name < right.name) - (left.name > right.name)


def _order(session: Session, tasks: dict[str, TaskInfo], names: list[str]) -> list[str]:
    compare = session.victim_order(tasks["h-1-0"])
    ordered = sorted((tasks[n] for n in names), key=functools.cmp_to_key(compare))
    return [t.name for t in ordered]


def test_victim_order_without_plugins() -> None:
    """Other queues: reverse queue order (later-created queue first); the same job: reverse
    task order (the default task order goes by pod index, so the highest index first)."""
    session, tasks = _session([])
    assert _order(session, tasks, ["l-1-0", "l-1-1", "m-1-0", "o-1-0"]) == [
        "o-1-0", "m-1-0", "l-1-1", "l-1-0"]


def test_victim_queue_order_plugin_first_non_zero() -> None:
    session, tasks = _session([[QueueOrderByName()]])
    assert _order(session, tasks, ["l-1-0", "m-1-0", "o-1-0"]) == ["o-1-0", "m-1-0", "l-1-0"]


class JobPriorityOrder:
    NAME = "job-priority"

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        return (right.priority > left.priority) - (right.priority < left.priority)


def test_victims_of_one_queue_go_by_reverse_job_order() -> None:
    session, tasks = _session([[JobPriorityOrder()]])
    mid = session.jobs[JobID("default/mid")]
    mid.queue = QueueID("qa")
    assert _order(session, tasks, ["m-1-0", "l-1-0"]) == ["l-1-0", "m-1-0"]


class EvictOthers:
    NAME = "evict-others"

    def __init__(self, names: Sequence[str]) -> None:
        self.names = names

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        return [t for t in tasks if t.name in self.names]


def test_victim_tasks_union_in_first_tier_with_any() -> None:
    session, tasks = _session([[EvictOthers([]), EvictOthers(["l-1-0"]), EvictOthers(["o-1-0"])],
                               [EvictOthers(["m-1-0"])]])
    running = [t for n, t in tasks.items() if t.status is TaskStatus.RUNNING]
    assert sorted(t.name for t in session.victim_tasks(running)) == ["l-1-0", "o-1-0"]
    session, _ = _session([[EvictOthers(["l-1-0"])]], flags={"enabledVictim": False})
    assert session.victim_tasks(running) == []


def test_shuffle_evicts_what_victim_tasks_names() -> None:
    """``actions/shuffle/shuffle.go``: every Running task is offered, victims go at once."""
    sink = Sink()
    session, tasks = _session([[EvictOthers(["m-1-0", "o-1-0"])]], sink=sink)
    Shuffle().execute(session)
    assert sorted(sink.evicted) == [("m-1-0", "shuffle"), ("o-1-0", "shuffle")]
    assert tasks["m-1-0"].status is TaskStatus.RELEASING


class TwoReasons:
    """A vector predicate rejecting every node, the first for a curable reason."""

    NAME = "two-reasons"

    def predicate_mask(self, task: TaskInfo, table: Any) -> Any:
        return np.zeros(len(table), dtype=bool)

    def predicate_reasons(self, task: TaskInfo, table: Any, alive: Any) -> list[Any]:
        first = np.zeros(len(table), dtype=bool)
        first[0] = True
        return [(first & alive, "node(s) didn't satisfy existing pods anti-affinity rules"),
                (~first & alive, "node(s) didn't match Pod's node affinity/selector")]


def test_preempt_mask_keeps_nodes_that_fail_only_for_curable_reasons() -> None:
    """``PredicateForPreemptAction``: only UnschedulableAndUnresolvable failures drop a node."""
    session, tasks = _session([[TwoReasons()]], spare_nodes=1)
    assert session.preempt_mask(tasks["h-1-0"]).tolist() == [True, False]
    assert session.predicate_mask(tasks["h-1-0"]).tolist() == [False, False]
