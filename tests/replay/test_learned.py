"""``fgd-learned``: hand-computed scores, a brute-force reading, learning, and its arguments.

The score is FGD's (``calculateGpuShareFragExtendScore`` in hkust-adsl/kubernetes-scheduler-
simulator ``pkg/simulator/plugin/fgd_score.go``: ⌊100·σ(Δ/1000)⌋ of the fragment change,
``GetNodePodFrag`` of ``pkg/utils/frag.go`` for the fragment) with the sigmoid's scale an
argument and the target workload counted from the pods placed and pending.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api.resource import Resource
from scheduler.devices.finegrained.names import GPU_CORE, GPU_MEMORY_RATIO
from scheduler.devices.finegrained.placement import (
    LearnedShapes,
    parse_policy_arguments,
    task_shape_key,
)
from scheduler.devices.placement.frag import ShapeKey, TargetWorkload
from scheduler.devices.placement.learned import (
    LearnedArgs,
    LearnedFgdPolicy,
    learned_key,
    reserve_holds,
    reserved_cards,
)
from scheduler.devices.placement.policies import make_policy
from scheduler.devices.placement.state import NodeStates, PodShape
from tests.replay.bruteforce import full_count, node_fragment, starved_fragment

SHARE_500 = ShapeKey(1000, 500, 1)
WHOLE_1 = ShapeKey(1000, 1000, 1)
HALF_AND_WHOLE = {SHARE_500: 1.0, WHOLE_1: 1.0}


def nodes(cards: list[list[int]], *, cpu: int = 32000) -> NodeStates:
    width = max(len(c) for c in cards)
    states = NodeStates.build(gpu_counts=[len(c) for c in cards], cpu_milli=[cpu] * len(cards),
                              memory_mib=[1 << 20] * len(cards), models=["A"] * len(cards))
    for row, free in enumerate(cards):
        states.gpu_free[row, : len(free)] = free
        states.gpu_free[row, len(free): width] = 0
    return states


def test_share_pod_scores_by_hand() -> None:
    """Target {500 on one card: ½, a whole card: ½}. A 500 pod on an empty card leaves 500
    the whole-card shape cannot use: Δ = 0 − ½·500 = −250. On a card with 500 free it takes
    the 500 the whole-card shape could not use: Δ = ½·500 − 0 = +250."""
    states = nodes([[1000], [500]])
    policy = LearnedFgdPolicy(states, learned=HALF_AND_WHOLE)
    pod = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=500)
    scores = policy.score(pod, np.array([0, 1]))
    assert scores.tolist() == [math.floor(100 / (1 + math.exp(250 / 2000))),   # 46
                               math.floor(100 / (1 + math.exp(-250 / 2000)))]  # 53
    fgd_bands = LearnedFgdPolicy(states, learned=HALF_AND_WHOLE, args=LearnedArgs(scale=1000))
    assert fgd_bands.score(pod, np.array([0, 1])).tolist() == [43, 56]


def test_wider_bands_put_near_equal_nodes_together() -> None:
    """A 500 pod on [1000, 600] takes the 600 card: the fragment goes from ½·600 (the 600
    card, to the whole-card shape) to ½·100 + ½·100, Δ = +200; on [1000, 1000] Δ = −250
    (as above). FGD's scale keeps them 13 points apart, a 100-fold wider one a single
    point, leaving the choice to the tie-break once the bands are that wide."""
    states = nodes([[1000, 600], [1000, 1000]])
    pod = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=500)
    fine = LearnedFgdPolicy(states, learned=HALF_AND_WHOLE, args=LearnedArgs(scale=1000))
    wide = LearnedFgdPolicy(states, learned=HALF_AND_WHOLE, args=LearnedArgs(scale=100_000))
    assert fine.score(pod, np.array([0, 1])).tolist() == [54, 43]
    assert wide.score(pod, np.array([0, 1])).tolist() == [50, 49]


def test_whole_card_and_cpu_only_pods_by_hand() -> None:
    """A whole-card pod on [1000, 500]: before, the 500 card is fragment for the whole-card
    shape (½·500 = 250); after, only 500 is left, still fragment to it (250): Δ = 0 → 50.
    A CPU-only pod that leaves too little CPU for both shapes (1000 each) makes all 1500 free
    milli fragment: Δ = 250 − 1500 = −1250."""
    states = nodes([[1000, 500]], cpu=1500)
    policy = LearnedFgdPolicy(states, learned=HALF_AND_WHOLE, args=LearnedArgs(starved=0))
    whole = PodShape(cpu_milli=0, num_gpu=1, gpu_milli=1000)
    assert policy.score(whole, np.array([0])).tolist() == [50]
    cpu_only = PodShape(cpu_milli=1000)
    assert policy.score(cpu_only, np.array([0])).tolist() == [
        math.floor(100 / (1 + math.exp(1250 / 2000)))]


def test_starved_gpu_weighs_in_by_hand() -> None:
    """Target {8 CPU cores with a whole card}: 8 CPU milli per GPU milli. Node 0 has two
    free cards and the 16 cores they need, node 1 two free cards and 32 cores.

    A CPU-only pod of 8 cores leaves node 0 one card's CPU for two free cards (1000 milli
    starved; FGD's measure sees the whole-card shape still fit: 0), Δ = −1000 → 37; on node 1
    it starves nothing, Δ = 0 → 50. FGD's measure alone ties them (50, 50) and the first
    node would take it. A one-card pod asking 16 cores on node 0 leaves a card with no CPU
    (fragment 1000 to FGD, starved 1000 more), Δ = −2000 → 26; on node 1 nothing → 50."""
    states = nodes([[1000, 1000], [1000, 1000]])
    states.cpu_free[:] = [16000, 32000]
    learned = {ShapeKey(8000, 1000, 1): 1.0}
    policy = LearnedFgdPolicy(states, learned=learned)
    fgd_alone = LearnedFgdPolicy(states, learned=learned, args=LearnedArgs(starved=0))
    cpu_only = PodShape(cpu_milli=8000)
    assert policy.score(cpu_only, np.array([0, 1])).tolist() == [
        math.floor(100 / (1 + math.exp(1000 / 2000))), 50]
    assert fgd_alone.score(cpu_only, np.array([0, 1])).tolist() == [50, 50]
    heavy = PodShape(cpu_milli=16000, num_gpu=1, gpu_milli=1000)
    assert policy.score(heavy, np.array([0, 1])).tolist() == [
        math.floor(100 / (1 + math.exp(2000 / 2000))), 50]
    twice = LearnedFgdPolicy(states, learned=learned, args=LearnedArgs(starved=2))
    assert twice.score(cpu_only, np.array([0])).tolist() == [
        math.floor(100 / (1 + math.exp(2000 / 2000)))]


def test_multi_card_pods_are_placed_by_fgd_measure_alone() -> None:
    """Target {8 cores with a card}: 8 CPU milli per GPU milli. A 4-card node with 24 cores
    starves 1000 milli; a 2-card pod asking all 24 cores leaves 2000 starved (Δ −1000 from
    the term), but the term is not applied to a multi-card pod, so it scores as with
    ``starved: 0``; a one-card pod asking 16 cores (Δ −1000 from the term too) does not."""
    states = nodes([[1000, 1000, 1000, 1000]], cpu=24000)
    learned = {ShapeKey(8000, 1000, 1): 1.0}
    pod = PodShape(cpu_milli=24000, num_gpu=2, gpu_milli=1000)
    with_term = LearnedFgdPolicy(states, learned=learned)
    alone = LearnedFgdPolicy(states, learned=learned, args=LearnedArgs(starved=0))
    assert with_term.score(pod, np.array([0])).tolist() == alone.score(
        pod, np.array([0])).tolist()
    one_card = PodShape(cpu_milli=16000, num_gpu=1, gpu_milli=1000)
    assert with_term.score(one_card, np.array([0])).tolist() != alone.score(
        one_card, np.array([0])).tolist()


def test_no_starved_term_without_a_gpu_shape() -> None:
    """Only CPU-only pods seen: no CPU per GPU milli to weigh by, FGD's measure alone."""
    states = nodes([[1000, 1000]], cpu=2000)
    policy = LearnedFgdPolicy(states, learned={ShapeKey(1000, 0, 0): 1.0})
    assert policy.score(PodShape(cpu_milli=1000), np.array([0])).tolist() == [50]


