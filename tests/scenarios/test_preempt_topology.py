"""Topology-aware preemption (``enableTopologyAwarePreemption``) against normal preemption.

Matched against ``actions/preempt/preempt.go``: ``SelectVictimsOnNode`` (evict lowest first
until the preemptor fits, then reprieve highest first), ``pickOneNodeForPreemption`` (lowest
highest victim priority, lowest priority sum, fewest victims, latest start) and
``calculateNumCandidates``.
"""

from __future__ import annotations

from tests.builders import make_node, make_pod, make_podgroup, make_priority_class, simulate
from tests.scenarios.preemption_helpers import e2e_conf, evicted

ACTIONS = "allocate, backfill, preempt"


def _topology(**arguments: object) -> str:
    args = {"enableTopologyAwarePreemption": True, **arguments}
    body = ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}"
                     for k, v in args.items())
    return e2e_conf(actions=ACTIONS,
                    extra=f"configurations:\n- name: preempt\n  arguments: {{{body}}}\n")


def _job(name: str, *, priority: int, cpu: str, node: str | None) -> list[dict]:
    return [
        make_priority_class(f"p{priority}", priority),
        make_podgroup(name, min_member=1, priority_class=f"p{priority}",
                      phase="Running" if node else None),
        make_pod(f"{name}-0", cpu=cpu, group=name, node=node, priority=priority,
                 priority_class=f"p{priority}"),
    ]


def _reprieve_cluster() -> list[dict]:
    """One 4-cpu node: 1 cpu of priority 1, 2 cpu of priority 2, 1 cpu of priority 3; the
    preemptor (priority 10) needs 2 cpu."""
    return [
        make_node("n1", cpu="4"),
        *_job("p1", priority=1, cpu="1", node="n1"),
        *_job("p2", priority=2, cpu="2", node="n1"),
        *_job("p3", priority=3, cpu="1", node="n1"),
        *_job("hi", priority=10, cpu="2", node=None),
    ]


def test_normal_preemption_evicts_lowest_first_until_it_fits() -> None:
    run = simulate(_reprieve_cluster(), conf=e2e_conf(actions=ACTIONS))
    assert run.node_of("hi-0") == "n1"
    assert evicted(run) == ["p1-0", "p2-0"]


def test_topology_aware_preemption_reprieves_victims_it_does_not_need() -> None:
    run = simulate(_reprieve_cluster(), conf=_topology())
    assert run.node_of("hi-0") == "n1"
    assert evicted(run) == ["p2-0"]


def test_topology_aware_preemption_picks_the_node_with_the_lowest_victims() -> None:
    objs = [
        make_node("n1", cpu="2"), make_node("n2", cpu="2"), make_node("n3", cpu="2"),
        *_job("five", priority=5, cpu="2", node="n1"),
        *_job("three", priority=3, cpu="2", node="n2"),
        *_job("four", priority=4, cpu="2", node="n3"),
        *_job("hi", priority=10, cpu="2", node=None),
    ]
    run = simulate(objs, conf=_topology(minCandidateNodesAbsolute=100))
    assert evicted(run) == ["three-0"]
    assert run.node_of("hi-0") == "n2"


def test_fewest_victims_break_a_priority_tie() -> None:
    objs = [
        make_node("n1", cpu="2"), make_node("n2", cpu="2"),
        *_job("a", priority=3, cpu="1", node="n1"),
        *_job("b", priority=3, cpu="1", node="n1"),
        *_job("c", priority=3, cpu="2", node="n2"),
        *_job("hi", priority=10, cpu="2", node=None),
    ]
    run = simulate(objs, conf=_topology(minCandidateNodesAbsolute=100))
    # n1 sums 2 × (3 + 2^31), n2 only once: the lower sum wins before the count is asked
    assert evicted(run) == ["c-0"]
    assert run.node_of("hi-0") == "n2"


def test_arguments_written_as_strings_as_volcano_e2e_does() -> None:
    """Volcano's e2e suite writes ``enableTopologyAwarePreemption: "true"``; ``GetBool``
    (``framework/arguments.go``) accepts only a YAML boolean, so it logs the string and keeps
    the default (no topology-aware preemption), and so do we, with a warning."""
    conf = e2e_conf(actions=ACTIONS, extra=(
        "configurations:\n- name: preempt\n"
        "  arguments: {enableTopologyAwarePreemption: \"true\", minCandidateNodesAbsolute: x}\n"
    ))
    run = simulate(_reprieve_cluster(), conf=conf)
    assert evicted(run) == ["p1-0", "p2-0"]
