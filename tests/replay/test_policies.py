"""Node scores and card choice of the six published policies (paper §B.3/§B.4) and ours.

Hand values follow the reference simulator's score plugins (hkust-adsl/
kubernetes-scheduler-simulator ``pkg/simulator/plugin``): ``calculateDotProductScore``,
``GpuClusteringScorePlugin.Score``, ``getPackingScore``, ``getBestFitScore`` with
``NormalizeScore``, ``calculateGpuShareFragExtendScore`` (FGD), ``RandomScorePlugin`` and the
card choosers ``allocateGpuIdBasedOnBestFit`` / ``allocateGpuIdBasedOnRandomFit`` /
``AllocateExclusiveGpuId``.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.devices.placement.fgd import FgdPolicy
from scheduler.devices.placement.frag import ShapeKey, TargetWorkload
from scheduler.devices.placement.online import FgdOnlinePolicy, OnlineTargetWorkload
from scheduler.devices.placement.policies import POLICIES, make_policy, select_node
from scheduler.devices.placement.state import NodeStates, PodShape, feasible_mask
from tests.replay.bruteforce import fgd_node_score

SHARE = PodShape(cpu_milli=4000, num_gpu=1, gpu_milli=500)
WHOLE = PodShape(cpu_milli=8000, num_gpu=1, gpu_milli=1000)
TWO = PodShape(cpu_milli=8000, num_gpu=2, gpu_milli=1000)
CPU = PodShape(cpu_milli=2000)


def cluster() -> NodeStates:
    """n0: 8 untouched cards, 96 cores free. n1: cards [600, 1000], 50 cores free, hosts one
    sharing pod. n2: cards [1000, 0, 0, 1000], 20 cores free, hosts two 1-card pods. n3: one
    card with 200 free, 4 cores free, hosts two sharing pods."""
    states = NodeStates.build(gpu_counts=[8, 2, 4, 1], cpu_milli=[96000, 50000, 20000, 4000],
                              memory_mib=[1 << 20] * 4, models=["G2", "T4", "V100", "P100"])
    states.gpu_free[1, :2] = [600, 1000]
    states.gpu_free[2, :4] = [1000, 0, 0, 1000]
    states.gpu_free[3, :1] = [200]
    states.tags[1, 0] = 1
    states.tags[2, 1] = 2
    states.tags[3, 0] = 2
    return states


def scores(name: str, pod: PodShape, **kwargs: object) -> list[int]:
    states = cluster()
    policy = make_policy(name, states, rng=random.Random(0), **kwargs)  # type: ignore[arg-type]
    candidates = np.flatnonzero(feasible_mask(pod, states))
    return [int(s) for s in policy.score(pod, candidates)]


def test_feasible_nodes_of_the_hand_cluster() -> None:
    states = cluster()
    assert list(np.flatnonzero(feasible_mask(SHARE, states))) == [0, 1, 2]
    assert list(np.flatnonzero(feasible_mask(WHOLE, states))) == [0, 1, 2]
    assert list(np.flatnonzero(feasible_mask(TWO, states))) == [0, 2]
    assert list(np.flatnonzero(feasible_mask(CPU, states))) == [0, 1, 2, 3]
    only_t4 = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=100, gpu_spec=frozenset({"T4"}))
    assert list(np.flatnonzero(feasible_mask(only_t4, states))) == [1]


def test_dotprod_scores() -> None:
    """Pod vector (4/128, 500/8000) = (0.03125, 0.0625). n0: (0.75, 1) → dot 0.0859375,
    ⌊100·(1 − dot/2)⌋ = 95; n1: (0.390625, 0.2) → 98; n2: (0.15625, 0.25) → 98."""
    assert scores("dotprod", SHARE) == [95, 98, 98]


def test_clustering_scores() -> None:
    """Sharing pod: n0 hosts nothing (25 + 25·0/8000); n1 hosts only sharing pods
    (75 + 25·6400/8000 = 95); n2 only 1-card pods (0 + 25·6000/8000 = 18)."""
    assert scores("clustering", SHARE) == [25, 95, 18]
    assert scores("clustering", WHOLE) == [25, 20, 93]
    assert scores("clustering", CPU) == [0, 0, 0, 0]


def test_clustering_band_for_a_node_hosting_several_kinds() -> None:
    states = cluster()
    states.tags[2, 0] = 1  # n2 now hosts sharing and 1-card pods
    policy = make_policy("clustering", states, rng=random.Random(0))
    assert list(policy.score(SHARE, np.array([2]))) == [50 + 18]
    assert list(policy.score(WHOLE, np.array([2]))) == [50 + 18]


def test_packing_scores() -> None:
    """Sharing pod: untouched n0 → max(33 − 8, 8) = 25; n1 shares the 600-milli card →
    100 − (600·100/1000)/10 = 94; n2 must take a whole card → 50 − 1 = 49."""
    assert scores("packing", SHARE) == [25, 94, 49]
    assert scores("packing", WHOLE) == [25, 49, 49]
    assert scores("packing", TWO) == [25, 48]
    assert scores("packing", CPU) == [0, 0, 0, 0]


def test_packing_untouched_small_node_and_floor_of_shared_band() -> None:
    states = NodeStates.build(gpu_counts=[1, 2], cpu_milli=[8000, 8000], memory_mib=[10, 10],
                              models=["A", "A"])
    states.gpu_free[1, 0] = 990
    policy = make_policy("packing", states, rng=random.Random(0))
    # 1-card untouched node: max(33 − 1, 1) = 32; a 990-milli shared card: 100 − 9 = 91.
    assert list(policy.score(PodShape(cpu_milli=1, num_gpu=1, gpu_milli=10), np.array([0, 1]))) == [32, 91]


def test_bestfit_scores_are_min_max_normalised() -> None:
    """Raw ⌊100·(1 − ½·cpu_left/128 − ½·gpu_left/8000)⌋: n0 17, n1 75, n2 84; normalised
    (s − 17)·100 // 67 → 0, 86, 100."""
    assert scores("bestfit", SHARE) == [0, 86, 100]
    states = cluster()
    policy = make_policy("bestfit", states, rng=random.Random(0))
    assert list(policy.score(SHARE, np.array([1]))) == [0]


