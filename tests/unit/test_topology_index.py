"""The pod index's incremental counts equal a full recount after any allocate/pipeline/evict/
discard/commit sequence driven through a real Session and Statement."""

from __future__ import annotations

import random
from collections.abc import Mapping

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plugins.nodeorder import NodeOrder, NodeOrderArgs
from plugins.predicates import Predicates, PredicatesArgs
from scheduler.api.job import JobInfo
from scheduler.api.node import node_from_object
from scheduler.api.podgroup import PodGroup
from scheduler.api.task import TaskInfo, task_from_pod
from scheduler.api.types import JobID, QueueID, TaskStatus
from scheduler.framework.podindex import LabelGroup, PodIndex, pod_index
from scheduler.framework.session import PluginEntry, Session
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.statement import Statement
from tests.builders import make_node, make_pod
from tests.scenarios.affinity_helpers import ZONE, affinity, term

APPS = ("x", "y", "z")
NAMESPACES = ("default", "team")
QUESTIONS: dict[str, tuple[str, frozenset[str]]] = {
    "x-default": ("default", frozenset({"x"})),
    "xy-team": ("team", frozenset({"x", "y"})),
    "all-default": ("default", frozenset(APPS)),
}


def _matcher(namespace: str, apps: frozenset[str]):  # type: ignore[no-untyped-def]
    def matches(group: LabelGroup) -> bool:
        return group.namespace == namespace and group.labels.get("app") in apps

    return matches


@st.composite
def pod_specs(draw: st.DrawFn) -> dict:
    app = draw(st.sampled_from(APPS))
    carried = draw(st.sampled_from(["none", "anti", "preferred", "preferred-anti"]))
    target = term({"app": draw(st.sampled_from(APPS))}, ZONE)
    aff = {
        "none": {},
        "anti": affinity(anti=[target]),
        "preferred": affinity(preferred=[(5, target)]),
        "preferred-anti": affinity(preferred_anti=[(7, target)]),
    }[carried]
    return {"app": app, "namespace": draw(st.sampled_from(NAMESPACES)), "affinity": aff}


def _pod(name: str, spec: dict, node: str | None = None) -> dict:
    pod = make_pod(
        name,
        cpu="0",
        namespace=spec["namespace"],
        node=node,
        group=None,
        affinity=spec["affinity"] or None,
    )
    pod["metadata"]["labels"] = {"app": spec["app"]}
    return pod


def _session(zones: list[str | None], running: list[tuple[dict, int]], pending: list[dict]):  # type: ignore[no-untyped-def]
    nodes = []
    for i, zone in enumerate(zones):
        labels = {ZONE: zone} if zone else {}
        nodes.append(node_from_object(make_node(f"n{i}", labels=labels)))
    job = JobInfo(
        uid=JobID("default/j"),
        name="j",
        namespace="default",
        podgroup=PodGroup("j", "default", min_member=1),
        queue=QueueID("default"),
    )
    for i, (spec, row) in enumerate(running):
        task = task_from_pod(_pod(f"run-{i}", spec, node=f"n{row}"))
        task.job = job.uid
        job.add_task(task)
        nodes[row].add_task(task)
    for i, spec in enumerate(pending):
        task = task_from_pod(_pod(f"new-{i}", spec))
        task.job = job.uid
        job.add_task(task)
    tiers = [[PluginEntry(Predicates(PredicatesArgs())), PluginEntry(NodeOrder(NodeOrderArgs()))]]
    session = Session(
        Snapshot(nodes=nodes, jobs={job.uid: job}),
        tiers=tiers,
        sink=_Sink(),
        clock=lambda: 0.0,
        rng=random.Random(0),
    )
    session.open()
    return session, job


class _Sink:
    def bind(self, tasks):  # type: ignore[no-untyped-def]
        return None

    def evict(self, task, reason):  # type: ignore[no-untyped-def]
        return None