def test_card_choice_best_fit_or_by_fragment() -> None:
    """A 300 pod, target {300: ½, whole card: ½}. On [1000, 400, 350] best fit takes the 350
    card; by fragment the 400 card gives Δ = 375 − 275 = +100, the 350 card 375 − 250 =
    +125: 52 against 53 at scale 1000, so the 350 card, but both 51 at scale 2000, so the
    first of them. On [1000, 400, 650] best fit takes 400; by fragment the 650 card (Δ +150,
    it leaves 350 the 300 shape still fits) beats the 400 card (Δ +100) at scale 1000."""
    target = {ShapeKey(1000, 300, 1): 1.0, WHOLE_1: 1.0}
    pod = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=300)
    states = nodes([[1000, 400, 350], [1000, 400, 650]])
    best = LearnedFgdPolicy(states, learned=target)
    by_fragment = LearnedFgdPolicy(states, learned=target,
                                   args=LearnedArgs(cards="fragment", scale=1000))
    wide = LearnedFgdPolicy(states, learned=target, args=LearnedArgs(cards="fragment"))
    assert best.choose_cards(pod, 0) == (2,)
    assert by_fragment.choose_cards(pod, 0) == (2,)
    assert wide.choose_cards(pod, 0) == (1,)
    assert best.choose_cards(pod, 1) == (1,)
    assert by_fragment.choose_cards(pod, 1) == (2,)
    whole = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=1000)
    assert best.choose_cards(whole, 1) == (0,)
    assert best.choose_cards(PodShape(cpu_milli=1000), 1) == ()


