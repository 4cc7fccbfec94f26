"""nodeorder's cached cpu/memory scores (:class:`ResourceScores`): always the same bits as
kube-scheduler's formulas worked out afresh on the table as it is now, across placements that
change one row or many, and for the one-row (plain Python) and many-row (vector) updates."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.nodeorder import NodeOrder, NodeOrderArgs
from scheduler.api.node import NodeInfo, node_from_object
from scheduler.api.task import TaskInfo, task_from_pod
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.resourcescores import ResourceScores
from tests.builders import make_node, make_pod


def _reference(table: NodeTable, cpu: float, memory: float, *, weights: tuple[int, int, int]
               ) -> list[float]:
    """LeastAllocated, MostAllocated and BalancedAllocation (kube-scheduler's
    ``leastResourceScorer``, ``mostResourceScorer``, ``balancedResourceScorer`` on cpu and
    memory with equal weights), one node at a time from the table's columns."""
    least, most, balanced = weights
    out: list[float] = []
    for row in range(len(table)):
        requested = table.used[row, :2] + np.array([cpu, memory])
        allocatable = table.allocatable[row, :2]
        total = 0.0
        fractions = []
        least_parts, most_parts = [], []
        for r, a in zip(requested.tolist(), allocatable.tolist(), strict=True):
            least_parts.append(np.floor((a - r) * 100.0 / a) if a > 0 and r <= a else 0.0)
            most_parts.append(np.floor(min(r, a) * 100.0 / a) if a > 0 else 0.0)
            fractions.append(min(r / a, 1.0) if a > 0 else 0.0)
        total += np.floor(np.mean(least_parts)) * least
        total += np.floor(np.mean(most_parts)) * most
        total += np.floor((1.0 - np.std(fractions)) * 100.0) * balanced
        out.append(float(total))
    return out


def _task(name: str, cpu: str, memory: str) -> TaskInfo:
    return task_from_pod(make_pod(name, cpu=cpu, memory=memory))


def _table(specs: list[tuple[str, str]]) -> NodeTable:
    nodes = [node_from_object(make_node(f"n{i}", cpu=c, memory=m)) for i, (c, m) in
             enumerate(specs)]
    return NodeTable(nodes)


def _place(table: NodeTable, row: int, task: TaskInfo) -> None:
    node: NodeInfo = table.nodes[row]
    task.node_name = node.name
    node.add_task(task)
    table.sync(row)


NODE_SPECS = [("4", "8Gi"), ("8", "4Gi"), ("2", "16Gi"), ("0", "8Gi"), ("16", "0"), ("3", "5Gi")]


def test_scores_follow_each_placement_on_one_node() -> None:
    """A placement changes one row; the next call for the same request must see it (a cache
    that kept the first answer would still give node n0 its empty-node score)."""
    table = _table(NODE_SPECS)
    scores = ResourceScores(table, least=1, most=0, balanced=1)
    before = scores.scores(1000.0, 2.0**30).copy()
    assert before.tolist() == _reference(table, 1000.0, 2.0**30, weights=(1, 0, 1))
    _place(table, 0, _task("p0", "3", "6Gi"))
    after = scores.scores(1000.0, 2.0**30)
    assert after.tolist() == _reference(table, 1000.0, 2.0**30, weights=(1, 0, 1))
    assert after[0] != before[0] and after[1:].tolist() == before[1:].tolist()


def test_many_changed_rows_are_brought_up_to_date_at_once() -> None:
    table = _table([("8", "16Gi")] * 40)
    scores = ResourceScores(table, least=1, most=2, balanced=1)
    scores.scores(500.0, 2.0**29)
    for row in range(0, 40, 2):  # 20 rows changed: more than are redone one by one
        _place(table, row, _task(f"p{row}", "1", "1Gi"))
    assert scores.scores(500.0, 2.0**29).tolist() == _reference(
        table, 500.0, 2.0**29, weights=(1, 2, 1))


