"""Publish one scheduling cycle as Volcano's ``volcano_*`` metrics.

Timings come from the cycle's :class:`~scheduler.loop.CycleStats`; counts and queue gauges are
read from the cache right after the session closed: ``scheduled`` attempts are the tasks the
cycle committed for binding, and pending tasks carry the condition the cycle gave them.
``unschedule_task_count`` / ``unschedule_job_count`` follow Volcano's gang plugin: per valid
job, the tasks its gang still lacks (0 once ready), and how many jobs lack any.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from scheduler.api.resource import Resource
from scheduler.framework.close import roll_up

__all__ = ["record_cycle"]

UNSCHEDULABLE_REASONS = frozenset({"Unschedulable", "SchedulerError"})


def _resource_map(resource: Resource) -> dict[str, float]:
    values = {"cpu": resource.milli_cpu, "memory": resource.memory}
    values.update(resource.scalars)
    return values


def record_cycle(stats: Any, cache: Any) -> None:
    """Observe latencies, schedule attempts, unschedulable counts and queue gauges."""
    from scheduler import metrics  # the Prometheus client loads after the first cycle

    metrics.observe_e2e(stats.seconds)
    metrics.observe_open_session(stats.plugin_open_seconds)
    for action, seconds in stats.action_seconds.items():
        metrics.observe_action(action, seconds)
    for (plugin, stage), seconds in stats.plugin_seconds.items():
        metrics.observe_plugin(plugin, stage, seconds)
    with cache.lock:
        unschedulable: Counter[str] = Counter()
        # Binds leave from workers and a task may stay Binding for several cycles: count the
        # tasks this cycle committed, not the ones still Binding.
        scheduled, cache.committed_binds = cache.committed_binds, 0
        if not cache.usage.active:
            cache.usage.activate(cache.tasks.values(), cache._queue_of)
        for task in cache.usage.pending.values():
            reason = cache.status.pod_conditions.get(task.key, ("", ""))[0]
            if reason in UNSCHEDULABLE_REASONS:
                unschedulable[str(task.job)] += 1
        # Kept by the cache as pods change, not summed here: a cycle costs what changed.
        request, allocated = cache.usage.totals(lambda: cache.tasks.values(), cache._queue_of)
        queues = [(queue.name, queue.weight, queue.capability) for queue in cache.queues.values()]
        # Hierarchical queues: a parent's gauges hold its children's sums, as its
        # status.allocated does (close.roll_up, Volcano's updateQueueStatus).
        request = roll_up(cache.queues, {name: request.get(name, Resource())
                                         for name, _, _ in queues})
        allocated = roll_up(cache.queues, {name: allocated.get(name, Resource())
                                           for name, _, _ in queues})
        # Volcano labels by PodGroup name alone; same-named jobs in two namespaces add up.
        # After the first cycle, only the names that changed: most jobs keep their count.
        changed = cache.unready_by_name if cache.unready_changed is None else cache.unready_changed
        unready = {name: cache.unready_by_name.get(name) for name in changed}
        cache.unready_changed = set()
        unready_jobs = cache.unready_positive
    metrics.count_schedule_attempts("scheduled", scheduled)
    metrics.count_schedule_attempts("unschedulable", len(unschedulable))
    metrics.set_unschedulable(unready, unready_jobs)
    for name, weight, capability in queues:
        metrics.set_queue(name, weight=float(weight),
                          allocated=_resource_map(allocated.get(name, Resource())),
                          request=_resource_map(request.get(name, Resource())),
                          capacity=_resource_map(capability) if capability is not None else None)
