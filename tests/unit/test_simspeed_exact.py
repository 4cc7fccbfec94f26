"""Fast paths that must give the very same results as the slow ones they replace."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.api.node import node_from_object
from scheduler.api.resource import Resource
from scheduler.cluster.sim import SimClock, SimCluster
from scheduler.framework.close import rfc3339
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.resourcescores import _row_std
from tests.builders import make_node


@pytest.mark.parametrize("columns", [1, 2, 3, 5])
def test_row_std_has_the_bits_of_ndarray_std(columns: int) -> None:
    rng = np.random.default_rng(columns)
    for scale in (1e-6, 1.0, 1e9):
        values = rng.random((400, columns)) * scale
        values[rng.random(values.shape) < 0.25] = 1.0
        assert np.array_equal(_row_std(values), values.std(axis=1))
    assert _row_std(np.empty((0, columns))).shape == (0,)


def test_sim_timestamps_follow_the_clock() -> None:
    clock = SimClock()
    cluster = SimCluster(clock=clock)
    first = cluster._now_text()
    assert first == rfc3339(clock.now) and cluster._now_text() is first
    clock.advance(1.0)
    assert cluster._now_text() == rfc3339(clock.now) != first


def test_request_dims_are_shared_for_equal_requests_and_read_only() -> None:
    table = NodeTable([node_from_object(make_node("n1", cpu="4", extra={"nvidia.com/gpu": "2"}))])
    first = table.request_dims(Resource(1000.0, 2.0**30, {"nvidia.com/gpu": 1.0, "pods": 1.0}))
    again = table.request_dims(Resource(1000.0, 2.0**30, {"nvidia.com/gpu": 1.0, "pods": 1.0}))
    assert again is first
    # pods counts in the node fit, as in Volcano's allocate resource check
    assert first[2] == ["cpu", "memory", "nvidia.com/gpu", "pods"]
    assert list(first[1]) == [1000.0, 2.0**30, 1.0, 1.0]
    with pytest.raises(ValueError):
        first[1][0] = 0.0
    other = table.request_dims(Resource(2000.0, 0.0, {"example.com/fpga": 1.0}))
    assert other[2] == ["cpu", "example.com/fpga"] and list(other[0]) == [0, -1]
