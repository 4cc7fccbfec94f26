"""Volcano's ``test/e2e/schedulingaction/preempt.go`` cases, one scenario each.

Cluster: two nodes of 2 cpu, so the e2e ``ClusterSize(ctx, 1cpu)`` is 4 slots. The conf is
Volcano's CI conf (``tests/data/confs/volcano-scheduler-ci.conf``), with the changes each e2e
case makes to it. Matched against ``actions/preempt/preempt.go`` (``Execute``, ``preempt``,
``normalPreempt``, ``taskEligibleToPreempt``).
"""

from __future__ import annotations

from tests.builders import make_node, make_pod, make_podgroup, simulate
from tests.scenarios.preemption_helpers import (
    e2e_conf,
    evicted,
    priority_classes,
    queues,
    running,
    vcjob,
)

NODES = ["n1", "n2"]
SLOTS = 4
NO_ENQUEUE = "allocate, backfill, reclaim, preempt"


def cluster() -> list[dict]:
    return [make_node(name, cpu="2", memory="8Gi") for name in NODES] + priority_classes()


def test_high_priority_job_without_preemption_when_resource_is_enough() -> None:
    """Enough idle room: the preemptor is placed by allocate, nobody is evicted."""
    objs = [
        *cluster(),
        *vcjob("preemptee-0", replicas=1, min_member=1, priority="low-priority",
               running_on=["n1"]),
        *vcjob("preemptor-0", replicas=1, min_member=1, priority="high-priority"),
    ]
    run = simulate(objs, conf=e2e_conf())
    assert running(run, "preemptee-0") == 1
    assert running(run, "preemptor-0") == 1
    assert evicted(run) == []


