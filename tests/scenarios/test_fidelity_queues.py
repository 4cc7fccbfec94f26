"""Queue quotas and admission as Volcano's proportion and overcommit plugins compute them."""

from typing import Any

import pytest

from tests.builders import make_node, make_pod, make_podgroup, make_queue, simulate

Obj = dict[str, Any]


def _queue(name: str, *, guarantee: dict[str, str] | None = None, **kwargs: Any) -> Obj:
    queue = make_queue(name, **kwargs)
    if guarantee is not None:
        queue["spec"]["guarantee"] = {"resource": dict(guarantee)}
    return queue


def _bound(run_binds: dict[str, str], prefix: str) -> int:
    return sum(1 for name in run_binds if name.startswith(prefix))


def _gated(pod: Obj, gate: str) -> Obj:
    pod["spec"]["schedulingGates"] = [{"name": gate}]
    return pod


def test_capability_naming_only_cpu_leaves_memory_unlimited() -> None:
    """Volcano ``proportion.go`` OnSessionOpen: a capability without memory gets
    ``MilliCPU/Memory <= 0 → math.MaxFloat64`` and is applied with
    ``MinDimensionResource(capability, api.Infinity)``, so only cpu is capped."""
    objs = [
        make_node("n1", cpu="8", memory="16Gi"),
        make_queue("q", capability={"cpu": "4"}),
        make_podgroup("job", min_member=1, queue="q"),
        *[make_pod(f"job-t-{i}", group="job", cpu="1", memory="1Gi") for i in range(6)],
    ]
    run = simulate(objs)
    # Memory no longer counts as a zero quota, and the cpu cap still bites at 4.
    assert _bound(run.binds(), "job-") == 4
    waiting = next(f"job-t-{i}" for i in range(6) if f"job-t-{i}" not in run.binds())
    assert f"queue q has no room for task {waiting} within its deserved share" \
        in run.reason(waiting)


def test_capability_naming_only_a_scalar_keeps_cpu_and_memory_unlimited() -> None:
    """Volcano ``proportion.go`` OnSessionOpen (capability defaults) with an extended
    resource: the named scalar is capped, cpu and memory are not."""
    objs = [
        make_node("n1", cpu="8", memory="16Gi", extra={"example.com/fpga": "4"}),
        make_queue("q", capability={"example.com/fpga": "1"}),
        make_podgroup("job", min_member=1, queue="q"),
        *[make_pod(f"job-t-{i}", group="job", cpu="1", memory="1Gi") for i in range(3)],
    ]
    run = simulate(objs)
    assert _bound(run.binds(), "job-") == 3


def test_guarantees_summing_past_the_cluster_keep_each_queue_its_own_guarantee() -> None:
    """Volcano ``proportion.go`` OnSessionOpen: ``realCapability =
    api.ExceededPart(totalResource, totalGuarantee).Add(guarantee)`` floors the first part at
    0, so a queue can always admit up to its own guarantee even when the guarantees of all
    queues add up to more than the cluster."""
    objs = [
        make_node("n1", cpu="4", memory="8Gi"),
        _queue("qa", guarantee={"cpu": "4"}),
        _queue("qb", guarantee={"cpu": "4"}),
        make_podgroup("a", min_member=2, queue="qa", min_resources={"cpu": "2"}),
        make_pod("a-t-0", group="a", cpu="1"),
        make_pod("a-t-1", group="a", cpu="1"),
    ]
    run = simulate(objs)
    assert run.phase("a") == "Running"
    assert _bound(run.binds(), "a-") == 2


def test_job_without_min_resources_counts_all_its_allocation_as_elastic() -> None:
    """Volcano ``JobInfo.GetElasticResources``: ``ExceededPart(Allocated, GetMinResources())``
    with an empty minimum when the PodGroup sets none, subtracted in proportion's
    JobEnqueueableFn (``minReq + allocated + inqueue − elastic ≤ realCapability``)."""
    objs = [
        make_node("n1", cpu="8", memory="16Gi"),
        make_queue("q", capability={"cpu": "4"}),
        make_podgroup("running", min_member=1, queue="q", phase="Running"),
        *[
            make_pod(f"running-t-{i}", group="running", cpu="1", node="n1", phase="Running")
            for i in range(4)
        ],
        make_podgroup("next", min_member=1, queue="q", min_resources={"cpu": "2"}),
        make_pod("next-t-0", group="next", cpu="2"),
    ]
    run = simulate(objs, max_cycles=1)
    # Admitted (it may reclaim or wait for the elastic job); the queue is full for now.
    assert run.phase("next") == "Inqueue"
    assert "next-t-0" not in run.binds()


