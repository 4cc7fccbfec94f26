"""Property: sub-group partitions are gangs kept inside one HyperNode of their tier.

For random two-tier trees and random jobs cut into partitions by ``spec.subGroupPolicy`` (the
pods' ``team`` label), one allocate session must leave, as Volcano's ``allocateForJob`` /
``allocateForSubJob`` with gang's ``SubJobReadyFn`` and ``CheckSubJobReady`` do:

* the job all or nothing: no pod bound, or at least ``minMember`` bound and, for the policy,
  at least ``minSubGroups`` partitions with ``subGroupSize`` pods bound;
* each partition all or nothing: 0 or at least ``subGroupSize`` of its pods bound (nothing is
  releasing, so nothing is pipelined);
* each partition with a hard ``highestTierAllowed: 1`` inside one leaf HyperNode, and the whole
  job inside one HyperNode of its own hard tier.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import make_hypernode, make_node, make_pod, make_podgroup, make_queue, simulate

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - {name: priority}
  - {name: gang}
- plugins:
  - {name: predicates}
  - {name: network-topology-aware}
"""

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    leaves = draw(st.integers(1, 3))
    sizes = [draw(st.integers(1, 3)) for _ in range(leaves + 1)]
    cpus = {
        f"l{i}-n{j}": draw(st.sampled_from(["2", "4"]))
        for i in range(leaves)
        for j in range(sizes[i])
    }
    teams = draw(st.integers(1, 3))
    pods = draw(
        st.lists(
            st.tuples(st.integers(0, teams - 1), st.sampled_from(["1", "2"])),
            min_size=1,
            max_size=8,
        )
    )
    return {
        "leaves": leaves,
        "cpus": cpus,
        "pods": pods,
        "min_member": draw(st.integers(1, len(pods))),
        "job_tier": draw(st.sampled_from([None, 1, 2])),
        "sub_tier": draw(st.sampled_from([None, 1])),
        "size": draw(st.integers(1, 3)),
        "min_sub": draw(st.integers(0, 2)),
    }


def _objects(c: dict[str, Any]) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [make_queue("q1")]
    objs += [make_node(name, cpu=cpu, memory="8Gi", pods="10") for name, cpu in c["cpus"].items()]
    leaves = [f"l{i}" for i in range(c["leaves"])]
    for leaf in leaves:
        objs.append(
            make_hypernode(leaf, tier=1, nodes=[n for n in c["cpus"] if n.startswith(leaf + "-")])
        )
    objs.append(make_hypernode("spine", tier=2, hypernodes=leaves))
    policy: dict[str, Any] = {
        "name": "teams",
        "matchLabelKeys": ["team"],
        "subGroupSize": c["size"],
        "minSubGroups": c["min_sub"],
    }
    if c["sub_tier"] is not None:
        policy["networkTopology"] = {"mode": "hard", "highestTierAllowed": c["sub_tier"]}
    job_topology = (
        None if c["job_tier"] is None else {"mode": "hard", "highestTierAllowed": c["job_tier"]}
    )
    objs.append(
        make_podgroup(
            "pg",
            namespace="ns",
            queue="q1",
            min_member=c["min_member"],
            network_topology=job_topology,
            sub_group_policy=[policy],
        )
    )
    for i, (team, cpu) in enumerate(c["pods"]):
        pod = make_pod(f"p{i}", namespace="ns", cpu=cpu, memory="1Gi", group="pg")
        pod["metadata"]["labels"] = {"team": f"t{team}"}
        objs.append(pod)
    return objs


@SETTINGS
@given(cluster=clusters(), seed=st.integers(0, 2**16))
def test_partitions_are_gangs_inside_their_hypernode(cluster: dict[str, Any], seed: int) -> None:
    run = simulate(_objects(cluster), conf=CONF, seed=seed, max_cycles=1)
    binds = run.binds()
    if not binds:
        return
    leaf_of = {node: node.split("-")[0] for node in cluster["cpus"]}
    assert len(binds) >= cluster["min_member"]
    teams: dict[int, list[str]] = {}
    for i, (team, _) in enumerate(cluster["pods"]):
        if f"p{i}" in binds:
            teams.setdefault(team, []).append(binds[f"p{i}"])
    for nodes in teams.values():
        assert len(nodes) >= cluster["size"], teams
        if cluster["sub_tier"] == 1:
            assert len({leaf_of[n] for n in nodes}) == 1, teams
    assert len(teams) >= cluster["min_sub"], teams
    if cluster["job_tier"] == 1:
        assert len({leaf_of[n] for n in binds.values()}) == 1, binds
