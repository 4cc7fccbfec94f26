"""Label codes and taint groups carried from the previous cycle's node table.

A table built from the previous one reuses its static columns only while the renewed rows
kept the labels and taints they had; each case is compared with a table built from scratch.
"""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.api.node import NodeInfo, Taint
from scheduler.api.resource import Resource
from scheduler.framework.nodetable import NodeTable

ZONE = "topology.kubernetes.io/zone"
NO_GPU = Taint("gpu", "none", "NoSchedule")


def _node(name: str, zone: str | None, *, tainted: bool = False) -> NodeInfo:
    labels = {ZONE: zone} if zone is not None else {}
    return NodeInfo(name=name, allocatable=Resource(), capacity=Resource(), labels=labels,
                    taints=(NO_GPU,) if tainted else ())


def _first() -> tuple[list[NodeInfo], NodeTable]:
    nodes = [_node("n0", "a"), _node("n1", "b", tainted=True), _node("n2", "a"),
             _node("n3", None)]
    table = NodeTable(nodes)
    table.label_codes(ZONE)
    table.taint_groups()
    return nodes, table


def _assert_same(table: NodeTable, fresh: NodeTable) -> None:
    codes, mapping = table.label_codes(ZONE)
    fresh_codes, fresh_mapping = fresh.label_codes(ZONE)
    np.testing.assert_array_equal(codes, fresh_codes)
    assert mapping == fresh_mapping
    ids, groups = table.taint_groups()
    fresh_ids, fresh_groups = fresh.taint_groups()
    np.testing.assert_array_equal(ids, fresh_ids)
    assert groups == fresh_groups


def test_unchanged_labels_and_taints_are_carried_over() -> None:
    nodes, previous = _first()
    renewed = [*nodes[:2], _node("n2", "a"), nodes[3]]  # n2 renewed, same zone and taints
    table = NodeTable(renewed, previous=previous, renewed={"n2"})
    assert table.label_codes(ZONE) is previous.label_codes(ZONE)
    assert table.taint_groups() is previous.taint_groups()
    _assert_same(table, NodeTable(renewed))


@pytest.mark.parametrize(("zone", "tainted"), [
    pytest.param("c", False, id="new-zone"),
    pytest.param(None, False, id="label-removed"),
    pytest.param("b", False, id="other-known-zone"),
    pytest.param("a", True, id="taint-added"),
])
def test_a_renewed_row_with_other_labels_or_taints_recomputes(zone: str | None,
                                                              tainted: bool) -> None:
    nodes, previous = _first()
    changed = [nodes[0], nodes[1], _node("n2", zone, tainted=tainted), nodes[3]]
    table = NodeTable(changed, previous=previous, renewed={"n2"})
    _assert_same(table, NodeTable(changed))


def test_codes_first_asked_in_the_new_table_are_computed() -> None:
    nodes, previous = _first()
    table = NodeTable(nodes, previous=previous, renewed=set())
    codes, mapping = table.label_codes("kubernetes.io/hostname")
    assert mapping == {} and (codes == -1).all()


@pytest.mark.parametrize(("before", "after"), [
    pytest.param({"example.com/fpga": 2.0}, {"example.com/fpga": 4.0}, id="same-names"),
    pytest.param({}, {"example.com/fpga": 2.0}, id="name-added"),
    pytest.param({"example.com/fpga": 2.0}, {}, id="only-holder-drops-it"),
])
def test_resource_dimensions_follow_the_renewed_nodes(before: dict[str, float],
                                                      after: dict[str, float]) -> None:
    first = [_node("n0", "a"), _node("n1", "b")]
    first[1].allocatable = Resource(1000, 0, dict(before))
    previous = NodeTable(first)
    renewed = [first[0], _node("n1", "b")]
    renewed[1].allocatable = Resource(1000, 0, dict(after))
    table = NodeTable(renewed, previous=previous, renewed={"n1"})
    fresh = NodeTable(renewed)
    assert table.dims == fresh.dims
    np.testing.assert_array_equal(table.allocatable, fresh.allocatable)


def test_hook_columns_start_as_zeros_or_carry_over_with_renewed_rows_refilled() -> None:
    values = {"n0": 1.0, "n1": 2.0, "n2": 3.0, "n3": 4.0}

    def fill(table: NodeTable) -> None:
        def hook(row: int, node: NodeInfo) -> None:
            table.columns["extra"][row] = values.get(node.name, 0.0)
        table.add_row_hook(hook, columns=["extra"])

    nodes, previous = _first()
    fill(previous)
    np.testing.assert_array_equal(previous.columns["extra"], [1, 2, 3, 4])
    values["n2"], values["n3"] = 30.0, 40.0  # only n2 is renewed below
    table = NodeTable(nodes, previous=previous, renewed={"n2"})
    fill(table)
    np.testing.assert_array_equal(table.columns["extra"], [1, 2, 30, 4])
    assert "extra" not in previous.columns  # taken over: the previous session is over


def test_carried_hook_columns_keep_their_dtypes_and_leave_the_previous_table() -> None:
    nodes, previous = _first()

    def hook_for(table: NodeTable) -> None:
        def hook(row: int, node: NodeInfo) -> None:
            table.columns["count"][row] = row
            table.columns["flag"][row] = row % 2 == 0
            table.columns["a"][row] = row * 10.0
            table.columns["b"][row] = -row
        for name, dtype in (("count", np.int64), ("flag", bool)):
            if name not in table.columns:
                table.columns[name] = np.zeros(len(table), dtype=dtype)
        table.add_row_hook(hook, columns=["a", "b"])
        table.add_row_hook(lambda row, node: None, columns=["count", "flag"])

    hook_for(previous)
    table = NodeTable(nodes, previous=previous, renewed={"n1"})
    hook_for(table)
    assert table.columns["count"].dtype == np.int64 and table.columns["flag"].dtype == bool
    table.columns["a"][0] = 99.0
    assert table.columns["b"][0] == 0 and "a" not in previous.columns
    np.testing.assert_array_equal(table.columns["b"], [0, -1, -2, -3])