def test_random_scores_one_candidate_uniformly() -> None:
    states = cluster()
    policy = make_policy("random", states, rng=random.Random(5))
    picks: Counter[int] = Counter()
    for _ in range(3000):
        got = policy.score(SHARE, np.array([0, 1, 2]))
        assert sorted(got.tolist()) == [0, 0, 100]
        picks[int(np.argmax(got))] += 1
    assert all(900 < picks[i] < 1100 for i in range(3))
    cards = Counter(policy.choose_cards(SHARE, 0)[0] for _ in range(4000))
    assert set(cards) == set(range(8)) and all(400 < c < 600 for c in cards.values())
    assert policy.choose_cards(SHARE, 1) in {(0,), (1,)}
    assert policy.choose_cards(TWO, 2) == (0, 3)


@pytest.mark.parametrize("name", ["dotprod", "clustering", "packing", "bestfit"])
def test_baselines_give_the_tightest_card(name: str) -> None:
    states = cluster()
    policy = make_policy(name, states, rng=random.Random(0))
    assert policy.choose_cards(SHARE, 1) == (0,)  # 600 free beats 1000
    assert policy.choose_cards(SHARE, 0) == (0,)
    assert policy.choose_cards(WHOLE, 2) == (0,)
    assert policy.choose_cards(TWO, 0) == (0, 1)
    assert policy.choose_cards(CPU, 3) == ()


# --- FGD ------------------------------------------------------------------------------------

TARGET = TargetWorkload.from_counts({ShapeKey(1000, 500, 1): 1, ShapeKey(1000, 1000, 1): 1},
                                    popularity=100)


def fgd_cluster() -> NodeStates:
    states = NodeStates.build(gpu_counts=[2, 2, 1], cpu_milli=[8000, 8000, 1500],
                              memory_mib=[10, 10, 10], models=["A", "A", "A"])
    states.gpu_free[1, :2] = [600, 1000]
    return states