def test_reference_loop_counts_placed_and_pending_pods() -> None:
    states = nodes([[1000]])
    policy = make_policy("fgd-learned", states, rng=random.Random(0))
    assert isinstance(policy, LearnedFgdPolicy)
    first = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=500)
    assert policy.score(first, np.array([0])).tolist() == [0]  # nothing seen: all tie
    policy.observe(first)
    target = policy.target()
    assert target is not None and target.shapes == (learned_key(first),)
    policy.choose_cards(first, 0)
    failed = PodShape(cpu_milli=1000, num_gpu=2, gpu_milli=1000)
    policy.observe(failed)  # never placed: pending only until the next pod arrives
    target = policy.target()
    assert target is not None and set(target.shapes) == {learned_key(first), learned_key(failed)}
    third = PodShape(cpu_milli=2000)
    policy.observe(third)
    target = policy.target()
    assert target is not None and set(target.shapes) == {learned_key(first), learned_key(third)}


def test_learned_keys_ignore_card_models() -> None:
    pod = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=500, gpu_spec=frozenset({"T4"}))
    assert learned_key(pod) == ShapeKey(1000, 500, 1, "")


class _Task:
    def __init__(self, cpu: int, scalars: dict[str, float]) -> None:
        self.resreq = Resource(milli_cpu=cpu, scalars=scalars)


@pytest.mark.parametrize(("scalars", "key"), [
    pytest.param({}, ShapeKey(4000, 0, 0), id="cpu-only"),
    pytest.param({GPU_CORE: 81_000, GPU_MEMORY_RATIO: 81_000}, ShapeKey(4000, 810, 1),
                 id="share"),
    pytest.param({GPU_MEMORY_RATIO: 50_000}, ShapeKey(4000, 500, 1), id="ratio-only"),
    pytest.param({GPU_CORE: 100_000}, ShapeKey(4000, 1000, 1), id="one-card"),
    pytest.param({GPU_CORE: 800_000}, ShapeKey(4000, 1000, 8), id="eight-cards"),
])
def test_task_shapes_from_requests(scalars: dict[str, float], key: ShapeKey) -> None:
    assert task_shape_key(_Task(4000, scalars)) == key


def test_session_recount_replaces_the_counts() -> None:
    shapes = LearnedShapes()
    shapes.recount_rows([], [_Task(1000, {GPU_CORE: 50_000})] * 3 + [_Task(2000, {})])
    assert shapes.counts == {ShapeKey(1000, 500, 1): 3.0, ShapeKey(2000, 0, 0): 1.0}
    shapes.recount_rows([], [])
    assert shapes.counts == {}


