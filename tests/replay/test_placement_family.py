"""The placement policies as ``deviceshare.FineGrainedPolicy`` through the scheduler.

Small random clusters and pod sequences are replayed twice: through Lahar's scheduling path
(``scheduler.replay.run``: snapshot, session, allocate, deviceshare, statement, binder) and
through the test-only reference loop (``tests.replay.checker``), which applies the policy
functions exactly as the paper's simulator does (``fgd_score.go``' ``Score`` and card choice,
kube-scheduler's ``selectHost`` with the first best node). Every placement — node and cards —
must agree, for every deterministic policy. ``fgd-learned`` (ours) is counted from the
session's bound and pending pods in the scheduler and from its own placements in the reference
loop, so agreement also checks that both count the same pods.
"""

from __future__ import annotations

import json
import random

import pytest

from scheduler.conf import ConfError, parse_conf
from scheduler.devices.finegrained.placement import parse_target_workload
from scheduler.replay.run import ReplayResult, run_replay
from scheduler.replay.trace import TraceNode, TracePod
from tests.devices.finegrained_helpers import finegrained_conf
from tests.replay.checker import replay

DETERMINISTIC = ("dotprod", "clustering", "packing", "bestfit", "fgd", "fgd-learned")


def _cluster(rng: random.Random) -> tuple[list[TraceNode], list[TracePod]]:
    nodes = [TraceNode(f"node-{i}", cpu_milli=rng.choice((8000, 32000, 96000)),
                       memory_mib=rng.choice((65536, 393216)), gpus=rng.choice((1, 2, 4, 8)),
                       model=rng.choice(("T4", "G2")))
             for i in range(rng.randint(3, 8))]
    pods = []
    for i in range(rng.randint(20, 45)):
        kind = rng.random()
        if kind < 0.2:
            num, milli = 0, 0
        elif kind < 0.7:
            num, milli = 1, rng.choice((100, 250, 470, 500, 810))
        else:
            num, milli = rng.choice((1, 2, 4)), 1000
        spec = rng.choice(("", "", "", "T4", "G2|T4"))
        pods.append(TracePod(f"pod-{i:03d}", cpu_milli=rng.choice((1000, 2000, 6000, 12000)),
                             memory_mib=rng.choice((1024, 16384, 65536)), num_gpu=num,
                             gpu_milli=milli,
                             gpu_spec=frozenset(m for m in spec.split("|") if m),
                             spec_text=spec))
    return nodes, pods


@pytest.mark.parametrize("policy", DETERMINISTIC)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scheduler_path_places_like_the_reference_loop(policy: str, seed: int) -> None:
    nodes, pods = _cluster(random.Random(seed * 101))
    ours = run_replay(nodes=nodes, pods=pods, policy=policy, seed=seed, tune=0)
    reference = replay(nodes=nodes, pods=pods, policy=policy, seed=seed, tune=0)
    assert [(p, n.split("-", 1)[1], c) for p, n, c in ours.placements] == reference.placements
    assert ours.failed == reference.failed
    assert ours.failed  # the clusters are small enough that some pods fail


@pytest.mark.parametrize("arguments", [
    pytest.param({"scale": 1000, "cards": "fragment"}, id="fgd-bands-fragment-cards"),
    pytest.param({"scale": 5000, "popularity": 100}, id="wide-bands-every-shape"),
    pytest.param({"starved": 0}, id="fgd-measure-alone"),
    pytest.param({"starved": 2.5, "cards": "fragment"}, id="starved-weighed-more"),
])
def test_learned_policy_arguments_act_alike_in_both_loops(arguments: dict[str, object]
                                                          ) -> None:
    nodes, pods = _cluster(random.Random(404))
    _learned_in_both_loops(nodes, pods, seed=4, arguments=arguments)


def _learned_in_both_loops(nodes: list[TraceNode], pods: list[TracePod], *, seed: int,
                           arguments: dict[str, object]) -> ReplayResult:
    """``fgd-learned`` with ``arguments`` through the scheduler and the reference loop:
    asserts that every placement and failure agree, returns the scheduler's run."""
    ours = run_replay(nodes=nodes, pods=pods, policy="fgd-learned", seed=seed, tune=0,
                      policy_args=arguments)
    reference = replay(nodes=nodes, pods=pods, policy="fgd-learned", seed=seed, tune=0,
                       options=arguments)  # type: ignore[arg-type]
    assert [(p, n.split("-", 1)[1], c) for p, n, c in ours.placements] == reference.placements
    assert ours.failed == reference.failed
    return ours


