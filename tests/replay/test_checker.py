"""The policies driven through the reference replay loop on the first pods of a trace: 150 of the
shipped sample (about a third of its cluster) and, where the full trace is present, 500 of
``default`` (about 6 % of the cluster)."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.devices.placement.frag import fragment_of_nodes
from scheduler.devices.placement.policies import POLICIES
from scheduler.replay.trace import load_nodes, load_pods
from tests.replay.checker import replay
from tests.replay.data import trace_files

FIRST = {"sample": 150, "default": 500}
"""Pods replayed per trace: few enough that none fails."""


@pytest.fixture(scope="module", params=sorted(FIRST))
def trace(request: pytest.FixtureRequest) -> tuple[list, list, int, int]:
    files = trace_files(request.param)
    return load_nodes(files.nodes), load_pods(files.pods), FIRST[files.name], files.cards * 1000


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_first_pods_place_consistently(policy: str, trace: tuple[list, list, int, int]) -> None:
    nodes, pods, first, capacity = trace
    run = replay(nodes=nodes, pods=pods, policy=policy, seed=42, limit=first)
    states = run.states
    assert len(run.placements) + len(run.failed) == first == len(run.recorder)
    assert not run.failed
    assert (states.gpu_free >= 0).all() and (states.cpu_free >= 0).all()
    assert (states.mem_free >= 0).all()
    used = sum(p.total_gpu_milli for p in pods if p.name in {n for n, _, _ in run.placements})
    assert states.gpu_idle.sum() == capacity - used
    rows = run.recorder.buckets()
    # No pod failed, so arrived = allocated: each bucket sits on the ideal line, within the
    # half point of its rounding, or one and a half where a multi-card pod stepped over the
    # bucket and it borrows from its neighbours (as does the bucket after the last event, as
    # the paper's scripts do).
    assert rows[-1].arrived_pct == round(100 * used / capacity) + 1
    for row in rows[:-1]:
        assert abs(row.unallocated_pct - (100 - row.arrived_pct)) <= 1.5
    final_fragment = float(fragment_of_nodes(states, run.target).sum())
    assert rows[-1].frag_amount_pct == pytest.approx(100 * final_fragment / capacity, abs=1.0)
    again = replay(nodes=nodes, pods=pods, policy=policy, seed=42, limit=first)
    assert again.placements == run.placements


def test_fgd_leaves_less_fragment_than_random(trace: tuple[list, list, int, int]) -> None:
    nodes, pods, first, _ = trace
    fragments = {}
    for policy in ("random", "fgd"):
        run = replay(nodes=nodes, pods=pods, policy=policy, seed=42, limit=first)
        fragments[policy] = float(np.sum(fragment_of_nodes(run.states, run.target)))
    assert fragments["fgd"] < fragments["random"]
