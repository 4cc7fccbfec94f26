"""Where constrained jobs land: Volcano's node- and HyperNode-level scoring cases, soft mode,
the waiting reasons, preemption, and properties over random trees."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.hypernode import build_tree, hypernode_from_object
from tests.builders import (
    make_hypernode,
    make_node,
    make_pod,
    make_podgroup,
    make_queue,
    simulate,
)
from tests.scenarios.preemption_helpers import e2e_conf, evicted, priority_classes, vcjob

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


def _leaves(count: int, per: int, *, cpu: str = "4") -> list[Obj]:
    objs: list[Obj] = []
    for i in range(count):
        names = [f"s{i}-n{j}" for j in range(per)]
        objs += [make_node(n, cpu=cpu, memory="16Gi") for n in names]
        objs.append(make_hypernode(f"s{i}", tier=1, nodes=names))
    return objs


def _job(
    name: str,
    size: int,
    topology: dict[str, Any] | None,
    *,
    cpu: str = "1",
    min_member: int | None = None,
    priority: str | None = None,
) -> list[Obj]:
    group = make_podgroup(
        name,
        min_member=size if min_member is None else min_member,
        network_topology=topology,
        priority_class=priority,
    )
    return [
        group,
        *(
            make_pod(f"{name}-{i}", cpu=cpu, group=name, priority_class=priority)
            for i in range(size)
        ),
    ]


def test_node_level_binpack_prefers_the_used_hypernode() -> None:
    """allocate_test.go:2186 (TestNodeLevelScoreWithNetWorkTopologies, "allocate job to highest
    score hypeNode with node level binpack"): with binpack on, the job goes to the HyperNode
    whose nodes already run pods, each pod to the node it fills."""
    conf = """
actions: "allocate"
tiers:
- plugins:
  - {name: gang}
  - {name: predicates}
  - {name: binpack}
  - {name: network-topology-aware}
"""
    nodes = [
        make_node("s0-n1", cpu="4", memory="8Gi"),
        make_node("s0-n2", cpu="8", memory="16Gi"),
        make_node("s1-n3", cpu="4", memory="8Gi"),
        make_node("s1-n4", cpu="8", memory="16Gi"),
    ]
    objs: list[Obj] = [
        make_queue("q1"),
        *nodes,
        make_hypernode("s0", tier=1, nodes=["s0-n1", "s0-n2"]),
        make_hypernode("s1", tier=1, nodes=["s1-n3", "s1-n4"]),
        make_hypernode("s2", tier=2, hypernodes=["s0", "s1"]),
        make_podgroup(
            "pg1",
            queue="q1",
            min_member=2,
            phase="Inqueue",
            network_topology={"mode": "hard", "highestTierAllowed": 1},
        ),
        make_podgroup(
            "pg2",
            queue="q1",
            min_member=2,
            phase="Running",
            network_topology={"highestTierAllowed": 1},
        ),
        make_pod("p1", cpu="2", memory="4Gi", group="pg1"),
        make_pod("p2", cpu="4", memory="8Gi", group="pg1"),
        make_pod("p3", cpu="2", memory="4Gi", group="pg2", node="s0-n1"),
        make_pod("p4", cpu="4", memory="8Gi", group="pg2", node="s0-n2"),
    ]
    run = simulate(objs, conf=conf, max_cycles=1)
    assert run.node_of("p1") == "s0-n1"
    assert run.node_of("p2") == "s0-n2"


def test_tasks_follow_the_lowest_common_hypernode() -> None:
    """allocate_test.go:2312 (TestHyperNodeBinpackWithNetWorkTopologies, "allocate task to node
    under LCAHyperNode"): four 4-cpu pods, tier 2 allowed, three leaves of two 4-cpu nodes:
    after the first leaf fills, the next pods stay together in one other leaf (2 and 2)."""
    objs: list[Obj] = [*_leaves(3, 2), make_hypernode("s3", tier=2, hypernodes=["s0", "s1", "s2"])]
    objs += _job("pg1", 4, {"mode": "hard", "highestTierAllowed": 2}, cpu="4")
    for seed in range(5):
        run = simulate(objs, conf=CONF, seed=seed, max_cycles=1)
        leaves = sorted(node.split("-")[0] for node in run.binds().values())
        assert len(leaves) == 4
        assert sorted(leaves.count(leaf) for leaf in set(leaves)) == [2, 2], leaves


def test_soft_job_takes_the_lowest_tier_that_holds_it() -> None:
    """session.go adjustNetworkTopologySpec: soft becomes hard bounded by the cluster-top tier;
    the gang lands in one leaf when a leaf can hold it, else spreads."""
    objs = [*_leaves(2, 2), make_hypernode("top", tier=2, hypernodes=["s0", "s1"])]
    run = simulate([*objs, *_job("small", 6, {"mode": "soft"})], conf=CONF)
    assert len({n.split("-")[0] for n in run.binds().values()}) == 1
    run = simulate([*objs, *_job("big", 12, {"mode": "soft"})], conf=CONF)
    assert len(run.binds()) == 12


def test_hard_job_waits_with_the_tier_and_the_closest_hypernode() -> None:
    objs = [*_leaves(2, 2), make_hypernode("top", tier=2, hypernodes=["s0", "s1"])]
    objs += _job("busy", 3, None, cpu="4")  # leaves 1 node of 4 cpu free
    objs += _job("wide", 6, {"mode": "hard", "highestTierAllowed": 1})
    run = simulate(objs, conf=CONF)
    assert not any(pod.startswith("wide") for pod in run.binds())
    message = run.reason("wide-0")
    assert "no HyperNode of tier 1 or below" in message
    assert "HyperNode s" in message


def test_a_not_ready_tree_holds_constrained_jobs_only() -> None:
    """allocate.go buildAllocateContext: while the HyperNodes are not ready, jobs with a
    network topology are skipped; others go on."""
    objs = [
        *_leaves(2, 2),
        make_hypernode("a", tier=2, hypernodes=["s0"]),
        make_hypernode("b", tier=2, hypernodes=["s0", "s1"]),
    ]
    objs += _job("topo", 2, {"mode": "hard", "highestTierAllowed": 1})
    objs += _job("plain", 2, None)
    run = simulate(objs, conf=CONF)
    assert run.node_of("plain-0") and run.node_of("plain-1")
    assert run.node_of("topo-0") is None
    assert "HyperNodes are not ready for scheduling" in run.reason("topo-0")
    assert "s0" in run.reason("topo-0")


def test_a_constrained_job_does_not_preempt() -> None:
    """preempt.go Execute: jobs containing a network topology skip preemption (the same
    preemptor without one evicts)."""
    for topology, victims in ((None, 1), ({"mode": "hard", "highestTierAllowed": 1}, 0)):
        objs = [
            make_node("n1", cpu="2"),
            make_hypernode("s0", tier=1, nodes=["n1"]),
            *priority_classes(),
            *vcjob("low", replicas=2, min_member=1, priority="low-priority", running_on=["n1"]),
            *vcjob("high", replicas=1, min_member=1, priority="high-priority"),
        ]
        objs[-2]["spec"]["networkTopology"] = topology
        if topology is None:
            del objs[-2]["spec"]["networkTopology"]
        run = simulate(objs, conf=e2e_conf(actions="allocate, backfill, preempt"))
        assert len(evicted(run)) == victims, topology


# -- properties ------------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Obj], dict[str, int]]:
    leaves = draw(st.integers(2, 5))
    per = draw(st.integers(1, 3))
    objs: list[Obj] = _leaves(leaves, per)
    spines = draw(st.integers(1, 2))
    for s in range(spines):
        members = [f"s{i}" for i in range(leaves) if i % spines == s]
        objs.append(make_hypernode(f"spine{s}", tier=2, hypernodes=members))
    limits: dict[str, int] = {}
    for j in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 8))
        tier = draw(st.sampled_from([1, 2]))
        cpu = draw(st.sampled_from(["1", "2"]))
        limits[f"j{j}"] = tier
        objs += _job(
            f"j{j}",
            size,
            {"mode": "hard", "highestTierAllowed": tier},
            cpu=cpu,
            min_member=draw(st.integers(1, size)),
        )
    return objs, limits


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 3))
def test_hard_jobs_stay_in_one_hypernode_and_gangs_are_whole(
    cluster: tuple[list[Obj], dict[str, int]], seed: int
) -> None:
    objs, limits = cluster
    run = simulate(objs, conf=CONF, seed=seed, max_cycles=4)
    tree = build_tree(
        [hypernode_from_object(o) for o in objs if o["kind"] == "HyperNode"],
        {o["metadata"]["name"]: {} for o in objs if o["kind"] == "Node"},
    )
    binds = run.binds()
    for job, limit in limits.items():
        nodes = {node for pod, node in binds.items() if pod.startswith(f"{job}-")}
        group = run.podgroup(job)
        if nodes:
            common = ""
            for node in nodes:
                common = tree.lca(common, tree.leaf_of(node) or "")
            assert common, (job, nodes)
            assert tree.tier_of(common) <= limit, (job, nodes, common)
        placed = len([p for p in binds if p.startswith(f"{job}-")])
        assert placed == 0 or placed >= group["spec"]["minMember"], (job, placed)
