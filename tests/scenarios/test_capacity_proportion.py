"""``capacity`` and ``proportion`` in one conf, as Volcano runs them.

Volcano's conf loader (``pkg/scheduler/util.go:61-81``, ``unmarshalSchedulerConf``) refuses
only drf with ``enableHierarchy`` beside ``proportion`` in one tier; the pair capacity +
proportion loads, and the session combines both plugins' hooks by each extension point's rule
(``framework/session_plugins.go``): ``Allocatable`` is an AND (405-422), ``JobEnqueueable`` a
tier vote where any reject wins (582-610), ``Reclaimable`` the tier's intersection (225-271),
``QueueOrderFn`` the first plugin with an opinion (775-799), ``Overused`` an OR that only
proportion answers (365-383).

The preempt cases are Volcano's ``TestTopologyAwarePreempt``
(``pkg/scheduler/actions/preempt/preempt_test.go:614-934``), whose tiers register both plugins
(capacity for queue order only). Its tiers switch on only the hooks they name (a flag left nil
is off in a Go test), so the conf here turns every other flag off.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.conf import PLUGIN_FLAGS, ConfError, parse_conf
from tests.builders import (
    make_node,
    make_pod,
    make_podgroup,
    make_priority_class,
    make_queue,
    simulate,
)
from tests.scenarios.preemption_helpers import evicted

Obj = dict[str, Any]

# preempt_test.go:868-929: the hooks each plugin of the test's one tier has switched on.
_ENABLED = {
    "conformance": ("enablePreemptable",),
    "gang": ("enablePreemptable", "enableJobPipelined", "enableJobStarving"),
    "priority": ("enableTaskOrder", "enableJobOrder", "enablePreemptable",
                 "enableJobPipelined", "enableJobStarving"),
    "proportion": ("enabledOverused", "enabledAllocatable", "enableQueueOrder",
                   "enablePredicate"),
    "predicates": ("enablePreemptable", "enablePredicate"),
    "capacity": ("enableQueueOrder",),
}


def _plugin(name: str) -> str:
    flags = ", ".join(f"{flag}: {str(flag in _ENABLED[name]).lower()}"
                      for flag in PLUGIN_FLAGS if flag != "enableHierarchy")
    return f"  - {{name: {name}, {flags}}}\n"


TOPOLOGY_CONF = (
    'actions: "preempt"\n'
    "tiers:\n- plugins:\n" + "".join(_plugin(name) for name in _ENABLED)
    + "configurations:\n- name: preempt\n"
    "  arguments: {enableTopologyAwarePreemption: true}\n"
)

PRIORITIES = [make_priority_class("high-priority", 100000),
               make_priority_class("low-priority", 10)]


def _pg(name: str, *, min_member: int, prio: str | None = None, queue: str = "q1",
        phase: str = "Inqueue") -> Obj:
    return make_podgroup(name, min_member=min_member, queue=queue, priority_class=prio,
                         phase=phase)


def _pod(name: str, group: str, *, cpu: str | None = "1", memory: str | None = "1G",
         node: str | None = None, preemptable: str | None = None, **kwargs: Any) -> Obj:
    pod = make_pod(name, cpu=cpu, memory=memory, group=group, node=node,
                   namespace="c1", **kwargs)
    if preemptable is not None:
        pod["metadata"]["labels"] = {"volcano.sh/preemptable": preemptable}
    return pod


def _c1(objs: list[Obj]) -> list[Obj]:
    for obj in objs:
        if obj["kind"] == "PodGroup":
            obj["metadata"]["namespace"] = "c1"
    return objs


def _case_idle() -> tuple[list[Obj], list[str]]:
    return _c1([
        _pg("pg1", min_member=3),
        _pod("preemptee1", "pg1", node="n1"), _pod("preemptee2", "pg1", node="n1"),
        _pod("preemptor1", "pg1"),
        make_node("n1", cpu="10", memory="10G", pods="10"), make_queue("q1"),
    ]), []


def _case_pipelined() -> tuple[list[Obj], list[str]]:
    return _c1([
        _pg("pg1", min_member=1), _pg("pg2", min_member=1),
        _pod("preemptee1", "pg1", node="n1"), _pod("preemptee2", "pg1", node="n1"),
        _pod("preemptee3", "pg2", node="n1"), _pod("preemptor2", "pg2"),
        make_node("n1", cpu="3", memory="3G", pods="10"), make_queue("q1"),
    ]), []


def _case_one_task() -> tuple[list[Obj], list[str]]:
    return _c1([
        _pg("pg1", min_member=1, prio="low-priority"),
        _pg("pg2", min_member=1, prio="high-priority"),
        _pod("preemptee1", "pg1", node="n1", preemptable="true"),
        _pod("preemptee2", "pg1", node="n1", preemptable="false"),
        _pod("preemptor1", "pg2"), _pod("preemptor2", "pg2"),
        make_node("n1", cpu="2", memory="2G", pods="10"), make_queue("q1"),
    ]), ["preemptee1"]


def _case_large_task() -> tuple[list[Obj], list[str]]:
    return _c1([
        _pg("pg1", min_member=1, prio="low-priority"),
        _pg("pg2", min_member=1, prio="high-priority"),
        _pod("preemptee1", "pg1", node="n1", preemptable="true"),
        _pod("preemptee2", "pg1", node="n1", preemptable="true"),
        _pod("preemptee3", "pg1", node="n1", preemptable="false"),
        _pod("preemptor1", "pg2", cpu="5", memory="5G"),
        make_node("n1", cpu="6", memory="6G", pods="10"), make_queue("q1"),
    ]), ["preemptee1", "preemptee2"]


def _case_same_queue(capability: str) -> tuple[list[Obj], list[str]]:
    """#3161: a queue capped at 4 cpu must preempt in the queue; at 6 it need not."""
    return _c1([
        _pg("pg1", min_member=0 if capability == "4" else 1, prio="low-priority"),
        _pg("pg2", min_member=1, prio="high-priority"),
        _pod("preemptee1", "pg1", cpu="3", memory="3G", node="n1", preemptable="true"),
        _pod("preemptor1", "pg2", cpu="3", memory="3G"),
        make_node("n1", cpu="12", memory="12G", pods="10"),
        make_queue("q1", capability={"cpu": capability, "memory": f"{capability}G"}),
    ]), ["preemptee1"] if capability == "4" else []


