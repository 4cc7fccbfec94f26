"""Caches kept from one scheduling cycle to the next on the fine-grained placement path.

Each cache is checked against a computation from scratch after the state it was built from
changed, so a cache that went stale fails here.
"""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.devices.finegrained.placement import Placement, shared_placement
from scheduler.devices.placement.fgd import FgdPolicy
from scheduler.devices.placement.frag import (
    ShapeKey,
    TargetWorkload,
    TermsMemo,
    _terms,
    fragment_of_nodes,
)
from scheduler.devices.placement.state import MILLI, NodeStates, PodShape

TARGET = TargetWorkload.from_counts(
    {ShapeKey(1000, 0, 0): 3, ShapeKey(2000, 500, 1): 5, ShapeKey(4000, 250, 1, "A"): 2,
     ShapeKey(8000, 1000, 2): 1}, popularity=100)


def _cards(rng: np.random.Generator, rows: int, width: int = 8) -> np.ndarray:
    return rng.choice([0, 100, 250, 500, 750, 1000], size=(rows, width)).astype(np.int64)


def test_terms_memo_recomputes_the_rows_whose_cards_changed() -> None:
    rng = np.random.default_rng(7)
    memo = TermsMemo(TARGET)
    table = _cards(rng, 40)
    rows = np.arange(40)
    memo.terms(rows, table)
    for _ in range(20):
        changed = rng.choice(40, size=3, replace=False)
        table[changed] = _cards(rng, 3)
        subset = np.sort(rng.choice(40, size=25, replace=False))
        small, fits = memo.terms(subset, table[subset])
        expected_small, expected_fits = _terms(table[subset], TARGET)
        np.testing.assert_array_equal(small, expected_small)
        np.testing.assert_array_equal(fits, expected_fits)


def test_terms_memo_grows_with_the_table_and_follows_a_new_card_width() -> None:
    rng = np.random.default_rng(3)
    memo = TermsMemo(TARGET)
    narrow = _cards(rng, 5, width=4)
    memo.terms(np.arange(5), narrow)
    wide = _cards(rng, 12, width=8)
    small, fits = memo.terms(np.arange(12), wide)
    np.testing.assert_array_equal(small, _terms(wide, TARGET)[0])
    np.testing.assert_array_equal(fits, _terms(wide, TARGET)[1])
    # Row 10 first seen with all cards free (equal to nothing the memo held before).
    again = wide.copy()
    again[10] = MILLI
    small, _ = memo.terms(np.array([10, 11]), again[[10, 11]])
    np.testing.assert_array_equal(small, _terms(again[[10, 11]], TARGET)[0])


def _node_scores(placement: Placement, gpu_free: np.ndarray, pod: PodShape) -> np.ndarray:
    n = len(gpu_free)
    return placement.node_scores(
        pod=pod, gpu_free=gpu_free // 10, gpu_count=(gpu_free > 0).sum(axis=1),
        cpu_free=np.full(n, 64_000), mem_bytes=np.full(n, 1 << 40),
        model=np.zeros(n, dtype=np.int64), models=("A",),
        kinds=np.zeros((n, 9), dtype=np.int64), rows=np.arange(n))


def test_fgd_scores_with_kept_terms_equal_scores_from_scratch() -> None:
    """The memo of one placement serves many sessions; its scores must stay those of
    ``FgdPolicy`` built from nothing (``fgd_scores`` of the reference loop)."""
    rng = np.random.default_rng(11)
    kept = Placement("fgd", tie_break="first", target=TARGET)
    gpu_free = _cards(rng, 30) // 10 * 10
    pod = PodShape(cpu_milli=2000, memory_mib=1024, num_gpu=1, gpu_milli=500)
    for _ in range(10):
        fresh = Placement("fgd", tie_break="first", target=TARGET)
        np.testing.assert_array_equal(_node_scores(kept, gpu_free, pod),
                                      _node_scores(fresh, gpu_free, pod))
        # In place, as the table's columns change: the memo must keep its own copy.
        gpu_free[rng.integers(30)] = _cards(rng, 1)[0] // 10 * 10


def test_fgd_policy_takes_given_terms_as_computed_ones() -> None:
    states = NodeStates.build(gpu_counts=[8, 8, 4], cpu_milli=[64_000] * 3,
                              memory_mib=[1 << 20] * 3, models=["A", "A", "B"])
    states.gpu_free[0, :3] = [250, 500, 0]
    pod = PodShape(cpu_milli=2000, memory_mib=1, num_gpu=1, gpu_milli=500)
    given = FgdPolicy(states, target=TARGET, terms=_terms(states.gpu_free, TARGET))
    computed = FgdPolicy(states, target=TARGET)
    np.testing.assert_array_equal(given.score(pod, np.arange(3)),
                                  computed.score(pod, np.arange(3)))
    np.testing.assert_array_equal(given.cache.per_node, computed.cache.per_node)