def test_each_request_value_keeps_its_own_scores() -> None:
    table = _table(NODE_SPECS)
    scores = ResourceScores(table, least=1, most=0, balanced=1)
    small = scores.scores(100.0, 2.0**20).copy()
    large = scores.scores(2000.0, 2.0**32).copy()
    assert small.tolist() != large.tolist()
    _place(table, 2, _task("p", "1", "8Gi"))
    assert scores.scores(2000.0, 2.0**32).tolist() == _reference(
        table, 2000.0, 2.0**32, weights=(1, 0, 1))
    assert scores.scores(100.0, 2.0**20).tolist() == _reference(
        table, 100.0, 2.0**20, weights=(1, 0, 1))


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(st.tuples(st.integers(0, 64), st.integers(0, 256)), min_size=1, max_size=24),
    placements=st.lists(
        st.tuples(st.integers(0, 23), st.integers(0, 8000), st.integers(0, 64)), max_size=40),
    request=st.tuples(st.integers(0, 8000), st.integers(0, 64)),
    weights=st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
)
def test_cached_scores_equal_fresh_ones(
    nodes: list[tuple[int, int]],
    placements: list[tuple[int, int, int]],
    request: tuple[int, int],
    weights: tuple[int, int, int],
) -> None:
    """Random nodes (zero allocatable included), placements between calls that overfill
    nodes, and any weights: the cache, asked after every placement or only at the end, gives
    the reference's exact floats."""
    table = _table([(str(cpu), f"{mem}Gi") for cpu, mem in nodes])
    cpu, memory = float(request[0]), float(request[1]) * 2.0**28
    often = ResourceScores(table, least=weights[0], most=weights[1], balanced=weights[2])
    seldom = ResourceScores(table, least=weights[0], most=weights[1], balanced=weights[2])
    seldom.scores(cpu, memory)
    for i, (row, milli, gib_quarters) in enumerate(placements):
        task = _task(f"p{i}", f"{milli}m", f"{gib_quarters * 256}Mi")
        _place(table, row % len(table), task)
        expected = _reference(table, cpu, memory, weights=weights)
        assert often.scores(cpu, memory).tolist() == expected
    expected = _reference(table, cpu, memory, weights=weights)
    assert seldom.scores(cpu, memory).tolist() == expected


def test_nodeorder_scores_a_new_session_table_afresh() -> None:
    """The plugin keeps its cache per table: a later session's table is scored from its own
    columns, not the previous table's."""
    plugin = NodeOrder(NodeOrderArgs())
    task = _task("p", "1", "1Gi")
    rows = np.arange(2, dtype=np.intp)
    first = _table([("4", "8Gi"), ("8", "8Gi")])
    taint_part = 3 * 100.0  # no node has a PreferNoSchedule taint
    assert plugin.score_nodes(task, first, rows).tolist() == [
        s + taint_part for s in _reference(first, 1000.0, 2.0**30, weights=(1, 0, 1))]
    second = _table([("2", "8Gi"), ("8", "2Gi")])
    assert plugin.score_nodes(task, second, rows).tolist() == [
        s + taint_part for s in _reference(second, 1000.0, 2.0**30, weights=(1, 0, 1))]


def _taint_part(plugin: NodeOrder, table: NodeTable, task: TaskInfo) -> list[float]:
    rows = np.arange(len(table), dtype=np.intp)
    return plugin._taint_scores(task, table, rows).tolist()


def test_taint_scores_are_kept_per_table_and_per_tolerations() -> None:
    """TaintToleration's score (kube-scheduler ``TaintToleration.Score``/``NormalizeScore``,
    reversed): kept per set of tolerations for one table's taint groups, worked out again for
    another table and for other tolerations."""
    plugin = NodeOrder(NodeOrderArgs())
    prefer = {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}
    plain = NodeTable([node_from_object(make_node(f"n{i}")) for i in range(2)])
    tainted = NodeTable([node_from_object(make_node("n0", taints=[prefer])),
                         node_from_object(make_node("n1"))])
    task = _task("p", "1", "1Gi")
    tolerant = task_from_pod(make_pod("t", tolerations=[
        {"key": "spot", "operator": "Equal", "value": "yes", "effect": "PreferNoSchedule"}]))
    assert _taint_part(plugin, plain, task) == [100.0, 100.0]
    assert _taint_part(plugin, tainted, task) == [0.0, 100.0]
    assert _taint_part(plugin, tainted, tolerant) == [100.0, 100.0]
    assert _taint_part(plugin, tainted, task) == [0.0, 100.0]
    assert _taint_part(plugin, plain, task) == [100.0, 100.0]
