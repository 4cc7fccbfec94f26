"""Backfill takes best-effort tasks in queue, job, then task order."""

from typing import Any

from tests.builders import (
    make_node,
    make_pod,
    make_podgroup,
    make_priority_class,
    make_queue,
    simulate,
)

Obj = dict[str, Any]


def _best_effort(name: str, group: str, **kwargs: Any) -> Obj:
    return make_pod(name, group=group, cpu=None, **kwargs)


def _one_slot_node() -> Obj:
    return make_node("n1", pods="1")


def test_queue_order_decides_before_creation_time() -> None:
    """Volcano ``backfill.go`` pickUpPendingTasks: queues are popped in QueueOrderFn order
    (proportion: higher ``spec.priority`` first), so the later job of the higher-priority
    queue takes the node's only pod slot."""
    objs = [
        _one_slot_node(),
        make_queue("urgent", priority=10),
        make_podgroup("early"),
        _best_effort("early-0", "early"),
        make_podgroup("late", queue="urgent"),
        _best_effort("late-0", "late"),
    ]
    run = simulate(objs)
    assert run.binds() == {"late-0": "n1"}
    assert run.reason("early-0") == "0/1 nodes are unavailable: 1 node(s) pod number exceeded."


def test_job_order_decides_inside_a_queue() -> None:
    """Volcano ``backfill.go`` pickUpPendingTasks: a queue's jobs are popped in JobOrderFn
    order (priority plugin: higher PodGroup priority first)."""
    objs = [
        _one_slot_node(),
        make_priority_class("high", 1000),
        make_podgroup("early"),
        _best_effort("early-0", "early"),
        make_podgroup("late", priority_class="high"),
        _best_effort("late-0", "late"),
    ]
    assert simulate(objs).binds() == {"late-0": "n1"}


def test_task_order_decides_inside_a_job() -> None:
    """Volcano ``backfill.go`` pickUpPendingTasks: a job's tasks are popped in TaskOrderFn
    order (priority plugin: higher pod priority first)."""
    objs = [
        _one_slot_node(),
        make_podgroup("j"),
        _best_effort("j-low", "j", priority=1),
        _best_effort("j-high", "j", priority=100),
    ]
    assert simulate(objs).binds() == {"j-high": "n1"}