class _Node:
    def __init__(self, tasks: list[_Task]) -> None:
        self.tasks = dict(enumerate(tasks))


@given(st.randoms(use_true_random=False), st.integers(min_value=1, max_value=25))
@settings(max_examples=40, deadline=None)
def test_rows_counted_again_only_where_renewed_equal_a_full_count(
        rnd: random.Random, sessions: int) -> None:
    """Sessions whose tables carry the last one's rows over: pods placed, removed and changed
    on some nodes (those rows renewed), others untouched; the counts must equal a full count
    every time, and a table of another length is counted in full."""
    def task() -> _Task:
        return _Task(rnd.choice((1000, 2000)),
                     rnd.choice(({}, {GPU_CORE: 50_000}, {GPU_CORE: 100_000},
                                 {GPU_MEMORY_RATIO: 25_000})))
    cluster = [_Node([task() for _ in range(rnd.randint(0, 4))]) for _ in range(6)]
    shapes = LearnedShapes()
    rebuilt = True  # the first table has no previous one
    for _ in range(sessions):
        renewed = sorted(rnd.sample(range(len(cluster)), rnd.randint(0, 3)))
        for row in renewed:  # a renewed row is a new node object with changed pods
            tasks = list(cluster[row].tasks.values())
            if tasks and rnd.random() < 0.5:
                tasks.pop(rnd.randrange(len(tasks)))
            tasks += [task() for _ in range(rnd.randint(0, 2))]
            cluster[row] = _Node(tasks)
        if rnd.random() < 0.1:
            cluster.append(_Node([task()]))
            rebuilt = True  # a table with another node set is built without a previous one
        pending = [task() for _ in range(rnd.randint(0, 3))]
        shapes.recount_rows(cluster, pending, renewed=None if rebuilt else renewed)
        assert shapes.counts == full_count(cluster, pending)
        rebuilt = False


def test_rows_of_another_table_length_are_counted_in_full() -> None:
    shapes = LearnedShapes()
    shapes.recount_rows([_Node([_Task(1000, {})])], [])
    shapes.recount_rows([_Node([_Task(1000, {})]), _Node([_Task(2000, {GPU_CORE: 50_000})])],
                        [], renewed=[])
    assert shapes.counts == {ShapeKey(1000, 0, 0): 1.0, ShapeKey(2000, 500, 1): 1.0}


