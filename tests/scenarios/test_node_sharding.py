"""Node sharding (``--scheduler-sharding-mode``), scenario by scenario against Volcano's tests.

Each case names the Volcano test it follows; the cluster is the embedded one, the NodeShards
come as manifests and the scheduler's cache is switched to the mode under test, as ``lahar
simulate --scheduler-sharding-mode`` does.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import run_simulation
from scheduler.commands.simulate import sharding_setup
from tests.builders import Run, conf_of, make_node, make_pod, make_podgroup, make_queue
from tests.scenarios.preemption_helpers import e2e_conf, evicted, priority_classes, vcjob

Obj = dict[str, Any]

# Volcano's shard tests score with nodeorder's leastAllocated only.
LEAST_ALLOCATED = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - {name: predicates}
  - {name: proportion}
  - name: nodeorder
    arguments: {leastrequested.weight: 1, balancedresource.weight: 0,
                mostrequested.weight: 0, nodeaffinity.weight: 0, podaffinity.weight: 0,
                tainttoleration.weight: 0, imagelocality.weight: 0}
"""


def node_shard(name: str, desired: list[str], *, in_use: list[str] | None = None) -> Obj:
    shard: Obj = {"apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
                  "metadata": {"name": name}, "spec": {"nodesDesired": desired}}
    if in_use is not None:
        shard["status"] = {"nodesInUse": in_use}
    return shard


def run(objects: list[Obj], *, mode: str, name: str = "test-shard", conf: str = LEAST_ALLOCATED,
        seed: int = 0, max_cycles: int = 10) -> Run:
    manifests = [Manifest(f"test#{i}", obj) for i, obj in enumerate(objects)]
    return Run(run_simulation(manifests, conf=conf_of(conf), seed=seed, max_cycles=max_cycles,
                              setup=sharding_setup(mode, name)))


def four_nodes() -> list[Obj]:
    """Volcano's TestAllocateWithShard cluster: n3 is the largest (leastAllocated's choice)."""
    return [make_node("n1", cpu="10", memory="20Gi", pods="10"),
            make_node("n2", cpu="2", memory="4Gi", pods="10"),
            make_node("n3", cpu="20", memory="40Gi", pods="10"),
            make_node("n4", cpu="5", memory="10Gi", pods="10")]


def one_pod(**kwargs: Any) -> list[Obj]:
    pod: dict[str, Any] = {"cpu": "1", "memory": "1G", **kwargs}
    return [make_queue("default"), make_podgroup("pg1"), make_pod("p1", group="pg1", **pod)]


def test_without_sharding_the_largest_node_wins() -> None:
    """The baseline the shard cases below move away from: n3 scores highest."""
    result = run([*four_nodes(), *one_pod(), node_shard("test-shard", ["n1", "n4"])],
                 mode="none")
    assert result.binds() == {"p1": "n3"}


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_allocate_places_in_the_shard(mode: str) -> None:
    """Volcano's TestAllocateWithShard (pkg/scheduler/actions/allocate/allocate_shard_test.go):
    "hard sharding mode - allocate to node in shard" and "soft sharding mode - prefer node in
    shard": n1 and n4 are the shard, n3 would score best, n1 is chosen."""
    result = run([*four_nodes(), *one_pod(), node_shard("test-shard", ["n1", "n4"])], mode=mode)
    assert result.binds() == {"p1": "n1"}


@pytest.mark.parametrize("seed", range(5))
def test_soft_mode_prefers_the_shard_between_identical_nodes(seed: int) -> None:
    """TestAllocateWithShard "soft sharding mode - identical nodes prefer shard node": with
    equal scores the shard node is taken on every seed (ties are otherwise drawn at random)."""
    nodes = [make_node(name, cpu="10", memory="20Gi", pods="10") for name in ("n1", "n2")]
    result = run([*nodes, *one_pod(), node_shard("test-shard", ["n2"])], mode="soft", seed=seed)
    assert result.binds() == {"p1": "n2"}


