"""``fgd-learned``'s whole-card reserve in the embedded cluster: who waits, and why it says so.

The reserve is ours (``deviceshare.FineGrainedPolicyArguments.reserve``, off by default): a
card-sharing pod that would strand the rest of a whole card may take only a card already in
use while too few cards are whole (``scheduler.devices.placement.learned.reserve_holds``).
"""

from __future__ import annotations

from typing import Any

from tests.builders import simulate
from tests.devices.finegrained_helpers import (
    bound_pod,
    device_object,
    fg_node,
    fg_pod,
    finegrained_conf,
    gpu,
    minors,
    shared_gpu,
)

WHOLE = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"}


def cluster() -> list[dict[str, Any]]:
    """One node, four cards: 0 and 1 held whole, 2 holds 81 %, 3 is whole and free."""
    return [fg_node("n1", gpus=4), device_object("n1", [gpu(i) for i in range(4)]),
            bound_pod("w0", node="n1", allocation={"gpu": [{"minor": 0, "resources": WHOLE}]},
                      gpu_core=100, gpu_memory_ratio=100),
            bound_pod("w1", node="n1", allocation={"gpu": [{"minor": 1, "resources": WHOLE}]},
                      gpu_core=100, gpu_memory_ratio=100),
            bound_pod("s0", node="n1", allocation={"gpu": [shared_gpu(2, 81)]},
                      gpu_core=81, gpu_memory_ratio=81)]


def conf(reserve: float) -> str:
    arguments: dict[str, Any] = {"reserve": reserve} if reserve else {}
    return finegrained_conf(FineGrainedPolicy="fgd-learned", FineGrainedTieBreak="first",
                            FineGrainedPolicyArguments=arguments)


def test_a_stranding_pod_waits_for_a_card_in_use_and_says_why() -> None:
    """Counted: two whole-card pods, two 81 % pods (the bound one and the new one): the whole
    pods ask 2000 of 3620 milli, so ``reserve: 100`` keeps ⌈4 · 2000/3620⌉ = 3 cards whole;
    one is. The new 81 % pod would leave 19 % of card 3, which no counted sharing pod fits,
    and card 2 has 19 % left: it waits."""
    run = simulate([*cluster(), fg_pod("p", gpu_core=81, gpu_memory_ratio=81)],
                   conf=conf(100))
    assert run.node_of("p") is None
    assert run.reason("p") == (
        "0/1 nodes are unavailable: 1 GPU cards kept whole for whole-card pods "
        "(fgd-learned reserve): 1 of 4 whole, 3 kept.")


def test_without_the_reserve_or_with_a_small_one_the_pod_takes_the_whole_card() -> None:
    for reserve in (0, 20):  # 20 % · 4 · 2000/3620 = 0.44 cards kept: one whole is enough
        run = simulate([*cluster(), fg_pod("p", gpu_core=81, gpu_memory_ratio=81)],
                       conf=conf(reserve))
        assert run.node_of("p") == "n1"
        assert minors(run, "p") == [3]


def test_whole_card_and_non_stranding_pods_are_not_held() -> None:
    whole = simulate([*cluster(), fg_pod("w", gpu_core=100, gpu_memory_ratio=100)],
                     conf=conf(100))
    assert minors(whole, "w") == [3]
    # A 47 % pod leaves 53 %, which the counted 47 % pod (one of two sharing pods) fits.
    half = simulate([*cluster(), fg_pod("h", gpu_core=47, gpu_memory_ratio=47)],
                    conf=conf(100))
    assert minors(half, "h") == [3]


def test_a_held_pod_takes_a_card_in_use_that_fits() -> None:
    """Three more 8-card nodes full of 81 % pods and one card with a 15 % pod (one sharing pod
    in 27 counted, under 5 %: the 81 % pod still strands a whole card). Held, the new 81 %
    pod goes to the card in use with 85 % free, whichever way cards are chosen."""
    objs = cluster()
    for n in range(2, 5):
        objs += [fg_node(f"n{n}", gpus=8), device_object(f"n{n}", [gpu(i) for i in range(8)])]
        objs += [bound_pod(f"f{n}-{i}", node=f"n{n}", allocation={"gpu": [shared_gpu(i, 81)]},
                           gpu_core=81, gpu_memory_ratio=81) for i in range(8)]
    objs += [fg_node("n5", gpus=1), device_object("n5", [gpu(0)]),
             bound_pod("small", node="n5", allocation={"gpu": [shared_gpu(0, 15)]},
                       gpu_core=15, gpu_memory_ratio=15),
             fg_pod("p", gpu_core=81, gpu_memory_ratio=81)]
    for cards in ("bestfit", "fragment"):
        run = simulate(objs, conf=finegrained_conf(
            FineGrainedPolicy="fgd-learned", FineGrainedTieBreak="first",
            FineGrainedPolicyArguments={"reserve": 100, "cards": cards}))
        assert (run.node_of("p"), minors(run, "p")) == ("n5", [0]), cards