@pytest.mark.parametrize(("arguments", "match"), [
    pytest.param({"scale": 0}, "scale must be", id="scale-zero"),
    pytest.param({"scale": 2.5}, "scale must be", id="scale-fraction"),
    pytest.param({"scale": True}, "scale must be", id="scale-bool"),
    pytest.param({"cards": "worstfit"}, "cards must be one of bestfit, fragment",
                 id="cards"),
    pytest.param({"popularity": 0}, "popularity must be", id="popularity-zero"),
    pytest.param({"popularity": "all"}, "popularity must be", id="popularity-text"),
    pytest.param({"starved": -1}, "starved must be", id="starved-negative"),
    pytest.param({"starved": "yes"}, "starved must be", id="starved-text"),
    pytest.param({"starved": True}, "starved must be", id="starved-bool"),
    pytest.param({"starved": float("inf")}, "starved must be", id="starved-infinite"),
    pytest.param({"starved": float("nan")}, "starved must be", id="starved-nan"),
    pytest.param({"reserve": -1}, "reserve must be a percentage", id="reserve-negative"),
    pytest.param({"reserve": 101}, "reserve must be a percentage", id="reserve-over-100"),
    pytest.param({"reserve": "half"}, "reserve must be a percentage", id="reserve-text"),
    pytest.param({"reserve": True}, "reserve must be a percentage", id="reserve-bool"),
    pytest.param({"reserve": float("nan")}, "reserve must be a percentage", id="reserve-nan"),
    pytest.param({"window": 5}, "unknown argument window", id="unknown"),
])
def test_bad_arguments_name_the_argument(arguments: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_policy_arguments("fgd-learned", arguments)


def test_arguments_parse_and_other_policies_take_none() -> None:
    assert parse_policy_arguments("fgd-learned", {}) == LearnedArgs()
    assert parse_policy_arguments("fgd-learned", {"scale": 1000, "cards": "fragment",
                                                  "popularity": 100, "starved": 0.5}
                                   ) == LearnedArgs(scale=1000, cards="fragment",
                                                    popularity=100, starved=0.5)
    assert parse_policy_arguments("fgd", {}) is None
    with pytest.raises(ValueError, match="'fgd' takes no arguments"):
        parse_policy_arguments("fgd", {"scale": 1000})
    with pytest.raises(ValueError, match="takes no option window"):
        make_policy("fgd-learned", nodes([[1000]]), rng=random.Random(0), window=3)
    with pytest.raises(ValueError, match="learns nothing"):
        make_policy("bestfit", nodes([[1000]]), rng=random.Random(0), learned={})


# --- against a brute-force reading -----------------------------------------------------------

def _brute_score(free: list[int], cpu_free: int, target: TargetWorkload, pod: PodShape,
                 scale: int, starved: float) -> int:
    weight = starved if pod.num_gpu <= 1 else 0  # multi-card pods: FGD's measure alone

    def fragment(cards: list[int], cpu: int) -> float:
        return node_fragment(cards, cpu, "A", target) + weight * starved_fragment(
            cards, cpu, target)

    before = fragment(free, cpu_free)

    def banded(after: list[int]) -> int:
        delta = round(before - fragment(after, cpu_free - pod.cpu_milli), 6)
        return math.floor(100 / (1 + math.exp(-delta / scale)))

    if pod.is_share:
        return max(banded([f - pod.gpu_milli if g == card else f for g, f in enumerate(free)])
                   for card in range(len(free)) if free[card] >= pod.gpu_milli)
    taken = [g for g, f in enumerate(free) if f >= 1000][: pod.num_gpu]
    return banded([f - 1000 if g in taken else f for g, f in enumerate(free)])


_CARD = st.sampled_from([0, 100, 190, 300, 470, 530, 700, 1000])
_SHAPE = st.sampled_from([ShapeKey(0, 0, 0), ShapeKey(2000, 0, 0), ShapeKey(1000, 300, 1),
                          ShapeKey(4000, 470, 1), ShapeKey(8000, 810, 1),
                          ShapeKey(8000, 1000, 1), ShapeKey(16000, 1000, 2)])


@settings(max_examples=60, deadline=None)
@given(cards=st.lists(st.lists(_CARD, min_size=1, max_size=4), min_size=1, max_size=6),
       cpu=st.lists(st.sampled_from([4000, 9000, 20000]), min_size=6, max_size=6),
       counts=st.dictionaries(_SHAPE, st.integers(1, 5), min_size=1),
       pod_shape=_SHAPE, scale=st.sampled_from([1000, 2000, 5000]),
       starved=st.sampled_from([0, 1, 2.5]))
def test_scores_match_a_brute_force_reading(cards: list[list[int]], cpu: list[int],
                                            counts: dict[ShapeKey, int], pod_shape: ShapeKey,
                                            scale: int, starved: float) -> None:
    states = nodes(cards)
    states.cpu_free[:] = cpu[: len(cards)]
    pod = PodShape(cpu_milli=pod_shape.cpu_milli, num_gpu=pod_shape.num_gpu,
                   gpu_milli=pod_shape.gpu_milli)
    fitting = [row for row, free in enumerate(cards) if states.cpu_free[row] >= pod.cpu_milli
               and sum(f >= pod.gpu_milli for f in free) >= pod.num_gpu]
    if not fitting:
        return
    learned = {k: float(v) for k, v in counts.items()}
    policy = LearnedFgdPolicy(states, learned=learned,
                              args=LearnedArgs(scale=scale, starved=starved))
    target = TargetWorkload.from_counts(learned)
    expected = [_brute_score(cards[row], int(states.cpu_free[row]), target, pod, scale,
                             starved)
                for row in fitting]
    assert policy.score(pod, np.array(fitting)).tolist() == expected


def test_whole_card_reserve_by_hand() -> None:
    """Counted: two 810-milli pods, one 470, two whole one-card pods: 4,090 milli, 2,000 of
    them whole one-card, so ``reserve: 50`` on 10 cards keeps 50 % · 10 · 2000/4090 = 2.445
    cards. An 810-milli pod leaves 190, which no counted sharing pod fits: held while fewer
    than 2.445 cards are whole. A 470-milli pod leaves 530, which a third of the sharing pods
    fit; a whole-card pod and any pod with the reserve off are never held."""
    counts = {ShapeKey(1000, 810, 1): 2.0, ShapeKey(1000, 470, 1): 1.0, WHOLE_1: 2.0,
              ShapeKey(4000, 0, 0): 3.0}
    assert reserved_cards(counts, cards=10, reserve=50) == pytest.approx(50 / 100 * 10 * 2000
                                                                          / 4090)
    pod_810 = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=810)
    assert reserve_holds(pod_810, counts, whole_free=2, cards=10, reserve=50)
    assert not reserve_holds(pod_810, counts, whole_free=3, cards=10, reserve=50)
    assert not reserve_holds(pod_810, counts, whole_free=0, cards=10, reserve=0)
    assert not reserve_holds(PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=470), counts,
                             whole_free=0, cards=10, reserve=50)
    assert not reserve_holds(PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=1000), counts,
                             whole_free=0, cards=10, reserve=50)
    # One counted 100-milli pod in four sharing pods (25 %) would use the 190: no stranding.
    assert not reserve_holds(pod_810, {**counts, ShapeKey(1000, 100, 1): 1.0}, whole_free=0,
                             cards=10, reserve=50)
    assert reserved_cards({ShapeKey(4000, 0, 0): 1.0}, cards=10, reserve=50) == 0.0