def _recount(session: Session, evicted: set[str]) -> tuple[dict[str, np.ndarray], dict]:
    """Counts straight from the nodes' task lists, ignoring the index."""
    n = len(session.table)
    per_node = {name: np.zeros(n, dtype=np.intp) for name in QUESTIONS}
    carried: dict[tuple[str, object, int], dict[str, int]] = {}
    for row, node in enumerate(session.table.nodes):
        zone = node.labels.get(ZONE)
        for task in node.tasks.values():
            if task.uid in evicted:
                continue
            app = dict(task.spec.terms.labels).get("app")
            for name, (namespace, apps) in QUESTIONS.items():
                if task.namespace == namespace and app in apps:
                    per_node[name][row] += 1
            terms = task.spec.terms
            entries = [("required-anti-affinity", t, 0) for t in terms.anti_affinity]
            entries += [("preferred-affinity", w.term, w.weight) for w in terms.preferred_affinity]
            entries += [
                ("preferred-anti-affinity", w.term, w.weight) for w in terms.preferred_anti_affinity
            ]
            for entry in entries:
                by_zone = carried.setdefault(entry, {})
                if zone is not None:
                    by_zone[zone] = by_zone.get(zone, 0) + 1
    return per_node, carried


def _zone_sums(session: Session, per_node: np.ndarray) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for row, node in enumerate(session.table.nodes):
        zone = node.labels.get(ZONE)
        if zone is not None:
            out[zone] = out.get(zone, 0) + int(per_node[row])
    return out


def _ask(index: PodIndex, name: str, *, anchored: bool = False):  # type: ignore[no-untyped-def]
    namespace, apps = QUESTIONS[name]
    anchors = frozenset(("app", a) for a in apps) if anchored else None
    query = index.query(("test", name, anchored), _matcher(namespace, apps), anchors=anchors)
    index.domain_counts(query, ZONE)
    return query


operations = st.lists(
    st.tuples(
        st.sampled_from(["allocate", "pipeline", "evict", "discard", "commit", "ask"]),
        st.integers(0, 20),
        st.integers(0, 20),
    ),
    max_size=30,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    zones=st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=5),
    running=st.lists(st.tuples(pod_specs(), st.integers(0, 4)), max_size=8),
    pending=st.lists(pod_specs(), min_size=1, max_size=8),
    ops=operations,
    ask_first=st.booleans(),
)
def test_incremental_counts_equal_a_full_recount(zones, running, pending, ops, ask_first) -> None:  # type: ignore[no-untyped-def]
    running = [(spec, row % len(zones)) for spec, row in running]
    session, job = _session(zones, running, pending)
    index = pod_index(session)
    if ask_first:  # built before any change: every later change is applied incrementally
        for name in QUESTIONS:
            _ask(index, name, anchored=True)
            _ask(index, name)
    statement = Statement(session)
    evicted: set[str] = set()
    in_statement: set[str] = set()

    def tasks(status: TaskStatus) -> list[TaskInfo]:
        return sorted((t for t in job.tasks.values() if t.status is status), key=lambda t: t.name)

    for kind, which, where in ops:
        node = session.node_list[where % len(session.node_list)]
        if kind in ("allocate", "pipeline") and tasks(TaskStatus.PENDING):
            pending_tasks = tasks(TaskStatus.PENDING)
            task = pending_tasks[which % len(pending_tasks)]
            (statement.allocate if kind == "allocate" else statement.pipeline)(task, node)
        elif kind == "evict" and tasks(TaskStatus.RUNNING):
            running_tasks = tasks(TaskStatus.RUNNING)
            task = running_tasks[which % len(running_tasks)]
            statement.evict(task, "test")
            in_statement.add(task.uid)
        elif kind == "discard":
            statement.discard()
            in_statement.clear()
        elif kind == "commit":
            statement.commit()
            evicted |= in_statement
            in_statement.clear()
        elif kind == "ask":
            for name in QUESTIONS:
                _ask(index, name, anchored=which % 2 == 0)

    per_node, carried = _recount(session, evicted | in_statement)
    for name, anchored in ((n, a) for n in QUESTIONS for a in (False, True)):
        query = _ask(index, name, anchored=anchored)
        assert list(query.per_node) == list(per_node[name]), name
        _, mapping = session.table.label_codes(ZONE)
        got = {zone: int(query.domains[ZONE][code]) for zone, code in mapping.items()}
        want = _zone_sums(session, per_node[name])
        assert {z: c for z, c in got.items() if c} == {z: c for z, c in want.items() if c}
    index.build()
    for key, carrier in index.carriers.items():
        _, mapping = session.table.label_codes(ZONE)
        got = {zone: int(carrier.domains[code]) for zone, code in mapping.items()}
        want = carried.get(key, {})
        assert {z: c for z, c in got.items() if c} == want, key
