"""Where a running job sits: Volcano's ``recoverAllocatedHyperNode``
(``pkg/scheduler/framework/session.go:364-449``) intersects, over every placed task, the
HyperNodes of any tier (the cluster top included) that hold the task's node, and takes the one
of the lowest tier (``getLowestTierHyperNode``, session.go:452). The leaf of each node and their
common ancestor gave the cluster top for a node that is a direct member of a higher-tier
HyperNode and for a node listed in two HyperNodes of one tier, and the job's remaining pods then
stayed pending for ever."""

from __future__ import annotations

from typing import Any

from tests.builders import make_hypernode, make_node, make_pod, make_podgroup, make_queue, simulate

Obj = dict[str, Any]

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - {name: priority}
  - {name: gang}
- plugins:
  - {name: predicates}
  - {name: proportion}
  - {name: network-topology-aware}
"""


def _running_job(name: str, *, on: list[str], pending: int, tier: int) -> list[Obj]:
    size = len(on) + pending
    return [
        make_podgroup(name, min_member=size, phase="Running",
                      network_topology={"mode": "hard", "highestTierAllowed": tier}),
        *(make_pod(f"{name}-r{i}", cpu="1", group=name, node=node) for i, node in enumerate(on)),
        *(make_pod(f"{name}-p{i}", cpu="1", group=name) for i in range(pending)),
    ]


def test_a_node_that_is_a_direct_member_of_a_spine() -> None:
    """Mixed depths: ``d1`` is a member of the tier-2 spine itself, beside leaf ``a`` (a1, a2).
    Tasks on d1 and a1 are held by {spine, top}: the job sits in the spine (tier 2, allowed),
    and its pending pods join it there rather than wait."""
    objs: list[Obj] = [
        make_queue("default"),
        *(make_node(n, cpu="2", memory="8Gi") for n in ("a1", "a2", "d1", "x1")),
        make_hypernode("a", tier=1, nodes=["a1", "a2"]),
        make_hypernode("x", tier=1, nodes=["x1"]),
        make_hypernode("spine", tier=2, nodes=["d1"], hypernodes=["a"]),
        make_hypernode("other", tier=2, hypernodes=["x"]),
        *_running_job("job", on=["d1", "a1"], pending=2, tier=2),
    ]
    run = simulate(objs, conf=CONF)
    placed = {run.node_of(f"job-p{i}") for i in range(2)}
    assert placed and placed <= {"a1", "a2", "d1"}, placed


def test_a_node_listed_in_two_hypernodes_of_one_tier() -> None:
    """n2 is in leaf ``a`` and leaf ``b`` (as Volcano's example discovery config can make);
    tasks on n2 and n3 are held by {b, s-b, top}: the job sits in ``b`` (tier 1, allowed) and
    its pending pod goes to b's free node, not to ``a``."""
    objs: list[Obj] = [
        make_queue("default"),
        *(make_node(n, cpu="1", memory="8Gi") for n in ("n1", "n2", "n3")),
        make_node("n4", cpu="1", memory="8Gi"),
        make_hypernode("a", tier=1, nodes=["n1", "n2"]),
        make_hypernode("b", tier=1, nodes=["n2", "n3", "n4"]),
        make_hypernode("s-a", tier=2, hypernodes=["a"]),
        make_hypernode("s-b", tier=2, hypernodes=["b"]),
        *_running_job("job", on=["n2", "n3"], pending=1, tier=1),
    ]
    run = simulate(objs, conf=CONF)
    assert run.node_of("job-p0") == "n4"
