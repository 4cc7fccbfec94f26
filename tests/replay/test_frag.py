"""The FGD fragmentation measure (paper §B.3) against hand values and a brute-force reading.

Matched functions of the reference simulator (hkust-adsl/kubernetes-scheduler-simulator):
``GetTypicalPods``, ``GetNodePodFrag`` and ``NodeGpuShareFragAmount`` in ``pkg/utils/frag.go``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.devices.placement.frag import (
    FragmentCache,
    ShapeKey,
    TargetWorkload,
    fragment_of_nodes,
    shape_key,
)
from scheduler.devices.placement.state import NodeStates, PodShape
from scheduler.replay.trace import load_pods
from tests.replay.bruteforce import node_fragment
from tests.replay.data import trace_files

CPU_ONLY = ShapeKey(1000, 0, 0)
SHARE_500 = ShapeKey(2000, 500, 1)
TWO_CARDS = ShapeKey(16000, 1000, 2)


def one_node(cards: list[int], *, cpu_free: int, model: str = "A", width: int = 4) -> NodeStates:
    states = NodeStates.build(gpu_counts=[width], cpu_milli=[cpu_free], memory_mib=[1 << 20],
                              models=[model])
    states.gpu_free[0, : len(cards)] = cards
    states.gpu_free[0, len(cards):] = 0
    states.gpu_count[0] = len(cards)
    return states


def test_target_keeps_the_most_frequent_shapes_until_the_threshold() -> None:
    a, b, c, d = (ShapeKey(1000 * i, 0, 0) for i in range(1, 5))
    counts = {a: 50.0, b: 30.0, c: 15.0, d: 5.0}
    target = TargetWorkload.from_counts(counts, popularity=95)
    assert target.shapes == (a, b, c)
    assert target.prob == pytest.approx([50 / 95, 30 / 95, 15 / 95])
    assert TargetWorkload.from_counts(counts, popularity=80).shapes == (a, b)
    assert TargetWorkload.from_counts(counts, popularity=100).shapes == (a, b, c, d)


def test_equal_counts_keep_the_larger_shape_first() -> None:
    small, large = ShapeKey(1000, 500, 1), ShapeKey(2000, 100, 1)
    target = TargetWorkload.from_keys([small, large, large, small, ShapeKey(500, 0, 0)],
                                      popularity=50)
    assert target.shapes == (large, small)


@pytest.mark.parametrize(("trace", "shapes", "kept", "first"), [
    ("default", 91, 35, 0.128),  # the most common shape, 12.8 % of the pods
    ("sample", 51, 35, 0.135),
])
def test_trace_target_keeps_the_shapes_covering_95_percent(
        trace: str, shapes: int, kept: int, first: float) -> None:
    pods = load_pods(trace_files(trace).pods)
    keys = [shape_key(p.shape, p.spec_text) for p in pods]
    target = TargetWorkload.from_keys(keys)
    assert len(set(keys)) == shapes and len(target) == kept
    assert target.prob.sum() == pytest.approx(1.0)
    assert target.shapes[0] == ShapeKey(3152, 810, 1)
    assert keys.count(target.shapes[0]) / len(keys) == pytest.approx(first, abs=0.001)
    assert any(k.num_gpu == 0 for k in target.shapes)


def test_fragment_of_a_hand_made_node() -> None:
    """Cards [1000, 300, 0, 1000], 8 cores free. CPU-only shape: all 2300 idle milli; the
    500-milli shape fits, leaving 300 + 0 on cards too small; the 2-card shape lacks CPU, so
    all 2300. F = 0.25·2300 + 0.5·300 + 0.25·2300 = 1300."""
    target = TargetWorkload.from_counts({CPU_ONLY: 1, SHARE_500: 2, TWO_CARDS: 1}, popularity=100)
    states = one_node([1000, 300, 0, 1000], cpu_free=8000)
    assert fragment_of_nodes(states, target)[0] == pytest.approx(1300)
    # With 16 cores the 2-card shape fits on the two whole cards and only 300 is fragment.
    states = one_node([1000, 300, 0, 1000], cpu_free=16000)
    assert fragment_of_nodes(states, target)[0] == pytest.approx(0.25 * 2300 + 0.5 * 300 + 0.25 * 300)


def test_a_card_model_the_shape_does_not_accept_is_all_fragment() -> None:
    only_t4 = ShapeKey(1000, 500, 1, "T4")
    target = TargetWorkload.from_counts({only_t4: 1}, popularity=100)
    assert fragment_of_nodes(one_node([1000, 200], cpu_free=4000, model="T4"), target)[0] == 200
    assert fragment_of_nodes(one_node([1000, 200], cpu_free=4000, model="G2"), target)[0] == 1200


def test_cache_follows_placements_row_by_row() -> None:
    target = TargetWorkload.from_counts({CPU_ONLY: 1, SHARE_500: 2, TWO_CARDS: 1}, popularity=100)
    states = NodeStates.build(gpu_counts=[2, 4], cpu_milli=[32000, 32000],
                              memory_mib=[1000, 1000], models=["A", "A"])
    cache = FragmentCache(states, target)
    assert cache.total() == pytest.approx(0.25 * 2000 + 0.25 * 4000)
    states.place(1, PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=700), [2])
    assert cache.total() == pytest.approx(float(fragment_of_nodes(states, target).sum()))
    assert cache.per_node[1] == pytest.approx(0.25 * 3300 + 0.5 * 300 + 0.25 * 300)


# --- against the brute-force reading --------------------------------------------------------

MODELS = ("A", "B")
card_values = st.sampled_from([0, 50, 100, 250, 300, 500, 700, 1000, 1000])
shape_keys = st.builds(
    lambda cpu, gpu, spec: ShapeKey(cpu, *gpu, spec if gpu[1] else ""),
    st.sampled_from([0, 1000, 4000, 16000]),
    st.sampled_from([(0, 0), (100, 1), (300, 1), (500, 1), (1000, 1), (1000, 2), (1000, 4)]),
    st.sampled_from(["", "A", "B", "A|B"]),
)
targets = st.dictionaries(shape_keys, st.integers(1, 20), min_size=1, max_size=6).map(
    lambda counts: TargetWorkload.from_counts({k: float(v) for k, v in counts.items()},
                                              popularity=100))
node_lists = st.lists(
    st.tuples(st.lists(card_values, min_size=1, max_size=8), st.integers(0, 40),
              st.sampled_from(MODELS)),
    min_size=1, max_size=6,
)


def build(nodes: list[tuple[list[int], int, str]]) -> NodeStates:
    states = NodeStates.build(
        gpu_counts=[len(cards) for cards, _, _ in nodes],
        cpu_milli=[cores * 1000 for _, cores, _ in nodes],
        memory_mib=[1000] * len(nodes),
        models=[model for _, _, model in nodes],
    )
    for i, (cards, _, _) in enumerate(nodes):
        states.gpu_free[i, : len(cards)] = cards
    states.version += 1
    return states


@settings(max_examples=150, deadline=None)
@given(nodes=node_lists, target=targets)
def test_vectorised_fragment_equals_brute_force(
    nodes: list[tuple[list[int], int, str]], target: TargetWorkload
) -> None:
    states = build(nodes)
    expected = [node_fragment(cards, cores * 1000, model, target) for cards, cores, model in nodes]
    assert fragment_of_nodes(states, target) == pytest.approx(expected)
    assert FragmentCache(states, target).per_node == pytest.approx(expected)


@settings(max_examples=150, deadline=None)
@given(nodes=node_lists, target=targets, milli=st.sampled_from([50, 100, 300, 500, 1000]),
       cores=st.integers(0, 8), data=st.data())
def test_fragment_after_a_placement_equals_recomputing(
    nodes: list[tuple[list[int], int, str]], target: TargetWorkload, milli: int, cores: int,
    data: st.DataObject,
) -> None:
    states = build(nodes)
    cache = FragmentCache(states, target)
    node = data.draw(st.integers(0, len(nodes) - 1))
    cards, cpu_cores, model = nodes[node]
    if cpu_cores < cores:
        return
    fitting = [g for g, free in enumerate(cards) if free >= milli]
    if not fitting:
        return
    card = data.draw(st.sampled_from(fitting))
    pod = PodShape(cpu_milli=cores * 1000, num_gpu=1, gpu_milli=milli)
    after = list(cards)
    after[card] -= milli
    expected = node_fragment(after, (cpu_cores - cores) * 1000, model, target)
    if pod.is_share:
        got = cache.after_share(pod, np.array([node]), np.array([cards[card]]))[0]
    else:
        got = cache.after_whole(pod, np.array([node]))[0]
    assert got == pytest.approx(expected)
    cpu_pod = PodShape(cpu_milli=cores * 1000)
    assert cache.after_whole(cpu_pod, np.array([node]))[0] == pytest.approx(
        node_fragment(cards, (cpu_cores - cores) * 1000, model, target))


@settings(max_examples=100, deadline=None)
@given(nodes=node_lists, target=targets, memory=st.lists(st.integers(0, 64), min_size=6,
                                                           max_size=6), data=st.data())
def test_memory_aware_fragment_equals_brute_force(
    nodes: list[tuple[list[int], int, str]], target: TargetWorkload, memory: list[int],
    data: st.DataObject,
) -> None:
    states = build(nodes)
    states.mem_free[:] = memory[: len(nodes)]
    states.version += 1
    needs = {key: float(data.draw(st.integers(0, 64))) for key in target.shapes}
    aware = target.with_memory(needs)
    expected = [node_fragment(cards, cores * 1000, model, aware, mem_free=memory[i])
                for i, (cards, cores, model) in enumerate(nodes)]
    cache = FragmentCache(states, aware)
    assert cache.per_node == pytest.approx(expected)
    node = data.draw(st.integers(0, len(nodes) - 1))
    cards, cores, model = nodes[node]
    pod = PodShape(cpu_milli=0, memory_mib=min(memory[node], 8))
    assert cache.after_whole(pod, np.array([node]))[0] == pytest.approx(node_fragment(
        cards, cores * 1000, model, aware, mem_free=memory[node] - pod.memory_mib))


def test_memory_starved_cards_are_fragment() -> None:
    """A 1-card shape needing 64 GiB: a node with a free card but 32 GiB free cannot host it."""
    target = TargetWorkload.from_counts({ShapeKey(1000, 1000, 1): 1}, popularity=100)
    states = one_node([1000, 0], cpu_free=8000)
    states.mem_free[0] = 32 * 1024
    assert fragment_of_nodes(states, target)[0] == 0
    hungry = target.with_memory({ShapeKey(1000, 1000, 1): 64 * 1024})
    assert fragment_of_nodes(states, hungry)[0] == 1000
