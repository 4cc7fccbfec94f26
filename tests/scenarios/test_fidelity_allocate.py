"""Allocate's turn of a job: when a failing task ends it and when the job carries on."""

from typing import Any

import pytest

from tests.builders import make_node, make_pod, make_podgroup, simulate

Obj = dict[str, Any]

ROLE = "volcano.sh/task-spec"
NOWHERE = {"zone": "nowhere"}


def _task(name: str, *, role: str = "", fits: bool = True, priority: int = 1) -> Obj:
    """A 1-cpu pod of job ``j``; ``fits=False`` selects a label no node has."""
    return make_pod(
        name,
        group="j",
        cpu="1",
        priority=priority,
        node_selector=None if fits else NOWHERE,
        annotations={ROLE: role} if role else None,
    )


def test_job_continues_past_a_task_that_fits_nowhere() -> None:
    """Volcano ``allocate.go`` allocateResourcesForTasks: when a task has no feasible node,
    ``job.NeedContinueAllocating`` decides; with ``minMember`` below the task count and no
    per-role minimum the other tasks are still tried and make the gang."""
    objs = [
        make_node("n1", cpu="4"),
        make_podgroup("j", min_member=2),
        _task("j-t-0", fits=False),
        _task("j-t-1"),
        _task("j-t-2"),
    ]
    run = simulate(objs)
    assert set(run.binds()) == {"j-t-1", "j-t-2"}
    assert run.phase("j") == "Running"


def test_job_needing_every_task_stops_at_the_first_failure() -> None:
    """Volcano ``JobInfo.NeedContinueAllocating``: ``MinAvailable == len(Tasks)`` never
    continues, so nothing is placed and the gang stays whole."""
    objs = [
        make_node("n1", cpu="4"),
        make_podgroup("j", min_member=3),
        _task("j-t-0", fits=False),
        _task("j-t-1"),
        _task("j-t-2"),
    ]
    run = simulate(objs)
    assert run.binds() == {}
    assert "0/1 nodes are unavailable" in run.reason("j-t-0")


def test_siblings_of_a_failed_role_are_skipped() -> None:
    """Volcano ``allocate.go``: ``job.TaskHasFitErrors`` skips a task whose role already
    failed predicates this cycle ("Task X with role spec Y has already predicated failed,
    skip"); tasks of other roles are still placed."""
    objs = [
        make_node("n1", cpu="4"),
        make_podgroup("j", min_member=2),
        _task("j-worker-0", role="worker", fits=False, priority=10),
        _task("j-worker-1", role="worker", fits=False, priority=10),
        _task("j-ps-0", role="ps"),
        _task("j-ps-1", role="ps"),
    ]
    run = simulate(objs)
    assert set(run.binds()) == {"j-ps-0", "j-ps-1"}
    skipped = {run.reason("j-worker-0"), run.reason("j-worker-1")}
    assert (
        "Task j-worker-1 with role spec worker has already predicated failed, skip" in skipped
    )


@pytest.mark.parametrize(
    ("min_member", "bound"),
    [(2, {"j-worker-0", "j-worker-1"}), (3, set())],
    ids=["left-tasks-reach-min", "left-tasks-fall-short"],
)
def test_role_minimums_above_min_member_count_only_the_tasks_left(
    min_member: int, bound: set[str]
) -> None:
    """Volcano ``JobInfo.NeedContinueAllocating`` case 1: when the ``minTaskMember`` values
    add up to more than ``minMember``, carry on only while ready tasks plus pending tasks of
    roles that have not failed can still reach ``minMember``."""
    objs = [
        make_node("n1", cpu="4"),
        make_podgroup("j", min_member=min_member, min_task_member={"ps": 2, "worker": 2}),
        _task("j-ps-0", role="ps", fits=False, priority=10),
        _task("j-ps-1", role="ps", fits=False, priority=10),
        _task("j-worker-0", role="worker"),
        _task("j-worker-1", role="worker"),
    ]
    run = simulate(objs)
    assert set(run.binds()) == bound


def test_failed_role_without_its_own_minimum_does_not_stop_the_job() -> None:
    """Volcano ``JobInfo.NeedContinueAllocating`` case 2: with per-role minimums adding up to
    ``minMember``, a failed role only stops the job while it holds fewer tasks than its own
    ``minTaskMember``; a role without one never does."""
    objs = [
        make_node("n1", cpu="4"),
        make_podgroup("j", min_member=2, min_task_member={"worker": 2}),
        _task("j-ps-0", role="ps", fits=False, priority=10),
        _task("j-worker-0", role="worker"),
        _task("j-worker-1", role="worker"),
        _task("j-worker-2", role="worker"),
    ]
    run = simulate(objs)
    assert set(run.binds()) == {"j-worker-0", "j-worker-1", "j-worker-2"}


def test_ready_job_keeps_its_turns_until_no_task_is_left() -> None:
    """Volcano ``allocate.go`` allocateResources: a committed job is pushed back into its
    queue while it still has tasks, so it takes one more task per turn after its gang."""
    objs = [
        make_node("n1", cpu="3"),
        make_podgroup("j", min_member=1),
        *[_task(f"j-t-{i}") for i in range(5)],
    ]
    run = simulate(objs, max_cycles=1)
    assert set(run.binds()) == {"j-t-0", "j-t-1", "j-t-2"}
