"""Elastic jobs (more replicas than ``minMember``) with ``networkTopology``. Volcano places
such a job through its default sub-job (``allocate.go:370`` ``allocateForJob`` then ``:465``
``allocateForSubJob``), whose HyperNode search asks a HyperNode to hold every pending pod:
``SubJobInfo.GetMinResources`` (``sub_job_info.go:286``) is the sum of the pending tasks'
requests, checked against the HyperNode's idle or future idle
(``network_topology_aware.go:649`` ``isEligibleHyperNode``). Soft mode takes the same path,
turned hard at the virtual top tier (``session.go:1076-1090``), and so does a cluster without
HyperNodes (the virtual top HyperNode holds every node). Lahar bound ``minMember`` pods in a
leaf instead."""

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


def _cluster(*, hypernodes: bool = True) -> list[Obj]:
    """Two leaves of two 1-cpu nodes under one spine (4 cpu in all)."""
    nodes = [f"{leaf}{i}" for leaf in "ab" for i in (1, 2)]
    objs: list[Obj] = [make_queue("default"), *(make_node(n, cpu="1", memory="8Gi") for n in nodes)]
    if hypernodes:
        objs += [make_hypernode("a", tier=1, nodes=["a1", "a2"]),
                 make_hypernode("b", tier=1, nodes=["b1", "b2"]),
                 make_hypernode("spine", tier=2, hypernodes=["a", "b"])]
    return objs


def _job(replicas: int, min_member: int, topology: dict[str, Any]) -> list[Obj]:
    return [make_podgroup("job", min_member=min_member, network_topology=topology),
            *(make_pod(f"job-{i}", cpu="1", group="job") for i in range(replicas))]


def _bound(run: Any, replicas: int) -> list[str]:
    return sorted(n for i in range(replicas) if (n := run.node_of(f"job-{i}")))


def test_hard_elastic_job_needs_a_leaf_for_every_pending_pod() -> None:
    """minMember 2 fits a leaf, the three replicas do not: no leaf is eligible for the default
    sub-job, so the hard tier-1 job waits (Lahar bound two pods in a leaf)."""
    run = simulate([*_cluster(), *_job(3, 2, {"mode": "hard", "highestTierAllowed": 1})],
                   conf=CONF)
    assert _bound(run, 3) == []
    condition = run.condition("job-0")
    assert condition is not None and condition["status"] == "False"


def test_hard_elastic_job_allowed_the_spine_goes_there_whole() -> None:
    run = simulate([*_cluster(), *_job(3, 2, {"mode": "hard", "highestTierAllowed": 2})],
                   conf=CONF)
    assert len(_bound(run, 3)) == 3


def test_soft_elastic_job_larger_than_the_cluster_waits() -> None:
    """Soft mode: five 1-cpu replicas, minMember 2, 4 cpu in the cluster: not even the virtual
    top holds every pending pod, so nothing is bound (Lahar bound four)."""
    run = simulate([*_cluster(), *_job(5, 2, {"mode": "soft"})], conf=CONF)
    assert _bound(run, 5) == []


def test_soft_elastic_job_without_hypernodes_waits_too() -> None:
    run = simulate([*_cluster(hypernodes=False), *_job(5, 2, {"mode": "soft"})], conf=CONF)
    assert _bound(run, 5) == []


def test_an_elastic_job_that_fits_is_placed_whole_in_the_lowest_tier() -> None:
    """Soft, three replicas, minMember 1: a leaf holds minMember but not the three, so the
    spine (and its two leaves) takes all of them."""
    run = simulate([*_cluster(), *_job(3, 1, {"mode": "soft"})], conf=CONF)
    assert len(_bound(run, 3)) == 3


def test_a_job_without_spare_replicas_is_unchanged() -> None:
    run = simulate([*_cluster(), *_job(2, 2, {"mode": "hard", "highestTierAllowed": 1})],
                   conf=CONF)
    bound = _bound(run, 2)
    assert bound in (["a1", "a2"], ["b1", "b2"])
