"""Node selection's windowed search picks the very rows the masks over every node pick.

Volcano's ``PredicateNodes`` (pkg/scheduler/util/predicate_helper.go) and kube-scheduler's
``findNodesThatPassFilters`` (pkg/scheduler/schedule_one.go, with ``numFeasibleNodesToFind``)
check nodes from the rotating ``lastProcessedNodeIndex`` and stop once enough passed.
:func:`scheduler.framework.select.feasible_nodes` does the same window by window; these tests
hold it to the former whole-table computation (kept here as the oracle): same rows, same
order, same cursor, the same fit errors when nothing fits; and an allocate cycle places the
same pods on the same nodes whatever the window size.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actions import allocate, backfill
from plugins.binpack import Binpack
from scheduler.api.nodeshard import HARD_SHARDING, SOFT_SHARDING, ShardScope
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.framework import select
from scheduler.framework.close import close_session
from scheduler.framework.session import NodeSampling
from scheduler.framework.shard import ShardView
from tests.builders import conf_of, make_node, make_pod, simulate

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
  - name: binpack
    arguments: {binpack.weight: 10}
"""
ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}
TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}


def _whole_table(session: Any, task: Any, *, check_resources: bool = True,
                 within: Any = None) -> tuple[Any, Any]:
    """The former ``feasible_nodes`` (no exact checks): the masks over every node, then the
    first ``target`` rows from the cursor; fit errors when nothing fits."""
    table = session.table
    total = len(table) if within is None else int(within.sum())
    status = session.pre_predicate(task)
    assert status is None
    mask = (table.fit_mask(task.init_resreq) if check_resources
            else np.ones(len(table), dtype=bool))
    if within is not None:
        mask &= within
    if mask.any():
        mask &= session.predicate_mask(task)
    rows = np.flatnonzero(mask)
    if len(rows):
        start = session.cursor % len(table)
        split = bisect.bisect_left(rows, start)
        rows = np.concatenate((rows[split:], rows[:split]))
        rows = rows[:select.sampling_target(total, session.sampling)]
        if len(rows) < total:
            session.cursor = int(rows[-1]) + 1
        return rows, None
    return rows, select._explain(session, task, check_resources=check_resources,
                                 exact_failures=[], within=within)


def _cluster(draw: Any) -> tuple[list[Manifest], dict[str, Any]]:
    count = draw(st.integers(1, 40))
    objects: list[Manifest] = []
    for i in range(count):
        kind = draw(st.sampled_from(["plain", "plain", "small", "unschedulable", "tainted",
                                     "labelled", "full", "port", "carrier"]))
        node = make_node(
            f"n{i:02d}", cpu="1" if kind == "small" else "4",
            pods="1" if kind == "full" else "110",
            labels={"kubernetes.io/hostname": f"n{i:02d}",
                    **({"pool": "a"} if kind == "labelled" or i % 3 == 0 else {})},
            taints=[TAINT] if kind == "tainted" else (),
            unschedulable=kind == "unschedulable")
        objects.append(Manifest(f"node#{i}", node))
        if kind in ("full", "port", "carrier"):
            pod = make_pod(f"run-{i}", cpu="100m", node=f"n{i:02d}",
                           host_port=8080 if kind == "port" else None)
            if kind == "carrier":
                pod["metadata"]["labels"] = {"app": "x"}
            pod["metadata"]["uid"] = f"uid-run-{i}"
            objects.append(Manifest(f"pod#{i}", pod))
    pending = make_pod(
        "pending", cpu=draw(st.sampled_from(["1", "2", "3"])),
        node_selector={"pool": "a"} if draw(st.booleans()) else None,
        host_port=8080 if draw(st.booleans()) else None,
        affinity=ANTI if draw(st.booleans()) else None)
    pending["metadata"]["uid"] = "uid-pending"
    objects.append(Manifest("pod#pending", pending))
    return objects, pending


@st.composite
def _cases(draw: Any) -> dict[str, Any]:
    objects, _ = _cluster(draw)
    nodes = sum(1 for m in objects if m.obj["kind"] == "Node")
    return {
        "objects": objects,
        "cursor": draw(st.integers(0, 3 * nodes)),
        "sampling": NodeSampling(percentage=draw(st.sampled_from([0, 10, 30, 50, 100])),
                                 minimum_feasible=draw(st.integers(1, 12)),
                                 minimum_percentage=draw(st.sampled_from([1, 5, 20]))),
        "within": draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=nodes,
                                                     max_size=nodes))),
        "shard": draw(st.one_of(st.none(), st.tuples(
            st.sampled_from([HARD_SHARDING, SOFT_SHARDING]),
            st.lists(st.booleans(), min_size=nodes, max_size=nodes)))),
        "first_window": draw(st.sampled_from([1, 2, 3, 7, 512])),
        "repeat": draw(st.integers(1, 4)),
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_cases())
def test_windowed_selection_matches_the_whole_table(case: dict[str, Any]) -> None:
    """Rows, order, cursor and fit errors against the whole-table oracle, over predicates
    that reject rows (pod anti-affinity among them), a cursor past the end, ``within``, hard and soft shards, sampling
    targets and windows from one row up; the cursor is carried over several pods."""
    _, _, scheduler = build_simulation(case["objects"], conf=conf_of(CONF), seed=3)
    session = scheduler.open_session()
    try:
        session.sampling = case["sampling"]
        session.cursor = case["cursor"]
        table = session.table
        if case["shard"] is not None:
            mode, marks = case["shard"]
            names = frozenset(name for name, mark in zip(table.names, marks, strict=True)
                              if mark)
            session._shard_view = ShardView(ShardScope(mode=mode, nodes=names), table)
        within = None if case["within"] is None else np.array(case["within"], dtype=bool)
        task = next(t for job in session.jobs.values() for t in job.tasks.values()
                    if t.name == "pending")
        for _ in range(case["repeat"]):
            before = session.cursor
            expected, full_errors = _whole_table(session, task, within=within)
            cursor, session.cursor = session.cursor, before
            old = select._FIRST_WINDOW
            select._FIRST_WINDOW = case["first_window"]
            try:
                rows, errors = select.feasible_nodes(session, task, within=within)
            finally:
                select._FIRST_WINDOW = old
            assert rows.tolist() == expected.tolist()
            assert session.cursor == cursor
            if len(expected):
                assert errors is None
            else:
                assert errors is not None and full_errors is not None
                assert errors.error == full_errors.error
    finally:
        close_session(session)