def test_learned_counts_kept_across_sessions_equal_a_full_recount(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each session counts again only the node rows renewed since the last one; the counts
    it hands the policy must equal a count of every pod on a node and every pending pod."""
    from scheduler.devices.finegrained.placement import LearnedShapes
    from tests.replay.bruteforce import full_count

    checked: list[int] = []
    real = LearnedShapes.recount_rows

    def checking(self: LearnedShapes, nodes, pending, **kwargs):  # type: ignore[no-untyped-def]
        pending = list(pending)
        real(self, nodes, pending, **kwargs)
        assert self.counts == full_count(nodes, pending)
        checked.append(1 if kwargs.get("renewed") is not None else 0)

    monkeypatch.setattr(LearnedShapes, "recount_rows", checking)
    nodes, pods = _cluster(random.Random(909))
    ours = run_replay(nodes=nodes, pods=pods, policy="fgd-learned", seed=9, tune=0)
    assert ours.placements
    assert len(checked) >= len(pods) and sum(checked) >= len(pods) - 1  # carried over


def test_random_policy_places_every_fitting_pod() -> None:
    nodes, pods = _cluster(random.Random(7))
    ours = run_replay(nodes=nodes, pods=pods, policy="random", seed=7, tune=0)
    reference = replay(nodes=nodes, pods=pods, policy="random", seed=7, tune=0)
    # Different random streams, same capacity: only the count of placed pods is comparable,
    # and it stays close.
    assert len(ours.placements) + len(ours.failed) == len(pods)
    assert abs(len(ours.placements) - len(reference.placements)) <= len(pods) // 3


@pytest.mark.parametrize(("extra", "key"), [
    pytest.param({"FineGrainedPolicy": "tetris"}, "deviceshare.FineGrainedPolicy",
                 id="unknown-policy"),
    pytest.param({"FineGrainedPolicy": "fgd"}, "deviceshare.FineGrainedTargetWorkload",
                 id="fgd-without-target"),
    pytest.param({"FineGrainedTieBreak": "last"}, "deviceshare.FineGrainedTieBreak",
                 id="unknown-tie-break"),
    pytest.param({"FineGrainedTargetWorkload": [{"cpu": 1000, "gpuMilli": 500, "gpus": 2}]},
                 "deviceshare.FineGrainedTargetWorkload", id="shared-multi-card-shape"),
    pytest.param({"FineGrainedPolicy": "bestfit",
                  "FineGrainedTargetWorkload": [{"cpu": 1000, "gpuMilli": 500, "gpus": 1}]},
                 "deviceshare.FineGrainedTargetWorkload", id="target-without-fgd"),
    pytest.param({"FineGrainedTieBreak": "first"}, "deviceshare.FineGrainedTieBreak",
                 id="tie-break-without-policy"),
    pytest.param({"FineGrainedPolicy": "fgd-learned",
                  "FineGrainedPolicyArguments": {"scale": 0}},
                 "deviceshare.FineGrainedPolicyArguments.*scale", id="learned-scale-zero"),
    pytest.param({"FineGrainedPolicy": "fgd-learned",
                  "FineGrainedPolicyArguments": {"cards": "worst"}},
                 "deviceshare.FineGrainedPolicyArguments.*cards", id="learned-unknown-cards"),
    pytest.param({"FineGrainedPolicy": "fgd-learned",
                  "FineGrainedPolicyArguments": {"window": 10}},
                 "deviceshare.FineGrainedPolicyArguments.*window", id="learned-unknown-arg"),
    pytest.param({"FineGrainedPolicy": "fgd-learned", "FineGrainedPolicyArguments": [1]},
                 "deviceshare.FineGrainedPolicyArguments", id="learned-args-not-a-mapping"),
    pytest.param({"FineGrainedPolicy": "bestfit",
                  "FineGrainedPolicyArguments": {"scale": 1000}},
                 "deviceshare.FineGrainedPolicyArguments", id="arguments-without-learned"),
])
def test_bad_placement_arguments_are_errors_naming_the_key(extra: dict[str, object],
                                                           key: str) -> None:
    text = finegrained_conf().rstrip("}\n") + ", " + ", ".join(
        f"deviceshare.{k}: {json.dumps(v)}" for k, v in extra.items()) + "}}\n"
    with pytest.raises((ConfError, ValueError), match=key):
        parse_conf(text)


def test_policy_without_the_family_is_an_error() -> None:
    text = "actions: allocate\ntiers:\n- plugins:\n  - name: deviceshare\n    arguments: " \
           "{deviceshare.FineGrainedPolicy: bestfit}\n"
    with pytest.raises((ConfError, ValueError), match="FineGrainedDeviceEnable"):
        parse_conf(text)


def test_target_workload_keeps_the_shapes_covering_95_percent() -> None:
    target = parse_target_workload([
        {"cpu": 1000, "gpuMilli": 500, "gpus": 1, "count": 90},
        {"cpu": 2000, "gpuMilli": 1000, "gpus": 2, "count": 6},
        {"cpu": 4000, "gpuMilli": 0, "gpus": 0, "count": 4},
    ])
    assert target is not None
    assert len(target) == 2  # 90 + 6 = 96 % ≥ 95 %
    assert target.prob.tolist() == pytest.approx([90 / 96, 6 / 96])
    assert parse_target_workload([]) is None


def test_clustering_tells_one_two_card_pod_from_two_one_card_pods() -> None:
    """Two nodes of one shape whose cards 0 and 1 are used, one by a two-card pod and one by
    two one-card pods, are in the same card state but not the same kinds (§B.3 Clustering
    scores a node by the kinds of GPU pods on it). A summary row kept per card state once gave
    the second node the first one's kinds, so the next one-card pod left the node of its kind
    for an empty one (first seen on `default`, seed 42, pod 1,497)."""
    nodes = [TraceNode(f"node-{i}", cpu_milli=96000, memory_mib=393216, gpus=4, model="T4")
             for i in range(3)]
    shapes = [(2, 1000), (1, 1000), (1, 1000), (1, 1000)]
    pods = [TracePod(f"pod-{i}", cpu_milli=1000, memory_mib=1024, num_gpu=num,
                     gpu_milli=milli, gpu_spec=frozenset(), spec_text="")
            for i, (num, milli) in enumerate(shapes)]
    ours = run_replay(nodes=nodes, pods=pods, policy="clustering", seed=5, tune=0)
    reference = replay(nodes=nodes, pods=pods, policy="clustering", seed=5, tune=0)
    assert [(p, n.split("-", 1)[1], c) for p, n, c in ours.placements] == reference.placements
    placed = {name: node for name, node, _ in reference.placements}
    assert placed["pod-1"] == placed["pod-2"] == placed["pod-3"] != placed["pod-0"]


def _reserve_cluster(rng: random.Random) -> tuple[list[TraceNode], list[TracePod]]:
    """No pod under 470 milli, so an 810-milli pod strands the 190 it leaves on a card."""
    nodes = [TraceNode(f"node-{i}", cpu_milli=96000, memory_mib=393216,
                       gpus=rng.choice((2, 4, 8)), model="G2") for i in range(6)]
    pods = []
    for i in range(60):
        kind = rng.random()
        num, milli = (1, 810) if kind < 0.35 else (1, 470) if kind < 0.55 else (1, 1000)
        pods.append(TracePod(f"pod-{i:03d}", cpu_milli=2000, memory_mib=4096, num_gpu=num,
                             gpu_milli=milli))
    return nodes, pods


@pytest.mark.parametrize("arguments", [
    pytest.param({"reserve": 80}, id="reserve-bestfit-cards"),
    pytest.param({"reserve": 100, "cards": "fragment"}, id="reserve-fragment-cards"),
])
def test_whole_card_reserve_acts_alike_in_both_loops(arguments: dict[str, object]) -> None:
    """The reserve (``reserve_holds``) keeps 810-milli pods off the last whole cards in both
    loops alike, and it does act: without it the same pods place differently."""
    nodes, pods = _reserve_cluster(random.Random(79))
    ours = _learned_in_both_loops(nodes, pods, seed=5, arguments=arguments)
    plain = run_replay(nodes=nodes, pods=pods, policy="fgd-learned", seed=5, tune=0)
    # Some 810-milli pods placed without the reserve fail with it, and more pods fit in all.
    milli = {p.name: p.gpu_milli for p in pods}
    assert any(milli[name] == 810 for name in set(ours.failed) - set(plain.failed))
    assert len(ours.failed) < len(plain.failed)
