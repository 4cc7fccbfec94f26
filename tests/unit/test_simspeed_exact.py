"""Fast paths that must give the very same results as the slow ones they replace."""

from __future__ import annotations

import numpy as np
import pytest

from plugins.nodeorder import _row_std
from scheduler.cluster.sim import SimClock, SimCluster
from scheduler.framework.close import rfc3339


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