def test_fgd_scores_and_cards_by_hand() -> None:
    """Target: half 500-milli, half 1-card pods (1 core each); the pod asks 500 milli, 1 core.
    n0 [1000, 1000]: F 0 → [500, 1000] F = ½·500 → Δ −250 → ⌊100·σ(−0.25)⌋ = 43.
    n1 [600, 1000]: F = ½·600; card 0 → [100, 1000] F = 100 → Δ 200 → 54 (card 1 gives 43).
    n2 [1000], 1.5 cores: after, 0.5 core starves both shapes → F = 500 → Δ −500 → 37."""
    states = fgd_cluster()
    policy = FgdPolicy(states, target=TARGET)
    pod = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=500)
    assert list(policy.score(pod, np.array([0, 1, 2]))) == [43, 54, 37]
    assert policy.choose_cards(pod, 1) == (0,)
    assert policy.choose_cards(pod, 0) == (0,)
    whole = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=1000)
    # n0 → [0, 1000]: F stays 0 → 50. n1 → [600, 0]: the 600 card was already too small for
    # the 1-card shape, and now that shape finds no card at all: F = ½·0 + ½·600, Δ 0 → 50.
    # n2 → [0], 0.5 core left: every shape fails, but no milli is idle: F 0 → 50.
    assert list(policy.score(whole, np.array([0, 1, 2]))) == [50, 50, 50]
    cpu_only = PodShape(cpu_milli=1000)
    # Only n2 changes: 0.5 core left starves both shapes of its 1000 idle milli → Δ −1000 → 26.
    assert list(policy.score(cpu_only, np.array([0, 1, 2]))) == [50, 50, 26]
    assert policy.choose_cards(whole, 1) == (1,)


@settings(max_examples=100, deadline=None)
@given(
    cards=st.lists(st.lists(st.sampled_from([0, 100, 300, 450, 700, 1000, 1000]), min_size=1,
                            max_size=8), min_size=1, max_size=5),
    cores=st.lists(st.integers(0, 32), min_size=5, max_size=5),
    pod=st.sampled_from([SHARE, WHOLE, TWO, CPU, PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=300)]),
)
def test_fgd_equals_brute_force(cards: list[list[int]], cores: list[int], pod: PodShape) -> None:
    target = TargetWorkload.from_counts(
        {ShapeKey(1000, 0, 0): 2, ShapeKey(4000, 300, 1): 3, ShapeKey(2000, 500, 1): 1,
         ShapeKey(8000, 1000, 2): 1, ShapeKey(1000, 1000, 1, "B"): 1}, popularity=100)
    models = ["A" if i % 2 else "B" for i in range(len(cards))]
    states = NodeStates.build(gpu_counts=[len(c) for c in cards],
                              cpu_milli=[c * 1000 for c in cores[: len(cards)]],
                              memory_mib=[10] * len(cards), models=models)
    for i, free in enumerate(cards):
        states.gpu_free[i, : len(free)] = free
    states.version += 1
    policy = FgdPolicy(states, target=target)
    candidates = np.flatnonzero(feasible_mask(pod, states))
    got = policy.score(pod, candidates)
    for j, node in enumerate(candidates):
        score, chosen = fgd_node_score(cards[node], cores[node] * 1000, models[node], target,
                                       cpu=pod.cpu_milli, milli=pod.gpu_milli, num=pod.num_gpu)
        assert got[j] == score
        assert policy.choose_cards(pod, int(node)) == chosen


# --- selection, registry --------------------------------------------------------------------


def test_select_node_ties() -> None:
    candidates = np.array([4, 7, 9])
    assert select_node(np.array([5, 9, 9]), candidates, random.Random(0)) == 7
    drawn = Counter(select_node(np.array([5, 9, 9]), candidates, random.Random(s), ties="random")
                    for s in range(400))
    assert set(drawn) == {7, 9}
    with pytest.raises(ValueError, match="ties must be one of"):
        select_node(np.array([1]), candidates[:1], random.Random(0), ties="last")
    with pytest.raises(ValueError, match="no candidate node"):
        select_node(np.array([], dtype=np.int64), candidates[:0], random.Random(0))
    states = cluster()
    policy = make_policy("fgd", states, rng=random.Random(0), target=TARGET)
    assert policy.score(SHARE, np.array([], dtype=np.int64)).size == 0


def test_registry_and_factory_errors() -> None:
    assert set(POLICIES) == {"random", "dotprod", "clustering", "packing", "bestfit", "fgd",
                             "fgd-online", "fgd-learned"}
    states = cluster()
    with pytest.raises(ValueError, match="unknown placement policy 'tetris'"):
        make_policy("tetris", states, rng=random.Random(0))
    with pytest.raises(ValueError, match="'fgd' needs the target workload"):
        make_policy("fgd", states, rng=random.Random(0))
    with pytest.raises(ValueError, match="'packing' takes no options, got refresh"):
        make_policy("packing", states, rng=random.Random(0), refresh=3)
    assert make_policy("fgd-online", states, rng=random.Random(0), refresh=5).name == "fgd-online"


# --- ours: the online target workload -------------------------------------------------------


