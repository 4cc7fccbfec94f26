"""Incremental snapshots copy what changed and nothing else.

The property test (``tests/scenarios/test_incremental_props.py``) shows an incremental
snapshot equals a full copy; these pin down that the work done is proportional to the change:
unchanged nodes, tasks and jobs are handed out again, changed ones are copied afresh, and the
node table recomputes only the rows of renewed nodes.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.api.types import TaskStatus
from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import SimCluster
from scheduler.cluster.simulation import build_simulation
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.session import Session
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.statement import Statement
from tests.builders import conf_of, gang, make_node, make_pod, make_podgroup


def _world() -> tuple[SimCluster, SchedulerCache]:
    objects: list[dict[str, Any]] = [make_node(f"n{i}", cpu="8") for i in range(6)]
    objects += [make_podgroup("run", min_member=1, phase="Running")]
    objects += [make_pod(f"run-{i}", group="run", node=f"n{i}") for i in range(6)]
    objects += gang("wait", 2)
    cluster, cache, _ = build_simulation(
        [Manifest(f"t#{i}", obj) for i, obj in enumerate(objects)], conf=conf_of(None))
    return cluster, cache


def _session(snapshot: Snapshot, cache: SchedulerCache) -> Session:
    return Session(snapshot, tiers=[], sink=cache, clock=lambda: 0.0, rng=random.Random(0))


def test_an_unchanged_cluster_is_handed_out_again() -> None:
    _, cache = _world()
    first = cache.snapshot()
    _session(first, cache)
    second = cache.snapshot()
    assert all(a is b for a, b in zip(first.nodes, second.nodes, strict=True))
    assert all(second.jobs[uid] is job for uid, job in first.jobs.items())
    assert second.previous_table is first.table
    assert second.renewed_nodes == frozenset()


def test_a_pod_event_renews_its_node_task_and_job_only() -> None:
    cluster, cache = _world()
    first = cache.snapshot()
    _session(first, cache)
    pod = cluster.objects["Pod"]["default/run-2"]
    pod["status"] = {"phase": "Succeeded"}
    cache.apply("MODIFIED", "Pod", pod)
    second = cache.snapshot()
    renewed = [b.name for a, b in zip(first.nodes, second.nodes, strict=True) if a is not b]
    assert renewed == ["n2"]
    assert second.renewed_nodes == {"n2"}
    assert second.jobs["default/run"] is not first.jobs["default/run"]
    assert second.jobs["default/wait"] is first.jobs["default/wait"]


def test_what_a_session_touched_is_copied_afresh() -> None:
    _, cache = _world()
    first = cache.snapshot()
    session = _session(first, cache)
    task = first.jobs["default/wait"].tasks_in(TaskStatus.PENDING)[0]
    statement = Statement(session)
    statement.allocate(task, session.nodes["n4"])
    statement.discard()
    second = cache.snapshot()
    assert second.renewed_nodes == {"n4"}
    assert second.nodes[4] is not first.nodes[4]
    assert second.jobs["default/wait"] is not first.jobs["default/wait"]
    assert second.jobs["default/run"] is first.jobs["default/run"]


def test_the_table_recomputes_only_renewed_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, cache = _world()
    _session(cache.snapshot(), cache)
    node = cluster.objects["Node"]["n3"]
    node["status"]["allocatable"]["cpu"] = "16"
    cache.apply("MODIFIED", "Node", node)
    synced: list[int] = []
    original = NodeTable.sync
    monkeypatch.setattr(NodeTable, "sync", lambda self, i: (synced.append(i), original(self, i)))
    session = _session(cache.snapshot(), cache)
    assert synced == [3]
    assert session.table.allocatable[3, 0] == 16000
    assert session.table.allocatable[2, 0] == 8000


def test_a_new_node_rebuilds_the_table() -> None:
    cluster, cache = _world()
    _session(cache.snapshot(), cache)
    extra = make_node("n9", cpu="2")
    extra["metadata"]["uid"] = "n9"
    cluster.objects["Node"]["n9"] = extra
    cache.apply("ADDED", "Node", extra)
    session = _session(cache.snapshot(), cache)
    assert session.table.names[-1] == "n9"
    assert session.table.allocatable[-1, 0] == 2000
    assert [n.index for n in session.node_list] == list(range(7))