def test_windows_cover_every_row_once_from_the_cursor() -> None:
    """The windows read rows ``start..n-1`` then ``0..start-1``, each once, doubling."""
    for n in range(0, 12):
        for start in range(max(n, 1)):
            for first in (1, 2, 5):
                windows = list(select._windows(start, n, first))
                read = [row for w in windows for row in range(w.start, w.stop)]
                assert read == [*range(start, n), *range(0, start)]
                sizes = [w.stop - w.start for w in windows]
                assert all(size <= first * 2 ** i for i, size in enumerate(sizes))


def _binpack_every_time(self: Binpack, task: Any, table: Any, candidates: Any) -> Any:
    """The former ``Binpack.score_nodes``: the arithmetic over the candidates each time."""
    cols, weights, requests, weight_sum = self.request_columns(task, table)
    if not cols:
        return np.zeros(len(candidates))
    return self._scores(table, candidates, cols, weights, requests, weight_sum)


def _placements(*, before: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    with monkeypatch.context() as patch:
        if before:
            patch.setattr(allocate, "feasible_nodes", _whole_table)
            patch.setattr(backfill, "feasible_nodes", _whole_table)
            patch.setattr(Binpack, "score_nodes", _binpack_every_time)
        else:
            patch.setattr(select, "_FIRST_WINDOW", 1)
        objects = [Manifest(f"node#{i}", make_node(
            f"n{i:03d}", cpu="2" if i % 5 else "8",
            labels={"pool": "a"} if i % 4 else {},
            taints=[TAINT] if i % 7 == 0 else (),
            unschedulable=i % 11 == 0)) for i in range(300)]
        for i in range(150):
            pod = make_pod(f"p{i:03d}", cpu=["1", "500m", "2", None][i % 4],
                           node_selector={"pool": "a"} if i % 2 else None)
            pod["metadata"]["uid"] = f"uid-p{i}"
            objects.append(Manifest(f"pod#{i}", pod))
        run = simulate([m.obj for m in objects], conf=CONF, seed=7, max_cycles=4)
    return run.binds()


def test_allocate_places_the_same_pods_on_the_same_nodes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Allocate and backfill cycles (binpack, nodeorder, predicates; a sample of 144 of
    300 nodes, best-effort pods among them) bind every pod to the node the
    whole-table search and the per-pod binpack arithmetic chose before."""
    windowed = _placements(before=False, monkeypatch=monkeypatch)
    whole = _placements(before=True, monkeypatch=monkeypatch)
    assert whole == windowed
    assert len(whole) == 150


@settings(max_examples=60, deadline=None)
@given(changes=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 9000),
                                  st.integers(0, 40)), max_size=40),
       step=st.integers(1, 20), cpu=st.sampled_from(["100m", "1", "3"]),
       memory=st.sampled_from([None, "1Gi", "7Gi"]))
def test_binpack_kept_scores_are_the_bits_of_a_fresh_computation(
        changes: list[tuple[int, int, int]], step: int, cpu: str, memory: str | None) -> None:
    """Binpack keeps every row's score per request and rescores only the rows synced since
    (one by one for a few, as a vector for many): after any run of changes each score is the
    very float the vector arithmetic over the candidates gives (Volcano binpack.go
    ``BinPackingScore``)."""
    objects = [Manifest(f"node#{i}", make_node(f"n{i:02d}", cpu=str(1 + i % 5)))
               for i in range(30)]
    pending = make_pod("pending", cpu=cpu, memory=memory)
    pending["metadata"]["uid"] = "uid-pending"
    objects.append(Manifest("pod#pending", pending))
    _, _, scheduler = build_simulation(objects, conf=conf_of(CONF), seed=1)
    session = scheduler.open_session()
    try:
        plugin = next(p for p in session._scorers if isinstance(p, Binpack))
        table = session.table
        task = next(t for job in session.jobs.values() for t in job.tasks.values())
        every = np.arange(len(table), dtype=np.intp)
        for start in range(0, len(changes) + 1, step):
            for row, milli_cpu, gib in changes[start:start + step]:
                table.used[row, 0] = milli_cpu
                table.used[row, 1] = gib * 2.0**30
                table.changed_rows.append(row)
            kept = plugin.score_nodes(task, table, every)
            fresh = _binpack_every_time(plugin, task, table, every)
            assert kept.tobytes() == fresh.tobytes()
    finally:
        close_session(session)
