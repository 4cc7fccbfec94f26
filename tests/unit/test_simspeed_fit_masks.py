"""NodeTable.fit_mask keeps its answer per request value and rechecks only the rows synced
since: it must always equal the fit worked out afresh from the columns as they are now
(placements, pipelined and releasing tasks, removals, one row or many changed)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api.node import node_from_object
from scheduler.api.resource import MIN_RESOURCE, Resource
from scheduler.api.task import TaskInfo, task_from_pod
from scheduler.api.types import TaskStatus
from scheduler.framework.nodetable import NodeTable
from tests.builders import make_node, make_pod


def _fresh(table: NodeTable, request: Resource, *, future: bool) -> list[bool]:
    """Volcano's ``LessEqualWithDimension`` per node, straight from the columns."""
    source = table.future_idle if future else table.idle
    out = []
    for row in range(len(table)):
        fits = True
        for name in request.names():
            if name == "pods" or request.get(name) < MIN_RESOURCE:
                continue
            col = table.dim_index.get(name)
            if col is None or request.get(name) - source[row, col] >= MIN_RESOURCE:
                fits = False
        out.append(fits)
    return out


def _table(count: int, *, cpu: str = "4", gpus: str | None = None) -> NodeTable:
    extra = {"nvidia.com/gpu": gpus} if gpus else None
    return NodeTable([node_from_object(make_node(f"n{i}", cpu=cpu, memory="8Gi", extra=extra))
                      for i in range(count)])


def _task(name: str, cpu: str, *, status: TaskStatus = TaskStatus.ALLOCATED) -> TaskInfo:
    task = task_from_pod(make_pod(name, cpu=cpu, memory="1Gi"))
    task.status = status
    return task


def _place(table: NodeTable, row: int, task: TaskInfo) -> None:
    task.node_name = table.nodes[row].name
    table.nodes[row].add_task(task)
    table.sync(row)


def _remove(table: NodeTable, row: int, task: TaskInfo) -> None:
    table.nodes[row].remove_task(task)
    table.sync(row)


REQUEST = Resource(3000.0, 2.0**30)


def test_a_filled_node_stops_fitting_and_fits_again_when_emptied() -> None:
    table = _table(3)
    assert table.fit_mask(REQUEST).tolist() == [True, True, True]
    task = _task("p", "2")
    _place(table, 1, task)
    assert table.fit_mask(REQUEST).tolist() == [True, False, True]
    assert table.fit_mask(REQUEST, future=False).tolist() == [True, False, True]
    _remove(table, 1, task)
    assert table.fit_mask(REQUEST).tolist() == [True, True, True]


def test_pipelined_tasks_count_against_future_idle_only() -> None:
    table = _table(2)
    table.fit_mask(REQUEST)
    table.fit_mask(REQUEST, future=False)
    _place(table, 0, _task("p", "2", status=TaskStatus.PIPELINED))
    assert table.fit_mask(REQUEST).tolist() == [False, True]
    assert table.fit_mask(REQUEST, future=False).tolist() == [True, True]


def test_the_answer_is_a_new_array_and_rows_select_from_it() -> None:
    table = _table(4)
    first = table.fit_mask(REQUEST)
    first[:] = False
    assert table.fit_mask(REQUEST).tolist() == [True] * 4
    _place(table, 2, _task("p", "2"))
    rows = np.array([3, 2], dtype=np.intp)
    assert table.fit_mask(REQUEST, rows=rows).tolist() == [True, False]


def test_many_changed_rows_and_unknown_or_empty_requests() -> None:
    table = _table(40, gpus="1")
    gpu_request = Resource(1000.0, 0.0, {"nvidia.com/gpu": 1.0})
    fpga_request = Resource(1000.0, 0.0, {"example.com/fpga": 1.0})
    empty = Resource(0.0, 0.0)
    for request in (REQUEST, gpu_request, fpga_request, empty):
        table.fit_mask(request)
    for row in range(0, 40, 2):  # more rows changed than are rechecked one by one
        _place(table, row, _task(f"p{row}", "2"))
    for row in (1, 3):
        pod = make_pod(f"g{row}", cpu="1")
        pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
        gpu_task = task_from_pod(pod)
        gpu_task.status = TaskStatus.ALLOCATED
        _place(table, row, gpu_task)
    for request in (REQUEST, gpu_request, fpga_request, empty):
        assert table.fit_mask(request).tolist() == _fresh(table, request, future=True)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 9),
            st.sampled_from(["100m", "1", "1500m", "3"]),
            st.sampled_from([TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RELEASING]),
            st.booleans(),
        ),
        max_size=50,
    ),
    ask_every=st.integers(1, 20),
)
def test_kept_masks_equal_fresh_ones(
    steps: list[tuple[int, str, TaskStatus, bool]], ask_every: int
) -> None:
    """Random placements and removals on 10 nodes, the masks asked for every few steps:
    always the fresh answer, for current and future idle and several requests."""
    table = _table(10)
    requests = [REQUEST, Resource(500.0, 2.0**33), Resource(1500.0, 0.0)]
    placed: list[tuple[int, TaskInfo]] = []
    for i, (row, cpu, status, remove) in enumerate(steps):
        if remove and placed:
            _remove(table, *placed.pop(0))
        else:
            task = _task(f"p{i}", cpu, status=status)
            _place(table, row, task)
            placed.append((row, task))
        if i % ask_every == 0:
            for request in requests:
                for future in (True, False):
                    assert table.fit_mask(request, future=future).tolist() == _fresh(
                        table, request, future=future)
    for request in requests:
        assert table.fit_mask(request).tolist() == _fresh(table, request, future=True)
