"""Gangs, priority and queue weights on a real (or bare) API server."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from tests.e2e.conftest import Case
from tests.e2e.kube import VOLCANO, condition, eventually, raw, short_id

ROOT = Path(__file__).resolve().parents[2]


def test_gang_that_fits_is_bound_whole_and_runs(case: Case) -> None:
    (node,) = case.add_nodes(1, units=4)
    pods = case.job("fits", pods=3)
    eventually(lambda: len(case.bound(pods)) == 3, what="all three pods bound")
    assert {case.node_of(pod) for pod in pods} == {node}
    for pod in pods:
        scheduled = eventually(lambda pod=pod: case.kube.events(  # type: ignore[misc]
            case.namespace, name=pod, reason="Scheduled"), what=f"Scheduled event of {pod}")
        assert scheduled[0]["message"] == f"Successfully assigned {case.namespace}/{pod} to {node}"
    eventually(lambda: (case.kube.podgroup(case.namespace, "fits").get("status") or {})
               .get("phase") == "Running", what="PodGroup Running")


def test_gang_that_does_not_fit_binds_nothing_and_says_why(case: Case) -> None:
    case.add_nodes(1, units=4)
    pods = case.job("too-big", pods=3, units=2)  # 6 units asked of a 4-unit node

    def unschedulable() -> bool:
        return all(condition(case.kube.pod(case.namespace, pod), "PodScheduled")
                   .get("status") == "False" for pod in pods)

    eventually(unschedulable, what="PodScheduled=False on every pod")
    for pod in pods:
        found = eventually(lambda pod=pod: case.kube.events(  # type: ignore[misc]
            case.namespace, name=pod, reason="FailedScheduling"), what=f"event on {pod}")
        assert found[0]["type"] == "Warning"
        assert condition(case.kube.pod(case.namespace, pod), "PodScheduled")["reason"] in (
            "Unschedulable", "Schedulable")
    status = eventually(lambda: case.kube.podgroup(case.namespace, "too-big").get("status"),
                        what="PodGroup status")
    assert status.get("phase") in ("Pending", "Inqueue")
    eventually(lambda: any(c.get("type") == "Unschedulable" for c in (
        case.kube.podgroup(case.namespace, "too-big").get("status") or {}).get("conditions")
        or []), what="PodGroup Unschedulable condition")
    eventually(lambda: case.kube.events(case.namespace, name="too-big", reason="Unschedulable"),
               what="PodGroup Unschedulable event")
    assert case.bound(pods) == []  # all or nothing


def test_higher_priority_job_is_placed_first(case: Case) -> None:
    high, low = f"lahar-e2e-high-{short_id()}", f"lahar-e2e-low-{short_id()}"
    for name, value in ((high, 1000), (low, 10)):
        raw(case.kube.scheduling.create_priority_class,
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name}, "value": value})
        case.cleanups.append(lambda name=name: raw(case.kube.scheduling.delete_priority_class,
                                                   name))
    # Both jobs wait for a node that does not exist yet, so one cycle sees both.
    low_pods = case.job("low", pods=1, units=3, priority_class=low)
    high_pods = case.job("high", pods=1, units=3, priority_class=high)
    eventually(lambda: condition(case.kube.pod(case.namespace, low_pods[0]), "PodScheduled"),
               what="the jobs were looked at")
    case.add_nodes(1, units=4)
    eventually(lambda: case.bound(high_pods), what="high-priority pod bound")
    time.sleep(1.0)  # a few cycles later the low one still waits
    assert case.bound(low_pods) == []


def test_two_queues_share_the_cluster_by_weight(own_case: Case) -> None:
    case = own_case
    if not case.settings.fake_nodes:
        import pytest

        pytest.skip("needs nodes of known capacity (LAHAR_E2E_FAKE_NODES=1)")
    light, heavy = f"lahar-e2e-light-{case.case_id}", f"lahar-e2e-heavy-{case.case_id}"
    for name, weight in ((light, 1), (heavy, 3)):
        case.kube.create_queue(name, weight=weight)
        case.cleanups.append(lambda name=name: case.kube.delete_queue(name))
    pods: dict[str, list[str]] = {light: [], heavy: []}
    for queue in (light, heavy):
        for i in range(8):
            pods[queue] += case.job(f"{queue}-{i}", pods=1, queue=queue)
    case.add_nodes(1, units=8)
    scheduler = case.start_scheduler()
    scheduler.wait_serving()
    eventually(lambda: len(case.bound(pods[light] + pods[heavy])) >= 8, what="node filled")
    bound = Counter({queue: len(case.bound(names)) for queue, names in pods.items()})
    assert bound == Counter({light: 2, heavy: 6})
    # The status is written every cycle, so an early read may still show the queue empty.
    eventually(lambda: ((raw(case.kube.custom.get_cluster_custom_object, *VOLCANO, "queues",
                              heavy).get("status") or {}).get("allocated") or {}).get("cpu")
               in ("6", "6000m"), what="queue status.allocated of 6 cpu")


def test_a_cyclic_queue_stops_only_its_own_jobs(own_case: Case) -> None:
    """Two Queues naming each other as parent (the CRD accepts it) under ``capacity`` with
    ``enableHierarchy``: their jobs wait with a condition naming the cycle, and a job of the
    default queue is bound as if they were absent."""
    case = own_case
    qx, qy = f"lahar-e2e-qx-{case.case_id}", f"lahar-e2e-qy-{case.case_id}"
    for name, parent in ((qx, qy), (qy, qx)):
        raw(case.kube.custom.create_cluster_custom_object, *VOLCANO, "queues",
            {"apiVersion": "/".join(VOLCANO), "kind": "Queue", "metadata": {"name": name},
             "spec": {"weight": 1, "parent": parent}})
        case.cleanups.append(lambda name=name: case.kube.delete_queue(name))
    stuck = case.job("in-cycle", pods=1, queue=qx)
    free = case.job("free", pods=1)
    case.add_nodes(1, units=4)
    conf = (ROOT / "conf" / "capacity-hierarchy.conf").read_text()
    case.start_scheduler(conf=conf).wait_serving()
    eventually(lambda: case.bound(free), what="the default queue's pod bound")
    reason = eventually(lambda: condition(case.kube.pod(case.namespace, stuck[0]),
                                          "PodScheduled").get("message"),
                        what="the cyclic queue's pod told why")
    assert "cycle" in reason and qx in reason
    assert case.bound(stuck) == []


def test_schedule_on_arrival_binds_new_pods_without_waiting_the_period(own_case: Case) -> None:
    """With a 30 s period and ``--schedule-on-arrival=100ms``, pods created one after another,
    each just after the last was bound (so just after a cycle), are bound within seconds: by
    default each would wait out the period (Volcano's ``wait.Until``; test_kube_run_arrival)."""
    case = own_case
    case.add_nodes(1, units=4)
    scheduler = case.start_scheduler(extra_args=("--schedule-period=30s",
                                                 "--schedule-on-arrival=100ms"))
    scheduler.wait_serving()
    eventually(lambda: scheduler.cycles() >= 1, what="the first cycle")
    for name, group in (("plain-1", ""), ("gang", "gang"), ("plain-2", "")):
        if group:
            pods = case.job(group, pods=2)
        else:
            case.pod(name, group="")
            pods = [name]
        eventually(lambda pods=pods: case.bound(pods) == pods,  # type: ignore[misc]
                   timeout=15.0, what=f"{name} bound")
    assert scheduler.cycles() < 12, scheduler.cycles()  # woken by arrivals, not spinning