def test_hard_mode_leaves_a_pod_pending_rather_than_leave_the_shard() -> None:
    """PredicateNodes (pkg/scheduler/util/predicate_helper.go) fails a node outside the shard
    before any predicate, with Volcano's message; the resource check only explains the rest."""
    result = run([*four_nodes(), *one_pod(), node_shard("test-shard", ["n2"])],
                 mode="hard", conf=LEAST_ALLOCATED)
    assert result.binds() == {"p1": "n2"}
    big = [make_queue("default"), make_podgroup("pg1"),
           make_pod("p1", cpu="8", memory="1G", group="pg1")]
    result = run([*four_nodes(), *big, node_shard("test-shard", ["n2", "n4"])], mode="hard")
    assert result.binds() == {}
    assert result.reason("p1") == ("0/4 nodes are unavailable: 2 Insufficient cpu, "
                                   "2 node isn't in scheduler node shard.")


def test_soft_mode_falls_back_outside_the_shard_when_it_is_full() -> None:
    """prioritizeNodes (allocate.go): idle nodes of other shards come after the shard's idle
    nodes, and before future-idle ones; a pod the shard cannot hold goes outside."""
    big = [make_queue("default"), make_podgroup("pg1"),
           make_pod("p1", cpu="8", memory="1G", group="pg1")]
    result = run([*four_nodes(), *big, node_shard("test-shard", ["n2", "n4"])], mode="soft")
    assert result.binds() == {"p1": "n3"}


def test_no_shard_of_our_name_means_no_node_in_hard_mode_and_no_preference_in_soft() -> None:
    """RefreshNodeShards (pkg/scheduler/cache/shard_coordinator.go) keeps the empty set when
    no NodeShard is named after the scheduler."""
    objects = [*four_nodes(), *one_pod(), node_shard("other", ["n1"])]
    assert run(objects, mode="hard").binds() == {}
    assert run(objects, mode="soft").binds() == {"p1": "n3"}


def test_nodes_another_shard_still_uses_are_not_ours_yet() -> None:
    """getAvailableNodesFromShard (shard_coordinator.go): our desired nodes less those another
    shard's status still lists in nodesInUse (TestGetAvailableNodesFromShard)."""
    objects = [*four_nodes(), *one_pod(),
               node_shard("test-shard", ["n1", "n3"]),
               node_shard("other", ["n4"], in_use=["n3", "n4"])]
    result = run(objects, mode="hard")
    assert result.binds() == {"p1": "n1"}
    status = result.cluster.objects["NodeShard"]["test-shard"]["status"]
    assert status == {"nodesInUse": ["n1"], "nodesToAdd": ["n3"], "nodesToRemove": []}
    assert "status" not in result.cluster.objects["NodeShard"]["other"] or (
        result.cluster.objects["NodeShard"]["other"]["status"]["nodesInUse"] == ["n3", "n4"])


def test_backfill_keeps_to_the_shard() -> None:
    """TestBackfillWithShard (pkg/scheduler/actions/backfill/backfill_shard_test.go): a
    best-effort pod goes to the shard's node in both modes."""
    for mode in ("hard", "soft"):
        objects = [*four_nodes(), *one_pod(cpu=None, memory=None), node_shard("test-shard", ["n4"])]
        assert run(objects, mode=mode).binds() == {"p1": "n4"}, mode


@pytest.mark.parametrize(("mode", "victim"), [("none", "low-task-0"), ("hard", "low-task-1"),
                                             ("soft", "low-task-1")])
def test_preempt_evicts_in_the_shard(mode: str, victim: str) -> None:
    """TestPreemptWithShard (pkg/scheduler/actions/preempt/preempt_shard_test.go): two
    one-CPU nodes each running a low-priority pod; the preemptor's victim is on the shard's
    node (here n2; without sharding n1 is tried first)."""
    objects = [make_node("n1", cpu="1", memory="1Gi", pods="10"),
               make_node("n2", cpu="1", memory="1Gi", pods="10"),
               make_queue("default"), *priority_classes(),
               *vcjob("low", replicas=2, min_member=1, priority="low-priority",
                      running_on=["n1", "n2"]),
               *vcjob("high", replicas=1, min_member=1, priority="high-priority"),
               node_shard("test-shard", ["n2"])]
    result = run(objects, mode=mode, conf=e2e_conf(actions="enqueue, allocate, preempt"),
                 max_cycles=3)
    assert evicted(result) == [victim]