def _case_not_preemptable_or_higher() -> tuple[list[Obj], list[str]]:
    """#2232: neither a pod with preemptable=false nor one of higher priority is a victim."""
    return _c1([
        _pg("pg1", min_member=1, prio="low-priority"),
        _pg("pg2", min_member=1, prio="high-priority"),
        _pod("preemptee1", "pg1", node="n1", preemptable="false"),
        _pod("preemptee2", "pg1", node="n1", preemptable="true"),
        _pod("preemptee3", "pg1", node="n1", preemptable="true", priority=100000),
        _pod("preemptor1", "pg2"),
        make_node("n1", cpu="12", memory="12G", pods="10"),
        make_queue("q1", capability={"cpu": "3", "memory": "3G"}),
    ]), ["preemptee2"]


def best_effort_victim_case(preemptor_cpu: str | None) -> tuple[list[Obj], list[str]]:
    """#3335: the node holds one pod; a best-effort pod there is evicted for the preemptor,
    whether that asks for 3 cpu or nothing: only the ``pods`` dimension is short."""
    return _c1([
        _pg("pg1", min_member=0, prio="low-priority"),
        _pg("pg2", min_member=1, prio="high-priority"),
        _pod("preemptee1", "pg1", cpu=None, memory=None, node="n1", preemptable="true"),
        _pod("preemptor1", "pg2", cpu=preemptor_cpu,
             memory="3G" if preemptor_cpu else None),
        make_node("n1", cpu="12", memory="12G", pods="1"),
        make_queue("q1", capability={"cpu": "6", "memory": "6G"}),
    ]), ["preemptee1"]


def _case_preempt_never() -> tuple[list[Obj], list[str]]:
    """#3642: a preemptor whose preemptionPolicy is Never evicts nothing."""
    preemptor = _pod("preemptor1", "pg2")
    preemptor["spec"]["preemptionPolicy"] = "Never"
    return _c1([
        _pg("pg1", min_member=0, prio="low-priority"),
        _pg("pg2", min_member=1, prio="high-priority"),
        _pod("preemptee1", "pg1", node="n1", preemptable="true"), preemptor,
        make_node("n1", cpu="1", memory="1Gi", pods="1"), make_queue("q1"),
    ]), []


def _anti(labels: dict[str, str]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}}


def _case_anti_affinity() -> tuple[list[Obj], list[str]]:
    """Both victims would do for resources; only evicting preemptee2 lifts the anti-affinity
    conflict, so preemptee1 is reprieved."""
    preemptee2 = _pod("preemptee2", "pg1", node="n1", affinity=_anti({"test": "test"}))
    preemptee2["metadata"]["labels"] = {"volcano.sh/preemptable": "true", "test": "test"}
    preemptor = _pod("preemptor1", "pg3", affinity=_anti({"test": "test"}))
    preemptor["metadata"]["labels"] = {"test": "test"}
    return _c1([
        _pg("pg1", min_member=0, prio="low-priority"),
        _pg("pg2", min_member=0, prio="low-priority"),
        _pg("pg3", min_member=1, prio="high-priority"),
        _pod("preemptee1", "pg2", node="n1", preemptable="true"), preemptee2, preemptor,
        make_node("n1", cpu="2", memory="2Gi", pods="2",
                  labels={"kubernetes.io/hostname": "n1"}),
        make_queue("q1", capability={"cpu": "2", "memory": "2G"}),
    ]), ["preemptee2"]