def test_preemption_when_idle_is_not_enough_but_preemptee_is() -> None:
    """Full cluster of low-priority pods; a high-priority gang of min rep/2 evicts exactly
    rep/2 of them (JobStarving turns false once the gang minimum is pipelined)."""
    objs = [
        *cluster(),
        *vcjob("preemptee-1", replicas=SLOTS, min_member=1, priority="low-priority",
               running_on=NODES),
        *vcjob("preemptor-1", replicas=SLOTS, min_member=SLOTS // 2, priority="high-priority"),
    ]
    run = simulate(objs, conf=e2e_conf(actions=NO_ENQUEUE))
    assert running(run, "preemptor-1") == SLOTS // 2
    assert running(run, "preemptee-1") == SLOTS // 2
    assert len(evicted(run)) == SLOTS // 2
    assert all(name.startswith("preemptee-1-") for name in evicted(run))


def test_no_preemption_when_podgroup_is_pending_for_insufficient_resource() -> None:
    """A PodGroup whose minResources (30 cpu) the cluster cannot admit stays Pending, and a
    Pending job never preempts."""
    objs = [
        *cluster(),
        make_podgroup("pending-pg", min_member=1, min_resources={"cpu": "30"}),
        *vcjob("preemptee-2", replicas=SLOTS, min_member=1, priority="low-priority",
               running_on=NODES, preemptable=None),
        make_pod("preemptor-pod", cpu="1", group="pending-pg", priority=100,
                 priority_class="high-priority"),
    ]
    run = simulate(objs, conf=e2e_conf())
    assert run.phase("pending-pg") == "Pending"
    assert running(run, "preemptee-2") == SLOTS
    assert evicted(run) == []


def test_preemption_only_works_in_the_same_queue() -> None:
    """Two queues each half full; the high-priority job of q1 evicts q1's job only."""
    half = SLOTS // 2
    objs = [
        *cluster(),
        *queues("q1-preemption", "q2-reference"),
        *vcjob("j1-q1", replicas=half, min_member=half, priority="low-priority",
               queue="q1-preemption", running_on=["n1"]),
        *vcjob("j2-q2", replicas=half, min_member=half, priority="low-priority",
               queue="q2-reference", running_on=["n2"]),
        *vcjob("j3-q1", replicas=SLOTS, min_member=half, priority="high-priority",
               queue="q1-preemption"),
    ]
    run = simulate(objs, conf=e2e_conf())
    assert running(run, "j3-q1") == half
    assert running(run, "j1-q1") == 0
    assert running(run, "j2-q2") == half
    assert all(name.startswith("j1-q1-") for name in evicted(run))


def test_no_preemption_when_idle_plus_preemptees_is_not_enough() -> None:
    """q1's job needs all 4 slots as a gang, but only q1's one low-priority pod plus the idle
    slot are there: nothing is evicted (reclaim may not touch q2 while q2 is within its
    deserved share)."""
    half = SLOTS // 2
    objs = [
        *cluster(),
        *queues("q1-preemption", "q2-reference"),
        *vcjob("j1-q1", replicas=1, min_member=1, priority="low-priority",
               queue="q1-preemption", running_on=["n1"]),
        *vcjob("j2-q2", replicas=half, min_member=half, priority="low-priority",
               queue="q2-reference", running_on=["n2"]),
        *vcjob("j3-q1", replicas=SLOTS, min_member=SLOTS, priority="high-priority",
               queue="q1-preemption"),
    ]
    run = simulate(objs, conf=e2e_conf())
    assert running(run, "j3-q1") == 0
    assert running(run, "j1-q1") == 1
    assert running(run, "j2-q2") == half
    assert evicted(run) == []


def test_multi_preemptor_jobs_in_different_priority() -> None:
    """Volcano skips this e2e case (issue 911). A high-priority gang that needs the whole
    cluster evicts both the middle- and the low-priority job, lowest job first on each node;
    gang's Preemptable is off in the CI conf, so gang minimums do not protect them."""
    half = SLOTS // 2
    objs = [
        *cluster(),
        *queues("q1-preemption"),
        *vcjob("low-priority-job", replicas=half, min_member=1, priority="low-priority",
               queue="q1-preemption", running_on=NODES),
        *vcjob("middle-priority-job", replicas=half, min_member=half,
               priority="middle-priority", queue="q1-preemption", running_on=NODES),
        *vcjob("high-priority-job", replicas=SLOTS, min_member=SLOTS,
               priority="high-priority", queue="q1-preemption"),
    ]
    run = simulate(objs, conf=e2e_conf())
    assert running(run, "high-priority-job") == SLOTS
    assert running(run, "low-priority-job") == 0
    assert running(run, "middle-priority-job") == 0


def test_gated_jobs_do_not_preempt() -> None:
    """Pods held by a scheduling gate never preempt, however high their priority."""
    objs = [
        *cluster(),
        *vcjob("preemptee-1", replicas=SLOTS, min_member=1, priority="low-priority",
               running_on=NODES),
        *vcjob("preemptor-1", replicas=SLOTS, min_member=SLOTS // 2, priority="high-priority"),
    ]
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"].startswith("preemptor-1-"):
            obj["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    run = simulate(objs, conf=e2e_conf(actions=NO_ENQUEUE))
    assert running(run, "preemptee-1") == SLOTS
    assert running(run, "preemptor-1") == 0
    assert evicted(run) == []


def _anti_affinity(labels: dict[str, str]) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}}


def test_preempt_low_priority_pod_with_anti_affinity_constraint() -> None:
    """Topology-aware preemption: the preemptors are anti-affine to the blockers, so exactly
    the blockers go (the bystanders are reprieved) and one blocker survives."""
    nodes = [make_node(name, cpu="3", memory="8Gi",
                       labels={"kubernetes.io/hostname": name}) for name in NODES]
    blocker = {"app": "blocker"}
    objs = [
        *nodes, *priority_classes(),
        *vcjob("blocker-job", replicas=2, min_member=1, priority="middle-priority",
               running_on=NODES, affinity=_anti_affinity(blocker)),
        *vcjob("bystander-job", replicas=2, min_member=1, priority="low-priority",
               running_on=NODES),
        *vcjob("high-priority-job", replicas=1, min_member=1, cpu="2",
               priority="high-priority", affinity=_anti_affinity(blocker)),
    ]
    for obj in objs:
        name = obj["metadata"]["name"]
        if obj["kind"] == "Pod" and name.startswith("blocker-job"):
            obj["metadata"].setdefault("labels", {}).update(blocker)
    conf = e2e_conf(actions=NO_ENQUEUE, extra=(
        "configurations:\n- name: preempt\n  arguments: {enableTopologyAwarePreemption: true}\n"
    ))
    run = simulate(objs, conf=conf)
    assert running(run, "high-priority-job") == 1
    assert running(run, "bystander-job") == 2
    assert running(run, "blocker-job") == 1


def test_preemption_counts_attempts_and_victims_in_volcanos_metrics() -> None:
    """``volcano_total_preemption_attempts`` rises once per node the eviction loop ran on and
    ``volcano_pod_preemption_victims`` shows the last node's victim count (Volcano's
    ``RegisterPreemptionAttempts`` and ``UpdatePreemptionVictimsCount`` in ``preempt.go``)."""
    from scheduler import metrics

    before = metrics.PREEMPTION_ATTEMPTS._value.get()
    objs = [
        *cluster(),
        *vcjob("preemptee-m", replicas=SLOTS, min_member=1, priority="low-priority",
               running_on=NODES),
        *vcjob("preemptor-m", replicas=1, min_member=1, priority="high-priority"),
    ]
    run = simulate(objs, conf=e2e_conf(actions=NO_ENQUEUE))
    assert len(evicted(run)) == 1
    assert metrics.PREEMPTION_ATTEMPTS._value.get() - before >= 1
    assert metrics.PREEMPTION_VICTIMS._value.get() >= 1
