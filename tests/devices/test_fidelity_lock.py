"""The node lock under ``deviceshare.NodeLockEnable``: where it is checked, what the pod sees.

Volcano checks the lock only when a device is allocated (``GPUDevices.Allocate`` of gpushare and
vgpu call ``nodelock.LockNode``); the predicate never looks at it. So a locked node still passes
the filter, may still be the best node, and then the allocation fails and the pod waits for a
later cycle instead of going elsewhere.
"""

from __future__ import annotations

from typing import Any

from scheduler.cluster.sim import EPOCH
from scheduler.devices.node.nodelock import format_lock
from tests.builders import simulate
from tests.devices.conftest import (
    bound_gpu_pod,
    card,
    device_session,
    gpu_node,
    gpu_pod,
    gpushare_conf,
    session_task,
    vgpu_conf,
    vgpu_node,
    vgpu_pod,
)

Obj = dict[str, Any]
FRESH = format_lock(EPOCH - 60)


def preferred_and_free(lock: str) -> list[Obj]:
    """Two one-card nodes; binpack prefers ``n1`` (its card is half used), which holds ``lock``."""
    return [gpu_node("n1", cards=1, card_memory=16000, annotations={"gpu": lock}),
            bound_gpu_pod("old", node="n1", index="0", memory=8000),
            gpu_node("n2", cards=1, card_memory=16000)]


def test_a_locked_node_still_passes_the_predicate() -> None:
    """Volcano deviceshare ``FilterNode`` (gpushare ``checkNodeGPUSharingPredicate``) never
    reads the lock annotation."""
    session, plugin = device_session([*preferred_and_free(FRESH), gpu_pod("p", memory=4000)],
                                     conf=gpushare_conf(policy="binpack", lock=True))
    task = session_task(session, "p")
    assert plugin.check_node(task, session.nodes["n1"]) is None


def test_locked_best_node_fails_the_allocation_and_the_pod_waits() -> None:
    """Volcano gpushare ``GPUDevices.Allocate``: ``LockNode`` fails with "node X has been
    locked within 5 minutes", the allocate action skips the task (``allocateResourcesForTask``
    error → next task), so the pod is not moved to the free node."""
    objs = [*preferred_and_free(FRESH), gpu_pod("p", memory=4000)]
    run = simulate(objs, conf=gpushare_conf(policy="binpack", lock=True), max_cycles=2)
    assert run.node_of("p") is None
    assert run.reason("p").startswith("node n1 has been locked within 5 minutes (lock gpu=")
    assert run.condition("p")["reason"] == "Unschedulable"
    unlocked = simulate([*preferred_and_free(format_lock(EPOCH - 600)), gpu_pod("p",
                                                                              memory=4000)],
                        conf=gpushare_conf(policy="binpack", lock=True), max_cycles=2)
    assert unlocked.node_of("p") == "n1"


def test_a_second_device_pod_on_a_node_locked_this_cycle_waits_for_the_next() -> None:
    """Volcano: the first ``Allocate`` on a node takes its lock, so the next pod whose best node
    it is fails ``LockNode`` in the same session and is placed once the node side released it."""
    objs = [*preferred_and_free(format_lock(EPOCH - 600)),
            gpu_pod("a", memory=2000, priority=10), gpu_pod("b", memory=2000)]
    conf = gpushare_conf(policy="binpack", lock=True)
    first = simulate(objs, conf=conf, max_cycles=1)
    assert first.node_of("a") == "n1" and first.node_of("b") is None
    assert "node n1 has been locked within 5 minutes (lock gpu taken in this cycle for pod " \
           "default/a)" in first.reason("b")
    settled = simulate(objs, conf=conf)
    assert settled.node_of("a") == settled.node_of("b") == "n1"


def test_an_unreadable_lock_is_an_error_on_that_node_and_is_left_alone() -> None:
    """Volcano ``nodelock.LockNode`` returns the ``time.Parse`` error, so ``Allocate`` fails on
    that node every cycle; nothing overwrites the value."""
    objs = [gpu_node("n1", cards=1, annotations={"gpu": "held-by-ops"}),
            gpu_pod("p", memory=1000)]
    run = simulate(objs, conf=gpushare_conf(lock=True), max_cycles=3)
    assert run.node_of("p") is None
    assert run.reason("p") == ("node n1 has an unreadable lock annotation gpu='held-by-ops' "
                               "(not an RFC 3339 time); remove it to place device pods on this "
                               "node")
    assert run.cluster.objects["Node"]["n1"]["metadata"]["annotations"]["gpu"] == "held-by-ops"
    unlocked = simulate(objs, conf=gpushare_conf(lock=False), max_cycles=3)
    assert unlocked.node_of("p") == "n1"


def test_vgpu_lock_fails_the_allocation_too() -> None:
    """Volcano vgpu ``GPUDevices.Allocate`` takes lock ``hamivgpu`` after fitting the cards."""
    node = vgpu_node("n1", [card("GPU-0")])
    node["metadata"]["annotations"]["hamivgpu"] = FRESH
    run = simulate([node, vgpu_pod("p", memory=1000)], conf=vgpu_conf(lock=True), max_cycles=2)
    assert run.node_of("p") is None
    assert run.reason("p").startswith("node n1 has been locked within 5 minutes (lock hamivgpu=")