def test_reserve_keeps_a_held_pod_to_cards_in_use() -> None:
    """Three nodes, five cards, two of them whole on node 0 and one on node 2: node 1's
    900-milli card is in use. Held, the 810-milli pod may go only there (card 0, not the whole
    card 1); with a node whose used card is too small it would have nowhere to go."""
    counts = {ShapeKey(1000, 810, 1): 4.0, WHOLE_1: 4.0}
    states = nodes([[1000, 1000], [900, 1000], [1000]])
    pod = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=810)
    policy = LearnedFgdPolicy(states, learned=counts, args=LearnedArgs(reserve=100))
    # 100 % · 5 cards · 4000/7240 = 2.76 kept; 4 whole cards: not held yet.
    assert list(policy.admit(pod, np.arange(3))) == [0, 1, 2]
    states.gpu_free[2, 0] = 0  # node 2's card taken: 3 whole cards, not below 2.76
    assert list(policy.admit(pod, np.arange(2))) == [0, 1]
    states.gpu_free[0, 0] = 500  # 2 whole cards now: held
    assert list(policy.admit(pod, np.arange(2))) == [1]
    assert policy.choose_cards(pod, 1) == (0,)
    states.gpu_free[1, 0] = 700  # no card in use fits 810
    assert list(policy.admit(pod, np.arange(2))) == []


def test_held_pod_card_choice_skips_whole_cards_even_by_fragment() -> None:
    """With 100- and 190-milli pods common, FGD's card choice (``cards: fragment``) puts an
    810-milli pod on the whole card (its 190 left is usable, the used card's 90 is not);
    when the reserve holds the pod (``partial_only``, set by ``admit`` or the scheduler's
    held pods) it takes the card in use."""
    counts = {ShapeKey(1000, 810, 1): 10.0, ShapeKey(1000, 100, 1): 10.0,
              ShapeKey(1000, 190, 1): 10.0}
    pod = PodShape(cpu_milli=1000, num_gpu=1, gpu_milli=810)
    policy = LearnedFgdPolicy(nodes([[1000, 900]]), learned=counts,
                              args=LearnedArgs(cards="fragment"))
    assert policy.choose_cards(pod, 0) == (0,)
    policy.partial_only = True
    assert policy.choose_cards(pod, 0) == (1,)
    assert not policy.partial_only  # one pod's verdict only