def test_online_estimate_counts_and_decays() -> None:
    a = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=500)
    b = PodShape(cpu_milli=2000)
    plain = OnlineTargetWorkload()
    for shape in (a, a, b, a):
        plain.observe(shape)
    assert plain.weights() == {ShapeKey(1000, 500, 1): 0.75, ShapeKey(2000, 0, 0): 0.25}
    halving = OnlineTargetWorkload(half_life=1)
    halving.observe(a)
    halving.observe(b)
    assert halving.weights()[ShapeKey(2000, 0, 0)] == pytest.approx(2 / 3)
    assert halving.target().shapes == (ShapeKey(2000, 0, 0), ShapeKey(1000, 500, 1))


def test_online_estimate_survives_rescaling_and_forgets_old_shapes() -> None:
    fast = OnlineTargetWorkload(half_life=0.5)
    old, new = PodShape(cpu_milli=1000), PodShape(cpu_milli=3000)
    for _ in range(50):
        fast.observe(old)
    for _ in range(300):  # 2**(300/0.5) overflows without rescaling
        fast.observe(new)
    weights = fast.weights()
    assert sum(weights.values()) == pytest.approx(1.0)
    assert weights[ShapeKey(3000, 0, 0)] == pytest.approx(1.0)
    assert fast.target().shapes == (ShapeKey(3000, 0, 0),)
    with pytest.raises(ValueError, match="half_life"):
        OnlineTargetWorkload(half_life=0)
    with pytest.raises(ValueError, match="no pod has arrived"):
        OnlineTargetWorkload().target()


def test_online_policy_rebuilds_on_a_doubling_then_fixed_schedule() -> None:
    states = cluster()
    policy = FgdOnlinePolicy(states, refresh=4)
    shapes = [PodShape(cpu_milli=1000 * (i + 1)) for i in range(10)]
    sizes = []
    for shape in shapes:
        policy.observe(shape)
        assert policy.cache is not None
        sizes.append(len(policy.cache.target.shapes))
    # rebuilt after 1, 2, 4 (doubling up to refresh), then 8 (every 4)
    assert sizes == [1, 2, 2, 4, 4, 4, 4, 8, 8, 8]


def test_online_policy_scores_like_fgd_against_the_same_target() -> None:
    states = fgd_cluster()
    policy = FgdOnlinePolicy(states, refresh=1, popularity=100)
    policy.observe(PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=500))
    policy.observe(PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=1000))
    pod = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=500)
    assert list(policy.score(pod, np.array([0, 1, 2]))) == [43, 54, 37]
    assert policy.choose_cards(pod, 1) == (0,)


def test_online_estimate_tracks_the_median_memory_of_each_shape() -> None:
    estimate = OnlineTargetWorkload()
    for memory in (8, 16, 16, 64):
        estimate.observe(PodShape(cpu_milli=1000, memory_mib=memory, num_gpu=1, gpu_milli=500))
    estimate.observe(PodShape(cpu_milli=2000, memory_mib=4))
    assert estimate.memory_needs() == {ShapeKey(1000, 500, 1): 16.0, ShapeKey(2000, 0, 0): 4.0}
    assert estimate.target().memory is None
    aware = estimate.target(memory_aware=True)
    assert aware.memory is not None and list(aware.memory) == [16.0, 4.0]


def test_memory_aware_online_policy_avoids_starving_a_card_of_memory() -> None:
    """Two 1-card nodes with 32 GiB free; the 1-card shape seen so far needs 24 GiB. A CPU-only
    pod of 16 GiB would leave node 0's card without the memory its shape needs (Δ −1000 → 26),
    so the memory-aware policy prefers node 1, whose card is already taken (Δ 0 → 50)."""
    states = NodeStates.build(gpu_counts=[1, 1], cpu_milli=[64000, 64000],
                              memory_mib=[32768, 32768], models=["A", "A"])
    states.gpu_free[1, 0] = 0
    states.version += 1
    plain = FgdOnlinePolicy(states, refresh=1)
    aware = FgdOnlinePolicy(states, refresh=1, memory_aware=True)
    for policy in (plain, aware):
        policy.observe(PodShape(cpu_milli=1000, memory_mib=24576, num_gpu=1, gpu_milli=1000))
    hog = PodShape(cpu_milli=1000, memory_mib=16384)
    assert list(plain.score(hog, np.array([0, 1]))) == [50, 50]
    assert list(aware.score(hog, np.array([0, 1]))) == [26, 50]