def _queue_with_deserved(name: str, priority: int) -> Obj:
    queue = make_queue(name, priority=priority, capability={"cpu": "1", "memory": "1G"})
    queue["spec"]["deserved"] = {"cpu": "1", "memory": "1G"}
    return queue


def _case_priority_queues() -> tuple[list[Obj], list[str]]:
    preemptor = _pod("preemptor1", "pg2")
    preemptor["spec"]["preemptionPolicy"] = "PreemptLowerPriority"
    return _c1([
        _pg("pg3", min_member=1, prio="high-priority", queue="q2", phase="Running"),
        _pg("pg1", min_member=0, prio="low-priority", phase="Running"),
        _pg("pg2", min_member=1, prio="high-priority"),
        _pod("preemptee2", "pg3", node="n1", preemptable="true"),
        _pod("preemptee1", "pg1", node="n1", preemptable="true"), preemptor,
        make_node("n1", cpu="2", memory="2Gi", pods="2"),
        _queue_with_deserved("q1", 1), _queue_with_deserved("q2", 10),
    ]), ["preemptee1"]


CASES = {
    "enough-idle": _case_idle,
    "pipelined": _case_pipelined,
    "one-task-of-another-job": _case_one_task,
    "enough-for-a-large-task": _case_large_task,
    "same-queue-3161": lambda: _case_same_queue("4"),
    "same-queue-room-3161": lambda: _case_same_queue("6"),
    "not-preemptable-or-higher-2232": _case_not_preemptable_or_higher,
    "best-effort-victim-3335": lambda: best_effort_victim_case("3"),
    "best-effort-both-3335": lambda: best_effort_victim_case(None),
    "preemption-policy-never-3642": _case_preempt_never,
    "pod-anti-affinity": _case_anti_affinity,
    "priority-queues": _case_priority_queues,
}


@pytest.mark.parametrize("case", list(CASES))
def test_topology_aware_preempt_with_capacity_and_proportion(case: str) -> None:
    """``TestTopologyAwarePreempt`` (preempt_test.go:614-934): one preempt session, the
    evictions its ``ExpectEvicted`` names (none where it expects ``ExpectEvictNum: 0``)."""
    objs, expected = CASES[case]()
    run = simulate([*PRIORITIES, *objs], conf=TOPOLOGY_CONF, max_cycles=1)
    assert evicted(run) == sorted(expected)


def test_the_pair_loads_with_one_warning() -> None:
    """util.go:61-81 loads the pair; Lahar warns once that it is unusual."""
    conf = parse_conf("tiers: [{plugins: [{name: capacity}]}, {plugins: [{name: proportion}]}]",
                      source="q.conf")
    assert [p.name for tier in conf.tiers for p in tier] == ["capacity", "proportion"]
    unusual = [w for w in conf.warnings if "capacity and proportion" in w]
    assert len(unusual) == 1 and "unusual" in unusual[0]


def test_hierarchical_drf_beside_proportion_is_still_refused() -> None:
    """util.go:78-80: drf with enableHierarchy and proportion in one tier conflict."""
    with pytest.raises(ConfError, match="drf with enableHierarchy"):
        parse_conf("tiers: [{plugins: [{name: drf, enableHierarchy: true}, {name: proportion}]}]")


BOTH = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: %s}, {name: %s}, {name: predicates}]
"""


def _two_queues() -> list[Obj]:
    """q1 deserves 1 cpu (capacity) with weight 1; q2 weight 3 and no deserved. 4 cpu."""
    q1 = make_queue("q1", weight=1)
    q1["spec"]["deserved"] = {"cpu": "1"}
    q2 = make_queue("q2", weight=3)
    objs: list[Obj] = [make_node("n1", cpu="4"), q1, q2]
    for queue in ("q1", "q2"):
        for i in range(4):
            objs.append(make_podgroup(f"{queue}-j{i}", queue=queue))
            objs.append(make_pod(f"{queue}-j{i}-0", cpu="1", group=f"{queue}-j{i}"))
    return objs


@pytest.mark.parametrize("order", [("capacity", "proportion"), ("proportion", "capacity")])
def test_allocatable_needs_both_plugins(order: tuple[str, str]) -> None:
    """Allocatable is an AND over the tier (session_plugins.go:405-422): proportion's deserved
    share (weights 1:3 of 4 cpu → q1 1, q2 3) and capacity's real capability (no capability:
    the whole cluster) both hold, so q1 gets 1 cpu and q2 3, whichever comes first."""
    run = simulate(_two_queues(), conf=BOTH % order, max_cycles=1)
    bound = sorted(run.binds())
    assert [p for p in bound if p.startswith("q1-")] == ["q1-j0-0"]
    assert len([p for p in bound if p.startswith("q2-")]) == 3