def test_shared_placement_is_kept_per_conf_value_object() -> None:
    entries = ({"cpu": 1000, "gpuMilli": 500, "gpus": 1, "count": 2},)
    first = shared_placement("fgd", tie_break="first", entries=entries)
    assert shared_placement("fgd", tie_break="first", entries=entries) is first
    assert shared_placement("fgd", tie_break="random", entries=entries) is not first
    # An equal but new conf value (a reloaded conf) starts from a new placement.
    copy = (dict(entries[0]),)
    other = shared_placement("fgd", tie_break="first", entries=copy)
    assert other is not first
    assert other.target is not None and other.target.shapes == first.target.shapes  # type: ignore[union-attr]


@pytest.mark.parametrize("policy", ["bestfit", "packing"])
def test_policies_without_target_keep_no_terms(policy: str) -> None:
    assert shared_placement(policy, tie_break="first", entries=()).terms is None


def _partition(first: np.ndarray, inverse: np.ndarray) -> set[tuple[int, ...]]:
    groups: dict[int, list[int]] = {}
    for row, group in enumerate(inverse):
        groups.setdefault(int(group), []).append(row)
    assert sorted(min(g) for g in groups.values()) == sorted(int(f) for f in first)
    return {tuple(g) for g in groups.values()}


@pytest.mark.parametrize("weights", ["fixed", "all-colliding"])
def test_node_kinds_group_rows_as_the_exact_row_grouping(
        weights: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes of one kind (``FragmentCache.kinds``) are the rows ``np.unique(axis=0)`` puts
    together; with weights that fold every row to one key, the check catches it."""
    import scheduler.devices.placement.frag as frag

    if weights == "all-colliding":
        monkeypatch.setattr(frag, "_ROW_WEIGHTS", np.zeros(64, dtype=np.int64))
    rng = np.random.default_rng(5)
    matrix = np.concatenate([rng.integers(-1, 2, (300, 1)), rng.choice([4000, 8000], (300, 1)),
                             np.sort(_cards(rng, 300), axis=1)], axis=1)
    first, inverse = frag._group_rows(matrix)
    _, exact_first, exact_inverse = np.unique(matrix, axis=0, return_index=True,
                                              return_inverse=True)
    assert _partition(first, inverse) == _partition(exact_first, exact_inverse.reshape(-1))
    np.testing.assert_array_equal(matrix[first][inverse], matrix)


def test_kept_fragments_follow_cpu_memory_model_and_cards() -> None:
    """The per-row fragment is kept under every input it reads; changing any one of them
    (or the models the codes point into) must give the figure computed from scratch."""
    rng = np.random.default_rng(17)
    memo = TermsMemo(TARGET.with_memory({k: 2048.0 for k in TARGET.shapes}))
    states = NodeStates.build(gpu_counts=[8] * 30, cpu_milli=[16_000] * 30,
                              memory_mib=[4096] * 30, models=["A", "B"] * 15)
    rows = np.arange(30)
    for step in range(12):
        changed = rng.integers(30)
        field = step % 4
        if field == 0:
            states.gpu_free[changed] = _cards(rng, 1)[0]
        elif field == 1:
            states.cpu_free[changed] = rng.choice([1000, 4000, 16_000])
        elif field == 2:
            states.mem_free[changed] = rng.choice([1024, 4096])
        else:
            states.model[changed] = 1 - states.model[changed]
        if step == 6:
            states.models = ("B", "A")  # same codes, other models: every row anew
        small, fits, fragment = memo.fragments(rows, states)
        np.testing.assert_array_equal(fragment, fragment_of_nodes(states, memo.target))
        expected_small, expected_fits = _terms(states.gpu_free, memo.target)
        np.testing.assert_array_equal(small, expected_small)
        np.testing.assert_array_equal(fits, expected_fits)


def test_random_draws_anew_for_each_pod_of_one_shape() -> None:
    """§B.3 Random: every pod picks a feasible node (and a fitting card) uniformly, on its
    own. The draw is seeded by the run, the pod and the candidates so a replay is
    reproducible; pods of one shape over the same candidates must still draw independently
    (they once all took the same index, piling up on one node: 14.4 % unallocated at 100 %
    on `default` against the paper's 13.75)."""
    placement = Placement("random", tie_break="first", seed=42)
    gpu_free = np.full((40, 8), MILLI)
    pod = PodShape(cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=300)

    def pick(key: str) -> int:
        n = len(gpu_free)
        scores = placement.node_scores(
            pod=pod, gpu_free=gpu_free // 10, gpu_count=np.full(n, 8),
            cpu_free=np.full(n, 64_000), mem_bytes=np.full(n, 1 << 40),
            model=np.zeros(n, dtype=np.int64), models=("A",),
            kinds=np.zeros((n, 9), dtype=np.int64), rows=np.arange(n), key=key)
        return int(np.argmax(scores))

    picks = [pick(f"default/pod-{i}") for i in range(200)]
    assert picks == [pick(f"default/pod-{i}") for i in range(200)]  # reproducible
    assert len(set(picks)) >= 30  # 40 candidates, 200 draws
    cards = {placement.card(pod=pod, gpu_free=np.full(8, 100), cpu_free=64_000,
                            mem_bytes=1 << 40, model=0, models=("A",),
                            kinds=np.zeros(9, dtype=np.int64), key=f"p{i}") for i in range(100)}
    assert len(cards) >= 6  # one card of eight, drawn per pod