@pytest.mark.parametrize(("mode", "victim"), [("none", "low-task-0"), ("hard", "low-task-1"),
                                             ("soft", "low-task-1")])
def test_reclaim_evicts_in_the_shard(mode: str, victim: str) -> None:
    """TestReclaimWithShard (pkg/scheduler/actions/reclaim/reclaim_shard_test.go): queue q1
    fills both two-CPU nodes beyond its share; q2's pod reclaims on the shard's node (n2 here;
    without sharding n1 comes first)."""
    objects = [make_node("n1", cpu="2", memory="2Gi", pods="10"),
               make_node("n2", cpu="2", memory="2Gi", pods="10"),
               make_queue("q1"), make_queue("q2"), *priority_classes(),
               *vcjob("low", replicas=2, min_member=1, cpu="2", queue="q1",
                      priority="low-priority", running_on=["n1", "n2"]),
               *vcjob("high", replicas=1, min_member=1, queue="q2", priority="high-priority"),
               node_shard("test-shard", ["n2"])]
    result = run(objects, mode=mode, conf=e2e_conf(actions="enqueue, allocate, reclaim"),
                 max_cycles=3)
    assert evicted(result) == [victim]


def test_simulate_command_takes_the_sharding_flags(tmp_path: Any, capsys: Any) -> None:
    """``lahar simulate --scheduler-sharding-mode hard --scheduler-sharding-name`` with the
    NodeShard among the manifests."""
    import yaml

    from scheduler.commands.cli import main

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([*four_nodes(), *one_pod(),
                                        node_shard("mine", ["n4"])]))
    assert main(["simulate", str(path), "-o", "json", "--scheduler-sharding-mode", "hard",
                 "--scheduler-sharding-name", "mine"]) == 0
    items = yaml.safe_load(capsys.readouterr().out)["items"]
    (pod,) = [o for o in items if o["kind"] == "Pod"]
    assert pod["spec"]["nodeName"] == "n4"
    (shard,) = [o for o in items if o["kind"] == "NodeShard"]
    assert shard["status"] == {"nodesInUse": ["n4"], "nodesToAdd": [], "nodesToRemove": []}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cpus=st.lists(st.integers(1, 4), min_size=2, max_size=6),
       shard=st.sets(st.integers(0, 5)),
       pods=st.lists(st.integers(1, 3), min_size=1, max_size=8))
def test_hard_mode_never_leaves_the_shard_and_soft_mode_only_when_it_is_full(
        cpus: list[int], shard: set[int], pods: list[int]) -> None:
    """Property: in hard mode every bind is on a shard node; in soft mode a pod goes outside
    only if at that time no shard node had room for it (prioritizeNodes' tiers)."""
    nodes = [make_node(f"n{i}", cpu=str(cpu), memory="8Gi", pods="10")
             for i, cpu in enumerate(cpus)]
    members = sorted(f"n{i}" for i in shard if i < len(cpus))
    objects = [*nodes, make_queue("default"),
               *(o for i, cpu in enumerate(pods)
                 for o in (make_podgroup(f"g{i}"), make_pod(f"p{i}", cpu=str(cpu),
                                                            memory=None, group=f"g{i}"))),
               node_shard("test-shard", members)]
    hard = run(objects, mode="hard", max_cycles=4)
    assert set(hard.binds().values()) <= set(members)
    soft = run(objects, mode="soft", max_cycles=4)
    room = {f"n{i}": cpu for i, cpu in enumerate(cpus)}
    outside = {pod: node for pod, node in soft.binds().items() if node not in members}
    if outside:  # then the shard's nodes ended too full for the smallest pod sent outside
        smallest = min(pods[int(pod[1:])] for pod in outside)
        used = {node: 0 for node in members}
        for pod, node in soft.binds().items():
            if node in used:
                used[node] += pods[int(pod[1:])]
        assert all(room[node] - used[node] < smallest for node in members)
