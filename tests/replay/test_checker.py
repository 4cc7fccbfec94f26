"""The policies driven through the reference replay loop on the first 500 pods of ``default``."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.devices.placement.frag import fragment_of_nodes
from scheduler.devices.placement.policies import POLICIES
from scheduler.replay.trace import load_nodes, load_pods
from tests.replay.checker import replay
from tests.replay.data import alibaba_dir


@pytest.fixture(scope="module")
def trace() -> tuple[list, list]:
    base = alibaba_dir()
    return (load_nodes(base / "openb_node_list_gpu_node.csv"),
            load_pods(base / "openb_pod_list_default.csv"))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_first_500_pods_place_consistently(policy: str, trace: tuple[list, list]) -> None:
    nodes, pods = trace
    run = replay(nodes=nodes, pods=pods, policy=policy, seed=42, limit=500)
    states = run.states
    assert len(run.placements) + len(run.failed) == 500 == len(run.recorder)
    assert not run.failed  # 500 pods are about 6 % of the cluster
    assert (states.gpu_free >= 0).all() and (states.cpu_free >= 0).all()
    assert (states.mem_free >= 0).all()
    used = sum(p.total_gpu_milli for p in pods if p.name in {n for n, _, _ in run.placements})
    assert states.gpu_idle.sum() == 6_212_000 - used
    rows = run.recorder.buckets()
    # No pod failed, so arrived = allocated: each bucket sits on the ideal line.
    # (the bucket after the last event borrows from it, as the paper's scripts do)
    assert rows[-1].arrived_pct == round(used / 62_120) + 1
    for row in rows[:-1]:
        assert abs(row.unallocated_pct - (100 - row.arrived_pct)) <= 1.0
    final_fragment = float(fragment_of_nodes(states, run.target).sum())
    assert rows[-1].frag_amount_pct == pytest.approx(100 * final_fragment / 6_212_000, abs=1.0)
    again = replay(nodes=nodes, pods=pods, policy=policy, seed=42, limit=500)
    assert again.placements == run.placements


def test_fgd_leaves_less_fragment_than_random(trace: tuple[list, list]) -> None:
    nodes, pods = trace
    fragments = {}
    for policy in ("random", "fgd"):
        run = replay(nodes=nodes, pods=pods, policy=policy, seed=42, limit=500)
        fragments[policy] = float(np.sum(fragment_of_nodes(run.states, run.target)))
    assert fragments["fgd"] < fragments["random"]
