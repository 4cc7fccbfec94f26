"""gangpreempt and gangreclaim in HyperNode domains: Volcano's gang-eviction e2e cases with
network topology (``test/e2e/gangevict/gangevict.go``, GP-S1, GP-T1..T4, GR-S1, GR-T1..T4) as
scenarios, plus the domain search itself (``actions/utils/util.go:61-96``,
``gangpreempt.go:143-187``, ``gangreclaim.go:145-192``, ``simulate.go:40``).

The cluster is the e2e one (``setupTopoHyperNodes``, gangevict.go:287): four 1-cpu nodes
(``CPU1Mem1``; the too-small case uses 8-cpu ones as its comment says), leaves s0 = {n0, n1}
and s1 = {n2, n3} under the tier-2 s2, full of the victim's pods, so room comes only from
eviction. Victims are placed so that the first two in bundle order sit in different leaves: a
search of the whole cluster evicted across leaves and nominated the preemptor there; a search
by domain takes only victims of the leaf the preemptor goes to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.commands.cli import main
from scheduler.conf import parse_conf
from tests.builders import make_hypernode, make_node, simulate
from tests.scenarios.gangevict_helpers import GANG_EVICT_CONF, capacity_queue
from tests.scenarios.preemption_helpers import evicted, priority_classes, running, vcjob

Obj = dict[str, Any]
LEAVES = {"s0": {"n0", "n1"}, "s1": {"n2", "n3"}}
SPREAD = ["n0", "n2", "n1", "n3"]
"""Round-robin: task-0 on n0 (s0), task-1 on n2 (s1), task-2 on n1, task-3 on n3."""


def _cluster(cpu: str = "1") -> list[Obj]:
    return [*priority_classes(), *(make_node(f"n{i}", cpu=cpu, memory="8Gi") for i in range(4)),
            make_hypernode("s0", tier=1, nodes=["n0", "n1"]),
            make_hypernode("s1", tier=1, nodes=["n2", "n3"]),
            make_hypernode("s2", tier=2, hypernodes=["s0", "s1"])]


def _job(name: str, queue: str, priority: str, replicas: int, min_available: int, tier: int,
         *, cpu: str = "1", on: list[str] | None = None,
         sub_groups: list[dict[str, Any]] | None = None) -> list[Obj]:
    objs = vcjob(name, replicas=replicas, min_member=min_available, queue=queue,
                 priority=priority, cpu=cpu, running_on=on, preemptable="true" if on else None)
    objs[0]["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
    for pod in objs[1:]:  # bundle order is by task priority, then UID: make it the name's
        pod["metadata"]["uid"] = pod["metadata"]["name"]
    if sub_groups is not None:
        objs[0]["spec"]["subGroupPolicy"] = sub_groups
        for i, pod in enumerate(objs[1:]):  # interleaved: tasks 0, 2 and 1, 3
            pod["metadata"].setdefault("labels", {})["partition"] = str(i % 2)
    return objs


def _run(*objs: Obj, conf: str = GANG_EVICT_CONF, cpu: str = "1") -> Any:
    return simulate([*_cluster(cpu), *objs], conf=conf, max_cycles=8)


def _leaf_of(run: Any, job: str, count: int) -> str | None:
    nodes = {run.node_of(f"{job}-task-{i}") for i in range(count)}
    return next((leaf for leaf, members in LEAVES.items() if nodes <= members), None)


def _victim_leaves(run: Any) -> set[str]:
    spread = dict(enumerate(SPREAD))
    return {leaf for name in evicted(run) for leaf, members in LEAVES.items()
            if spread[int(name.rsplit("-", 1)[1])] in members}


# -- gangpreempt -------------------------------------------------------------------------
def test_gp_t1_hard_tier1_preemptor_lands_in_one_domain() -> None:
    """gangevict.go:784 GP-T1: the preemptor (2 x 1 cpu, hard tier 1) runs inside one leaf,
    the victim (4, minAvailable 2, hard tier 2) keeps 2, and both victims taken are from that
    leaf (searching the cluster took task-0 on s0 and task-1 on s1)."""
    run = _run(capacity_queue("gp-q", 4),
               *_job("victim", "gp-q", "low-priority", 4, 2, 2, on=SPREAD),
               *_job("pre", "gp-q", "high-priority", 2, 2, 1))
    leaf = _leaf_of(run, "pre", 2)
    assert leaf is not None and running(run, "pre") == 2
    assert running(run, "victim") == 2
    assert _victim_leaves(run) == {leaf}


def test_gp_t2_hard_tier1_preemption_blocked_when_the_domain_is_too_small() -> None:
    """gangevict.go:829 GP-T2: 3 x 5 cpu cannot be packed into a leaf of two 8-cpu nodes;
    nothing is evicted (searching the cluster evicted the tight victim and nominated the
    preemptor across both leaves, where allocate could then never place it)."""
    run = _run(capacity_queue("gp-q", 32),
               *_job("victim", "gp-q", "low-priority", 4, 4, 2, cpu="3", on=SPREAD),
               *_job("pre", "gp-q", "high-priority", 3, 3, 1, cpu="6"), cpu="8")
    assert running(run, "pre") == 0
    assert evicted(run) == []
    assert running(run, "victim") == 4


def test_gp_t3_hard_tier2_preemption_succeeds_at_the_wider_domain() -> None:
    """gangevict.go:867 GP-T3: 3 tasks, hard tier 2: the spine holds them (the victim's
    surplus is not enough, so it goes whole)."""
    run = _run(capacity_queue("gp-q", 4),
               *_job("victim", "gp-q", "low-priority", 4, 2, 2, on=SPREAD),
               *_job("pre", "gp-q", "high-priority", 3, 3, 2))
    assert running(run, "pre") == 3


def test_gp_t4_tier2_allowed_but_one_leaf_suffices() -> None:
    """gangevict.go:904 GP-T4: hard tier 2, 2 tasks, the victim's surplus in one leaf: the
    domain is the spine (widest first), the preemptor ends in that leaf, the victim keeps 2."""
    run = _run(capacity_queue("gp-q", 4),
               *_job("victim", "gp-q", "low-priority", 4, 2, 2, on=["n0", "n1", "n2", "n3"]),
               *_job("pre", "gp-q", "high-priority", 2, 2, 2))
    assert running(run, "pre") == 2
    assert _leaf_of(run, "pre", 2) is not None
    assert running(run, "victim") == 2


def test_gp_s1_min_sub_groups_keeps_one_partition_whole() -> None:
    """gangevict.go:741 GP-S1 (bundle.go CreateJobBundles, group surplus): the victim has two
    partitions of 2 (tasks 0, 2 and 1, 3) and needs one (minSubGroups 1, minAvailable 2):
    taking tasks 0 and 1, first in order, would break both, so the two victims are one
    partition."""
    policy = [{"name": "part", "matchLabelKeys": ["partition"], "subGroupSize": 2,
               "minSubGroups": 1}]
    run = _run(capacity_queue("gp-q", 4),
               *_job("victim", "gp-q", "low-priority", 4, 2, 2, on=["n0", "n1", "n2", "n3"],
                     sub_groups=policy),
               *_job("pre", "gp-q", "high-priority", 2, 2, 2))
    assert running(run, "pre") == 2
    taken = {int(name.rsplit("-", 1)[1]) % 2 for name in evicted(run)}
    assert len(evicted(run)) == 2 and len(taken) == 1


# -- gangreclaim -------------------------------------------------------------------------
def _reclaim_queues(deserved: int) -> list[Obj]:
    return [capacity_queue("q1", deserved), capacity_queue("q2", deserved)]


def test_gr_t1_hard_tier1_reclaimer_lands_in_one_domain() -> None:
    """gangevict.go:1319 GR-T1 (q2 overuses its deserved 2 with 4 pods)."""
    run = _run(*_reclaim_queues(2),
               *_job("victim", "q2", "low-priority", 4, 2, 2, on=SPREAD),
               *_job("rec", "q1", "low-priority", 2, 2, 1))
    leaf = _leaf_of(run, "rec", 2)
    assert leaf is not None and running(run, "rec") == 2
    assert running(run, "victim") == 2
    assert _victim_leaves(run) == {leaf}


def test_gr_t2_hard_tier1_reclaim_blocked_when_the_domain_is_too_small() -> None:
    """gangevict.go:1365 GR-T2."""
    run = _run(*_reclaim_queues(16),
               *_job("victim", "q2", "low-priority", 4, 4, 2, cpu="3", on=SPREAD),
               *_job("rec", "q1", "low-priority", 3, 3, 1, cpu="6"), cpu="8")
    assert running(run, "rec") == 0
    assert evicted(run) == []


def test_gr_t3_hard_tier2_reclaim_succeeds_at_the_wider_domain() -> None:
    """gangevict.go:1405 GR-T3. On these 1-cpu nodes the victim must go whole (3 of its 4
    pods), so q1 deserves the cluster and q2 nothing (capacity lets a queue be reclaimed only
    down to its deserved share)."""
    run = _run(capacity_queue("q1", 4), capacity_queue("q2", 0),
               *_job("victim", "q2", "low-priority", 4, 2, 2, on=SPREAD),
               *_job("rec", "q1", "low-priority", 3, 3, 2))
    assert running(run, "rec") == 3


def test_gr_s1_min_sub_groups_keeps_one_partition_whole() -> None:
    """gangevict.go:1274 GR-S1 (as GP-S1, the victim in the overusing queue)."""
    policy = [{"name": "part", "matchLabelKeys": ["partition"], "subGroupSize": 2,
               "minSubGroups": 1}]
    run = _run(*_reclaim_queues(2),
               *_job("victim", "q2", "low-priority", 4, 2, 2, on=["n0", "n1", "n2", "n3"],
                     sub_groups=policy),
               *_job("rec", "q1", "low-priority", 2, 2, 2))
    assert running(run, "rec") == 2
    taken = {int(name.rsplit("-", 1)[1]) % 2 for name in evicted(run)}
    assert len(evicted(run)) == 2 and len(taken) == 1


def test_gr_t4_tier2_allowed_but_one_leaf_suffices() -> None:
    """gangevict.go:1444 GR-T4."""
    run = _run(*_reclaim_queues(2),
               *_job("victim", "q2", "low-priority", 4, 2, 2, on=["n0", "n1", "n2", "n3"]),
               *_job("rec", "q1", "low-priority", 2, 2, 2))
    assert running(run, "rec") == 2
    assert _leaf_of(run, "rec", 2) is not None
    assert running(run, "victim") == 2


# -- the domain search -------------------------------------------------------------------
def _with(action: str, arguments: str, extra: str = "") -> str:
    return (GANG_EVICT_CONF.replace("  - name: network-topology-aware",
                                    "  - name: network-topology-aware" + extra)
            + f"configurations:\n- name: {action}\n  arguments: {arguments}\n")


@pytest.mark.parametrize(
    ("conf", "victims_in", "placed"),
    [
        pytest.param(GANG_EVICT_CONF, "s0", True, id="default-s0"),
        pytest.param(GANG_EVICT_CONF, "s1", True, id="default-s1"),
        pytest.param(_with("gangpreempt", "{maxDomains: 1}"), "s0", True, id="maxDomains-1-s0"),
        pytest.param(_with("gangpreempt", "{maxDomains: 1}"), "s1", False,
                     id="maxDomains-1-s1"),
        pytest.param(_with("gangpreempt", "{}", "\n    arguments: "
                           "{hypernode.gradient.evict.max-hypernodes: 1}"), "s0", False,
                     id="evict-max-hypernodes-1-s0"),
        pytest.param(_with("gangpreempt", "{}", "\n    arguments: "
                           "{hypernode.gradient.evict.max-hypernodes: 1}"), "s1", True,
                     id="evict-max-hypernodes-1-s1"),
    ],
)
def test_domains_are_capped(conf: str, victims_in: str, placed: bool) -> None:
    """A hard tier-1 preemptor's eviction gradient is [s0, s1] (breadth first).
    util.go:61 PickDomainsFromGradients keeps the first ``maxDomains`` of it;
    network_topology_aware.go:732 reverseAndCapEvictionGradients keeps the last
    ``hypernode.gradient.evict.max-hypernodes`` of each tier. One leaf holds a gang that may
    not be preempted, the other the victims: the preemptor runs only when the victims' leaf
    is searched."""
    assert not [w for w in parse_conf(conf).warnings if "maxDomains" in w]
    other = "s1" if victims_in == "s0" else "s0"
    keep = vcjob("keep", replicas=2, min_member=2, queue="gp-q", priority="low-priority",
                 running_on=sorted(LEAVES[other]), preemptable="false")
    run = _run(capacity_queue("gp-q", 4), *keep,
               *_job("victim", "gp-q", "low-priority", 2, 1, 2, on=sorted(LEAVES[victims_in])),
               *_job("pre", "gp-q", "high-priority", 1, 1, 1), conf=conf)
    assert running(run, "pre") == int(placed)


def test_simulate_names_the_gang_each_victim_made_room_for(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``lahar simulate``'s FOR column: a gang-eviction victim made room for a whole gang
    (gangpreempt.go:123 commits one statement per preemptor job), so its Evict event's related
    object is that job's PodGroup. Guessed from the pod nominated to the victim's node, the
    sample named hotfix-0 for one victim and nobody for the other, and a train pod for each
    victim of gangreclaim."""
    data = Path(__file__).resolve().parents[1] / "data" / "gangevict"
    assert main(["simulate", str(data / "cluster.yaml"), "--conf", str(data / "conf.yaml"),
                 "--max-cycles", "1"]) == 0
    out = capsys.readouterr().out
    rows = out[out.index("EVICTED POD"):].split("\n\n")[0].splitlines()[1:]
    owners = {row.split()[0]: (row.split()[1], " ".join(row.split()[2:])) for row in rows}
    assert set(owners.values()) == {("gangpreempt", "PodGroup default/hotfix"),
                                    ("gangreclaim", "PodGroup default/train")}
    assert len(owners) == 4
