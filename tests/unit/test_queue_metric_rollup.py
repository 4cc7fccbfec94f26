"""Queue gauges of hierarchical queues roll up to the parents, as ``status.allocated`` does.

Volcano's ``updateQueueStatus`` (``pkg/scheduler/framework/session.go:502-535``) adds each
allocated task to its queue and every ancestor up to ``root``; the queue metrics follow
the same sums, so a parent queue's ``volcano_queue_allocated_*`` and ``volcano_queue_request_*``
hold its children's pods (before, a parent with no pods of its own showed 0).
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.kube.cyclemetrics import record_cycle
from scheduler.metrics import REGISTRY
from tests.builders import IgnoredWrites, make_pod, make_podgroup, make_queue


def _queue(name: str, parent: str | None = None) -> dict[str, Any]:
    queue = make_queue(f"rollup-{name}" if name != "root" else "root")
    if parent is not None:
        queue["spec"]["parent"] = parent
    return queue


def _gauge(kind: str, queue: str) -> float | None:
    return REGISTRY.get_sample_value(f"volcano_queue_{kind}_milli_cpu", {"queue_name": queue})


def test_parent_queue_gauges_hold_their_children() -> None:
    cache = SchedulerCache(writer=IgnoredWrites(), clock=time.time)
    cache.apply("ADDED", "Queue", _queue("root"))
    cache.apply("ADDED", "Queue", _queue("dept", parent="root"))
    cache.apply("ADDED", "Queue", _queue("team-a", parent="rollup-dept"))
    cache.apply("ADDED", "Queue", _queue("team-b", parent="rollup-dept"))
    for name, queue, cpu, node in (("a1", "rollup-team-a", "2", "n1"),
                                   ("a2", "rollup-team-a", "1", None),
                                   ("b1", "rollup-team-b", "4", "n1")):
        cache.apply("ADDED", "PodGroup", make_podgroup(f"pg-{name}", queue=queue))
        cache.apply("ADDED", "Pod", make_pod(name, cpu=cpu, group=f"pg-{name}", node=node,
                                             phase="Running" if node else None))
    record_cycle(SimpleNamespace(seconds=0.01, plugin_open_seconds=0.0, action_seconds={},
                                 plugin_seconds={}), cache)
    assert _gauge("allocated", "rollup-team-a") == 2000.0
    assert _gauge("allocated", "rollup-team-b") == 4000.0
    assert _gauge("allocated", "rollup-dept") == 6000.0
    assert _gauge("allocated", "root") == 6000.0
    assert _gauge("request", "rollup-team-a") == 3000.0
    assert _gauge("request", "rollup-dept") == 7000.0
    assert _gauge("request", "root") == 7000.0
