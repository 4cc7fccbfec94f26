"""The preempt action's eligibility rules and its transactions, one scenario each.

Matched against ``actions/preempt/preempt.go`` (``Execute``: preemptor and victim filters,
commit when pipelined; ``taskEligibleToPreempt``; ``normalPreempt``: per-node statement) and
``util.ValidateVictims``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import make_node, make_pod, make_podgroup, simulate
from tests.scenarios.preemption_helpers import (
    e2e_conf,
    evicted,
    priority_classes,
    running,
    vcjob,
)

ACTIONS = "allocate, backfill, preempt"


def _full_node(**pod_kwargs: Any) -> list[dict]:
    return [
        make_node("n1", cpu="2"), *priority_classes(),
        *vcjob("low", replicas=2, min_member=1, priority="low-priority", running_on=["n1"],
               **pod_kwargs),
    ]


def test_preemption_policy_never_does_not_preempt() -> None:
    preemptor = vcjob("high", replicas=1, min_member=1, priority="high-priority")
    preemptor[1]["spec"]["preemptionPolicy"] = "Never"
    run = simulate([*_full_node(), *preemptor], conf=e2e_conf(actions=ACTIONS))
    assert evicted(run) == []
    assert running(run, "high") == 0


@pytest.mark.parametrize("where", ["labels", "annotations"])
def test_preemptable_false_pods_are_never_victims(where: str) -> None:
    objs = _full_node(preemptable=None)
    for obj in objs:
        if obj["kind"] == "Pod":
            obj["metadata"].setdefault(where, {})["volcano.sh/preemptable"] = "false"
    objs += vcjob("high", replicas=1, min_member=1, priority="high-priority")
    run = simulate(objs, conf=e2e_conf(actions=ACTIONS))
    assert evicted(run) == []
    assert running(run, "low") == 2


def test_best_effort_preemptor_only_evicts_best_effort_pods() -> None:
    """A pod without requests that cannot get a pod slot may only take one from another pod
    without requests."""
    objs = [
        make_node("n1", cpu="4", pods="2"), *priority_classes(),
        *vcjob("low", replicas=2, min_member=1, priority="low-priority", running_on=["n1"]),
        *vcjob("high", replicas=1, min_member=1, priority="high-priority", cpu=None),
    ]
    run = simulate(objs, conf=e2e_conf(actions=ACTIONS))
    assert evicted(run) == []


def test_gang_that_cannot_be_pipelined_keeps_no_eviction() -> None:
    """The preemptor gang needs three 1-cpu slots; only two lower-priority pods exist, so its
    statement is discarded and nobody is evicted."""
    objs = [
        *_full_node(),
        make_node("n2", cpu="1"),
        *vcjob("mid", replicas=1, min_member=1, priority="high-priority", running_on=["n2"]),
        *vcjob("high", replicas=3, min_member=3, priority="high-priority"),
    ]
    run = simulate(objs, conf=e2e_conf(actions=ACTIONS))
    assert evicted(run) == []
    assert running(run, "low") == 2 and running(run, "high") == 0


def test_no_eviction_on_a_node_where_the_preemptor_still_does_not_fit() -> None:
    """n1 has one 1-cpu victim next to a 1-cpu high-priority pod; the preemptor needs 2 cpu,
    so n1 fails ValidateVictims and n2 is used instead; n1 keeps its pod."""
    objs = [
        make_node("n1", cpu="2"), make_node("n2", cpu="2"), *priority_classes(),
        *vcjob("low1", replicas=1, min_member=1, priority="low-priority", running_on=["n1"]),
        *vcjob("keep", replicas=1, min_member=1, priority="high-priority", running_on=["n1"]),
        *vcjob("low2", replicas=1, min_member=1, cpu="2", priority="low-priority",
               running_on=["n2"]),
        *vcjob("high", replicas=1, min_member=1, cpu="2", priority="high-priority"),
    ]
    run = simulate(objs, conf=e2e_conf(actions=ACTIONS))
    assert evicted(run) == ["low2-task-0"]
    assert run.node_of("high-task-0") == "n2"


def test_within_job_preemption_by_task_priority() -> None:
    """A starving job's pending high-priority task evicts its own job's lower task (the
    inside-a-job phase, committed per task). The job must be starving for gang too, i.e.
    below its minMember: with minMember 1 it would not preempt at all."""
    objs = [
        make_node("n1", cpu="1"), *priority_classes(),
        make_podgroup("job", min_member=2, priority_class="high-priority", phase="Running"),
        make_pod("job-low", cpu="1", group="job", node="n1", phase="Running", priority=1),
        make_pod("job-high", cpu="1", group="job", priority=50),
    ]
    run = simulate(objs, conf=e2e_conf(actions=ACTIONS), max_cycles=1)
    assert evicted(run) == ["job-low"]
    objs[-3]["spec"]["minMember"] = 1
    run = simulate(objs, conf=e2e_conf(actions=ACTIONS), max_cycles=1)
    assert evicted(run) == []


def test_nominated_node_that_passes_predicates_blocks_a_second_preemption() -> None:
    """A pod already nominated to a node its predicates accept waits for that node's victims
    to leave instead of preempting again (``taskEligibleToPreempt``)."""
    preemptor = vcjob("high", replicas=1, min_member=1, priority="high-priority")
    preemptor[1]["status"] = {"phase": "Pending", "nominatedNodeName": "n1"}
    run = simulate([*_full_node(), *preemptor], conf=e2e_conf(actions=ACTIONS), max_cycles=2)
    assert evicted(run) == []


def test_nominated_node_that_is_gone_blocks_preemption() -> None:
    preemptor = vcjob("high", replicas=1, min_member=1, priority="high-priority")
    preemptor[1]["status"] = {"phase": "Pending", "nominatedNodeName": "gone"}
    run = simulate([*_full_node(), *preemptor], conf=e2e_conf(actions=ACTIONS), max_cycles=2)
    assert evicted(run) == []


def test_gang_minimum_protects_victims_when_gang_preemptable_is_on() -> None:
    """With Volcano's built-in default tiers (gang's Preemptable on, drf's too), a victim at
    its minAvailable is not taken by tier 1, and drf in tier 2 decides by share."""
    conf = """
actions: "allocate, backfill, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""
    objs = [
        make_node("n1", cpu="2"), *priority_classes(),
        *vcjob("low", replicas=2, min_member=2, priority="low-priority", running_on=["n1"]),
        *vcjob("high", replicas=1, min_member=1, priority="high-priority"),
    ]
    run = simulate(objs, conf=conf)
    assert evicted(run) == []
    low_group = next(o for o in objs if o["kind"] == "PodGroup" and o["metadata"]["name"] == "low")
    low_group["spec"]["minMember"] = 1
    run = simulate(objs, conf=conf)
    assert len(evicted(run)) == 1
