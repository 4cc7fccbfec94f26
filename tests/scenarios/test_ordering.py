"""Priority, queue weights, binpack versus spreading, pipelining, admission."""

import pytest

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from tests.builders import (
    BINPACK_CONF,
    conf_of,
    gang,
    make_node,
    make_pod,
    make_podgroup,
    make_priority_class,
    make_queue,
    simulate,
)


def test_higher_priority_pod_wins_the_last_slot() -> None:
    objs = [
        make_node("n1", cpu="2"),
        make_priority_class("high", 1000),
        make_priority_class("low", 1),
        make_pod("low", cpu="2", priority_class="low"),
        make_pod("high", cpu="2", priority_class="high"),
    ]
    run = simulate(objs)
    assert run.binds() == {"high": "n1"}
    assert run.reason("low") == "0/1 nodes are unavailable: 1 Insufficient cpu."


def test_task_priority_orders_tasks_inside_a_job() -> None:
    objs = [
        make_node("n1", cpu="1"),
        make_podgroup("job", min_member=1),
        make_pod("job-a", group="job", priority=1),
        make_pod("job-b", group="job", priority=50),
    ]
    run = simulate(objs)
    assert run.binds() == {"job-b": "n1"}


def test_global_default_priority_class_applies_to_jobs() -> None:
    objs = [
        make_node("n1", cpu="1"),
        make_priority_class("normal", 100, global_default=True),
        make_priority_class("urgent", 5000),
        make_podgroup("a"),
        make_pod("a-0", group="a"),
        make_podgroup("b", priority_class="urgent"),
        make_pod("b-0", group="b"),
    ]
    assert simulate(objs).binds() == {"b-0": "n1"}


def test_two_queues_share_the_cluster_by_weight() -> None:
    objs = [
        make_node("n1", cpu="4"),
        make_node("n2", cpu="4"),
        make_queue("heavy", weight=3),
        make_queue("light", weight=1),
    ]
    for i in range(8):
        objs += [
            make_pod(f"h{i}", cpu="1", queue="heavy"),
            make_pod(f"l{i}", cpu="1", queue="light"),
        ]
    run = simulate(objs)
    bound = run.binds()
    assert sum(name.startswith("h") for name in bound) == 6
    assert sum(name.startswith("l") for name in bound) == 2
    heavy = run.cluster.objects["Queue"]["heavy"]["status"]["allocated"]
    assert heavy["cpu"] == "6"


def test_a_lone_queue_may_use_the_whole_cluster() -> None:
    objs = [make_node("n1", cpu="4"), make_queue("light", weight=1)]
    objs += [make_pod(f"l{i}", cpu="1", queue="light") for i in range(6)]
    assert len(simulate(objs).binds()) == 4


def test_closed_queue_admits_nothing() -> None:
    objs = [
        make_node("n1"),
        make_queue("closed", state="Closed"),
        make_podgroup("job", queue="closed", min_resources={"cpu": "1"}),
        make_pod("job-0", group="job"),
    ]
    run = simulate(objs)
    assert run.binds() == {}
    assert run.phase("job") == "Pending"
    assert run.reason("job-0") == "queue closed is Closed: it admits no new jobs"


def test_overcommit_keeps_an_oversized_job_pending() -> None:
    objs = [
        make_node("n1", cpu="4"),
        make_podgroup("huge", min_member=1, min_resources={"cpu": "10"}),
        make_pod("huge-0", group="huge", cpu="1"),
    ]
    run = simulate(objs)
    assert run.phase("huge") == "Pending"
    assert run.binds() == {}
    assert any(e["reason"] == "Unschedulable" and "overused" in e["message"] for e in run.events())
    assert run.reason("huge-0") == "resource in cluster is overused: overused cpu"


@pytest.mark.parametrize(
    ("conf", "spread"),
    [
        pytest.param(None, True, id="least-requested"),
        pytest.param(BINPACK_CONF, False, id="binpack"),
    ],
)
def test_binpack_packs_while_least_requested_spreads(conf: str | None, spread: bool) -> None:
    objs = [make_node(f"n{i}", cpu="8") for i in range(4)]
    objs += [make_pod(f"p{i}", cpu="1") for i in range(4)]
    used = set(simulate(objs, conf=conf).binds().values())
    assert (len(used) == 4) if spread else (len(used) == 1)


def test_pipelining_onto_releasing_resources() -> None:
    objs = [
        make_node("n1", cpu="2"),
        make_pod("leaving", cpu="2", node="n1", scheduler="default-scheduler", deleting=True),
        *gang("next", 1, cpu="2"),
    ]
    manifests = [Manifest(f"t#{i}", o) for i, o in enumerate(objs)]
    cluster, cache, scheduler = build_simulation(manifests, conf=conf_of(None))
    for _ in range(3):
        scheduler.run_once()
        cache.flush()
    pod = cluster.objects["Pod"]["default/next-task-0"]
    assert not pod["spec"].get("nodeName")
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["message"] == (
        "Pod default/next-task-0 can possibly be assigned to n1, once "
        "resource is released and minAvailable is satisfied"
    )
    # the terminating pod goes away; the pipelined task is bound on the next cycle
    leaving = cluster.objects["Pod"].pop("default/leaving")
    cache.apply("DELETED", "Pod", leaving)
    scheduler.run_once()
    cache.flush()
    assert cluster.objects["Pod"]["default/next-task-0"]["spec"]["nodeName"] == "n1"


def test_drf_serves_the_job_with_the_smaller_share_first() -> None:
    objs = [
        make_node("n1", cpu="4"),
        make_podgroup("big", min_member=1),
        make_pod("big-0", group="big", cpu="2", node="n1"),
        make_podgroup("small", min_member=1),
        make_pod("small-0", group="small", cpu="1"),
        make_pod("big-1", group="big", cpu="2"),
    ]
    run = simulate(objs)
    # 2 cpu left: small (share 0) goes first; then big-1 no longer fits
    assert run.node_of("small-0") == "n1"
    assert run.node_of("big-1") is None


def test_job_of_a_missing_queue_is_told_so() -> None:
    run = simulate([make_node("n1"), make_podgroup("lost", queue="nowhere"), make_pod("lost-0", group="lost")])
    assert run.binds() == {}
    assert run.reason("lost-0") == ("queue nowhere of PodGroup default/lost does not exist; "
                                    "create it or change spec.queue")