def test_inqueue_job_reserves_only_what_it_has_not_yet_allocated() -> None:
    """Volcano ``proportion.go`` OnSessionOpen: an Inqueue job adds
    ``util.GetInqueueResource(job, job.Allocated)`` (minResources less its allocation) to the
    queue's inqueue budget, so its bound tasks are not counted twice."""
    objs = [
        make_node("n1", cpu="8", memory="16Gi"),
        make_queue("q", capability={"cpu": "6"}),
        make_podgroup("first", min_member=4, queue="q", min_resources={"cpu": "4"},
                      phase="Inqueue"),
        *[make_pod(f"first-t-{i}", group="first", cpu="1", node="n1") for i in range(2)],
        *[make_pod(f"first-t-{i}", group="first", cpu="1") for i in range(2, 4)],
        make_podgroup("second", min_member=1, queue="q", min_resources={"cpu": "2"}),
        make_pod("second-t-0", group="second", cpu="2"),
    ]
    run = simulate(objs, max_cycles=1)
    # 2 (its minimum) + 2 (allocated) + 2 (first's unallocated minimum) fits in 6.
    assert run.phase("second") == "Inqueue"


@pytest.mark.parametrize(
    ("gate", "admitted"),
    [("example.com/wait-for-data", True), ("scheduling.volcano.sh/queue-allocation-gate", False)],
    ids=["external-gate-deducted", "volcano-gate-still-reserved"],
)
def test_scheduling_gated_pods_reserve_nothing_in_the_queue(gate: str, admitted: bool) -> None:
    """Volcano ``JobInfo.DeductSchGatedResources`` / ``GetSchGatedPodResources``: the requests
    of gated pods come off a job's inqueue reservation (floored at 0), except pods held only
    by Volcano's own ``queue-allocation-gate``, which still count."""
    objs = [
        make_node("n1", cpu="8", memory="16Gi"),
        make_queue("q", capability={"cpu": "4"}),
        make_podgroup("gated", min_member=2, queue="q", min_resources={"cpu": "4"},
                      phase="Inqueue"),
        make_pod("gated-t-0", group="gated", cpu="1"),
        make_pod("gated-t-1", group="gated", cpu="1"),
        _gated(make_pod("gated-t-2", group="gated", cpu="1"), gate),
        _gated(make_pod("gated-t-3", group="gated", cpu="1"), gate),
        make_podgroup("other", min_member=1, queue="q", min_resources={"cpu": "2"}),
        make_pod("other-t-0", group="other", cpu="2"),
    ]
    run = simulate(objs, max_cycles=1)
    assert run.phase("other") == ("Inqueue" if admitted else "Pending")


def test_enqueue_rejections_name_the_short_resource() -> None:
    """Volcano ``proportion.go`` JobEnqueueableFn records ``util.FormatResourceNames("queue
    resource quota insufficient", "insufficient", names)``."""
    objs = [
        make_node("n1", cpu="8", memory="16Gi"),
        make_queue("q", capability={"cpu": "2"}),
        make_podgroup("big", min_member=1, queue="q", min_resources={"cpu": "3"}),
        make_pod("big-t-0", group="big", cpu="3"),
    ]
    run = simulate(objs, max_cycles=1)
    assert run.phase("big") == "Pending"
    messages = [e["message"] for e in run.events("Unschedulable")]
    assert "queue resource quota insufficient: insufficient cpu" in messages


def test_overcommit_reserves_the_whole_minimum_of_an_inqueue_job() -> None:
    """Volcano ``overcommit.go`` OnSessionOpen: an Inqueue job adds
    ``job.DeductSchGatedResources(job.GetMinResources())`` — its whole minimum, unlike
    proportion — while its bound tasks also count in the nodes' used resources."""
    objs = [
        make_node("n1", cpu="10", memory="32Gi"),
        make_podgroup("first", min_member=8, min_resources={"cpu": "8"}, phase="Inqueue"),
        *[make_pod(f"first-t-{i}", group="first", cpu="1", node="n1") for i in range(4)],
        *[make_pod(f"first-t-{i}", group="first", cpu="1") for i in range(4, 8)],
        make_podgroup("second", min_member=1, min_resources={"cpu": "1"}),
        make_pod("second-t-0", group="second", cpu="1"),
    ]
    run = simulate(objs, max_cycles=1)
    # idle = 10 × 1.2 − 4 used = 8; 8 (first, whole) + 1 > 8. Proportion alone would admit.
    assert run.phase("second") == "Pending"
    messages = [e["message"] for e in run.events("Unschedulable")]
    assert "resource in cluster is overused: overused cpu" in messages
