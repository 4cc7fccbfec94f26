"""Volcano's allocate cases with HyperNodes, one test per Go case.

Source: ``pkg/scheduler/actions/allocate/allocate_test.go`` at Volcano ed72c7c,
``TestAllocateWithNetWorkTopologies`` (the line of each case's ``Name`` is in its id and
docstring). Each case runs one session of allocate with gang, predicates and
network-topology-aware, as the Go test does; nodes have 2 cpu / 4Gi, pods ask 2 cpu / 4G.
A pod given a node is Running there; the job's allocated HyperNode is recovered from those
pods, as Volcano's session recovers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import structlog
import structlog.testing

from tests.builders import make_hypernode, make_node, make_pod, make_podgroup, make_queue, simulate

CONF = """
actions: "allocate"
tiers:
- plugins:
  - {name: gang}
  - {name: predicates}
  - {name: network-topology-aware}
"""

TASK_TIER, JOB_TIER, TOP_TIER = (
    "volcano.sh/task-spec",
    "volcano.sh/job-spec",
    "volcano.sh/hypernode-spec",
)


def two_tier(*, names: bool = False, top: bool = True) -> list[dict[str, Any]]:
    """s0 {s0-n1, s0-n2} and s1 {s1-n3, s1-n4} at tier 1 under s2 at tier 2."""
    leaf, upper = (TASK_TIER, JOB_TIER) if names else (None, None)
    objs = [
        make_hypernode("s0", tier=1, nodes=["s0-n1", "s0-n2"], tier_name=leaf),
        make_hypernode("s1", tier=1, nodes=["s1-n3", "s1-n4"], tier_name=leaf),
    ]
    if top:
        objs.append(make_hypernode("s2", tier=2, hypernodes=["s0", "s1"], tier_name=upper))
    return objs


def three_tier(*, names: bool = False) -> list[dict[str, Any]]:
    """s3..s6 (two nodes each) at tier 1, s1 {s3, s4} and s2 {s5, s6} at tier 2, s0 at 3."""
    tier_name = (lambda t: (TASK_TIER, JOB_TIER, TOP_TIER)[t - 1]) if names else (lambda t: None)
    objs = [
        make_hypernode(f"s{i}", tier=1, nodes=[f"s{i}-n1", f"s{i}-n2"], tier_name=tier_name(1))
        for i in (3, 4, 5, 6)
    ]
    objs += [
        make_hypernode("s1", tier=2, hypernodes=["s3", "s4"], tier_name=tier_name(2)),
        make_hypernode("s2", tier=2, hypernodes=["s5", "s6"], tier_name=tier_name(2)),
        make_hypernode("s0", tier=3, hypernodes=["s1", "s2"], tier_name=tier_name(3)),
    ]
    return objs


TWO_TIER_NODES = ["s0-n1", "s0-n2", "s1-n3", "s1-n4"]
THREE_TIER_NODES = [f"s{i}-n{j}" for i in (3, 4, 5, 6) for j in (1, 2)]
ROLES = ["master", "worker", "worker"]


@dataclass
class Case:
    line: int
    topology: dict[str, Any]
    min_member: int
    pods: int = 3
    running_on: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=lambda: list(TWO_TIER_NODES))
    hypernodes: list[dict[str, Any]] = field(default_factory=two_tier)
    binds: int = 0
    bind_map: dict[str, str] | None = None
    selector: dict[str, str] | None = None
    master_node: str | None = None


def soft() -> dict[str, Any]:
    return {"mode": "soft", "highestTierAllowed": 0}


def hard(tier: int) -> dict[str, Any]:
    return {"mode": "hard", "highestTierAllowed": tier}


def hard_name(name: str) -> dict[str, Any]:
    return {"mode": "hard", "highestTierName": name}


def tier0() -> list[dict[str, Any]]:
    return [
        make_hypernode("s0", tier=0, nodes=["s0-n1"]),
        make_hypernode("s1", tier=0, nodes=["s1-n2"]),
    ]


CASES = {
    "soft-enough-resources": Case(370, soft(), 3, binds=3),
    "soft-min-below-replicas": Case(399, soft(), 1, pods=2, binds=2),
    "soft-affinity": Case(
        465,
        soft(),
        1,
        pods=1,
        nodes=["s0-n1", "s1-n2"],
        hypernodes=tier0(),
        binds=1,
        bind_map={"p1": "s1-n2"},
        selector={"nodeRole": "master"},
        master_node="s1-n2",
    ),
    "soft-rescheduled": Case(490, soft(), 2, running_on=["s0-n1", "s0-n2"], binds=1),
    "soft-rescheduled-min-equals-replicas": Case(
        557, soft(), 3, running_on=["s0-n1", "s0-n2"], binds=1
    ),
    "soft-rescheduled-three-tiers": Case(
        624,
        soft(),
        2,
        running_on=["s3-n1", "s3-n2"],
        nodes=THREE_TIER_NODES,
        hypernodes=three_tier(),
        binds=1,
    ),
    "hard-cross-tier": Case(750, hard(1), 3, binds=0),
    "hard-tier-not-reached": Case(818, hard(2), 3, binds=3),
    "hard-multi-hypernodes": Case(885, hard(1), 2, pods=2, binds=2),
    "hard-min-below-replicas": Case(951, hard(1), 1, pods=2, binds=2),
    "hard-affinity": Case(
        1017,
        hard(1),
        1,
        pods=1,
        nodes=["s0-n1", "s1-n2"],
        hypernodes=tier0(),
        binds=1,
        bind_map={"p1": "s1-n2"},
        selector={"nodeRole": "master"},
        master_node="s1-n2",
    ),
    "hard-rescheduled": Case(1042, hard(2), 2, running_on=["s0-n1", "s0-n2"], binds=1),
    "hard-rescheduled-min-equals-replicas": Case(
        1109, hard(2), 3, running_on=["s0-n1", "s0-n2"], binds=1
    ),
    "hard-rescheduled-three-tiers": Case(
        1176,
        hard(2),
        2,
        running_on=["s3-n1", "s3-n2"],
        nodes=THREE_TIER_NODES,
        hypernodes=three_tier(),
        binds=1,
    ),
    "hard-rescheduled-cross-tier": Case(1302, hard(1), 2, running_on=["s0-n1", "s0-n2"]),
    "hard-rescheduled-cross-tier-three-tiers": Case(
        1369,
        hard(1),
        2,
        running_on=["s3-n1", "s3-n2"],
        nodes=THREE_TIER_NODES,
        hypernodes=three_tier(),
        binds=0,
    ),
    "hard-rescheduled-no-lca": Case(
        1495, hard(2), 2, running_on=["s0-n1", "s0-n2"], hypernodes=two_tier(top=False), binds=1
    ),
    "hard-name-cross-tier": Case(1549, hard_name(TASK_TIER), 3, hypernodes=two_tier(names=True)),
    "hard-name-not-reached": Case(
        1617, hard_name(JOB_TIER), 3, hypernodes=two_tier(names=True), binds=3
    ),
    "hard-name-multi-hypernodes": Case(
        1685, hard_name(TASK_TIER), 2, pods=2, hypernodes=two_tier(names=True), binds=2
    ),
    "hard-name-rescheduled": Case(
        1752,
        hard_name(JOB_TIER),
        2,
        running_on=["s0-n1", "s0-n2"],
        hypernodes=two_tier(names=True),
        binds=1,
    ),
    "hard-name-rescheduled-min-equals-replicas": Case(
        1820,
        hard_name(JOB_TIER),
        3,
        running_on=["s0-n1", "s0-n2"],
        hypernodes=two_tier(names=True),
        binds=1,
    ),
    "hard-name-rescheduled-three-tiers": Case(
        1888,
        hard_name(JOB_TIER),
        2,
        running_on=["s0-n1", "s0-n2"],
        nodes=THREE_TIER_NODES,
        hypernodes=three_tier(names=True),
        binds=1,
    ),
    "hard-name-rescheduled-cross-tier": Case(
        2015,
        hard_name(TASK_TIER),
        2,
        running_on=["s0-n1", "s0-n2"],
        hypernodes=two_tier(names=True),
    ),
}


def _objects(case: Case) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [make_queue("q1")]
    for name in case.nodes:
        labels = {"nodeRole": "master"} if name == case.master_node else None
        objs.append(make_node(name, cpu="2", memory="4Gi", pods="10", labels=labels))
    objs += case.hypernodes
    group = make_podgroup(
        "pg1",
        namespace="c1",
        queue="q1",
        min_member=case.min_member,
        phase="Inqueue",
        network_topology=case.topology,
    )
    objs.append(group)
    for i in range(case.pods):
        node = case.running_on[i] if i < len(case.running_on) else None
        objs.append(
            make_pod(
                f"p{i + 1}",
                namespace="c1",
                cpu="2",
                memory="4G",
                group="pg1",
                node=node,
                annotations={"volcano.sh/task-spec": ROLES[i]},
                node_selector=case.selector,
            )
        )
    return objs


@pytest.mark.parametrize(
    "case", list(CASES.values()), ids=[f"{k}-L{c.line}" for k, c in CASES.items()]
)
def test_allocate_with_network_topologies(case: Case) -> None:
    """allocate_test.go TestAllocateWithNetWorkTopologies (line in the id): the number of
    pods bound in one allocate session, and where, when the case says."""
    run = simulate(_objects(case), conf=CONF, max_cycles=1)
    new_binds = {
        pod: node for pod, node in run.binds().items() if int(pod[1:]) > len(case.running_on)
    }
    assert len(new_binds) == case.binds, new_binds
    if case.bind_map is not None:
        assert new_binds == case.bind_map


def test_unknown_tier_name_drops_the_constraint_as_volcano_does() -> None:
    """allocate_test.go:2083 ("no corresponding highestTierAllowed for highestTierName"):
    Volcano cannot translate the name (``translateHighestTierNameToAllowed``), keeps the job
    unconstrained and binds its pending pod; so does Lahar, with a warning naming the
    PodGroup and the field."""
    case = Case(
        2083,
        hard_name("volcano.sh/hypercluster"),
        2,
        running_on=["s0-n1", "s0-n2"],
        hypernodes=[
            make_hypernode("s0", tier=1, nodes=["s0-n1", "s0-n2"], tier_name=TASK_TIER),
            make_hypernode("s1", tier=1, nodes=["s1-n3", "s1-n4"], tier_name=TASK_TIER),
        ],
    )
    with structlog.testing.capture_logs() as logs:
        run = simulate(_objects(case), conf=CONF, max_cycles=1)
    assert run.pod("p3", "c1")["spec"].get("nodeName")
    (warned,) = [entry for entry in logs
                 if entry["event"] == "network topology constraint dropped, as in Volcano"]
    assert "highestTierName 'volcano.sh/hypercluster' names no HyperNode tier" in warned[
        "problem"]
