"""Prometheus metrics under Volcano's ``volcano_*`` names, so existing dashboards keep working.

Everything lives in one dedicated :data:`REGISTRY` (not the client library's global one), which
``scheduler.httpserver`` serves at ``/metrics``. Callers use the small function API below
(``observe_action("allocate", 0.012)``) and never touch metric objects, so names, units and
label sets stay in one place. Latencies are taken in seconds and recorded in milliseconds, as
Volcano does. Labels are bounded: action and plugin names, results, queue and job names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

__all__ = [
    "CONTENT_TYPE",
    "REGISTRY",
    "count_schedule_attempts",
    "exponential_buckets",
    "exposition",
    "forget_queue",
    "observe_action",
    "observe_e2e",
    "observe_open_session",
    "observe_plugin",
    "observe_task_latency",
    "record_preemption_attempt",
    "record_victims",
    "set_queue",
    "set_unschedulable",
]

REGISTRY = CollectorRegistry(auto_describe=True)
CONTENT_TYPE = CONTENT_TYPE_LATEST
SUBSYSTEM = "volcano"


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """``start, start*factor, …`` — ``count`` upper bounds (prometheus-client has no helper)."""
    return tuple(start * factor**index for index in range(count))


LATENCY_BUCKETS = exponential_buckets(1.0, 2.0, 18)
"""1 ms … ~131 s: covers a tiny test cluster up to a slow cycle on a large one."""


def _histogram(name: str, doc: str, labels: Iterable[str] = ()) -> Histogram:
    return Histogram(name, doc, labelnames=tuple(labels), subsystem=SUBSYSTEM,
                     buckets=LATENCY_BUCKETS, registry=REGISTRY)


def _gauge(name: str, doc: str, labels: Iterable[str] = ()) -> Gauge:
    return Gauge(name, doc, labelnames=tuple(labels), subsystem=SUBSYSTEM, registry=REGISTRY)


E2E_LATENCY = _histogram("e2e_scheduling_latency_milliseconds",
                         "E2E scheduling latency in milliseconds (scheduling algorithm + binding)")
OPEN_SESSION = _histogram("open_session_duration_milliseconds",
                          "Time spent opening a session (snapshot and plugin set-up)")
ACTION_LATENCY = _histogram("action_scheduling_latency_milliseconds",
                            "Action scheduling latency in milliseconds", ("action",))
PLUGIN_LATENCY = _histogram("plugin_scheduling_latency_milliseconds",
                            "Plugin scheduling latency in milliseconds", ("plugin", "OnSession"))
TASK_LATENCY = _histogram("task_scheduling_latency_milliseconds",
                          "Task scheduling latency in milliseconds")
SCHEDULE_ATTEMPTS = Counter(
    "schedule_attempts", "Number of attempts to schedule pods, by the result: 'unschedulable' "
    "means a pod could not be scheduled, 'error' means an internal scheduler problem",
    labelnames=("result",), subsystem=SUBSYSTEM, registry=REGISTRY)
PREEMPTION_VICTIMS = _gauge("pod_preemption_victims", "Number of selected preemption victims")
# Volcano's counter is exposed without a ``_total`` suffix, which prometheus-client would add
# to a Counter; a Gauge that only ever goes up keeps the name dashboards query.
PREEMPTION_ATTEMPTS = _gauge("total_preemption_attempts",
                             "Total preemption attempts in the cluster till now")
UNSCHEDULE_TASKS = _gauge("unschedule_task_count", "Number of tasks that could not be scheduled",
                          ("job_id",))
UNSCHEDULE_JOBS = _gauge("unschedule_job_count", "Number of jobs that could not be scheduled")

_QUEUE_KINDS = ("allocated", "request", "deserved", "capacity", "real_capacity")
_QUEUE_RESOURCE_GAUGES = {
    (kind, unit): _gauge(f"queue_{kind}_{unit}", f"{doc} of the queue, by {kind}",
                         ("queue_name",) if unit != "scalar_resources"
                         else ("queue_name", "resource"))
    for kind in _QUEUE_KINDS
    for unit, doc in (("milli_cpu", "CPU (milli-cores)"), ("memory_bytes", "Memory (bytes)"),
                      ("scalar_resources", "Extended resource quantity"))
}
QUEUE_SHARE = _gauge("queue_share", "Share of the queue (dominant resource share)",
                     ("queue_name",))
QUEUE_WEIGHT = _gauge("queue_weight", "Weight of the queue", ("queue_name",))
QUEUE_OVERUSED = _gauge("queue_overused", "Whether the queue is overused (1) or not (0)",
                        ("queue_name",))

E2E_JOB_LATENCY = Histogram(
    "e2e_job_scheduling_latency_milliseconds", "E2E job scheduling latency in milliseconds",
    subsystem=SUBSYSTEM, buckets=exponential_buckets(32.0, 2.0, 10), registry=REGISTRY)
_JOB_LABELS = ("job_name", "queue", "job_namespace")
E2E_JOB_DURATION = _gauge("e2e_job_scheduling_duration", "E2E job scheduling duration",
                          _JOB_LABELS)
E2E_JOB_START = _gauge("e2e_job_scheduling_start_time", "E2E job scheduling start time",
                       _JOB_LABELS)
E2E_JOB_LAST = _gauge("e2e_job_scheduling_last_time", "E2E job scheduling last time",
                      _JOB_LABELS)
JOB_SHARE = _gauge("job_share", "Share for one job", ("job_ns", "job_id"))
# Volcano's job counters are exposed without ``_total`` (see PREEMPTION_ATTEMPTS).
JOB_RETRIES = _gauge("job_retry_counts", "Number of retry counts for one job", ("job_id",))
_CARD = ("devID", "NodeName")
VGPU_SHARED = _gauge("vgpu_device_shared_number", "The number of vgpu tasks sharing this card",
                     _CARD)
VGPU_MEMORY = _gauge("vgpu_device_allocated_memory",
                     "The number of vgpu memory allocated in this card (MiB)", _CARD)
VGPU_CORES = _gauge("vgpu_device_allocated_cores",
                    "The percentage of gpu compute cores allocated in this card", _CARD)
VGPU_LIMIT = _gauge("vgpu_device_memory_limit",
                    "The number of total device memory in this card (MiB)", _CARD)
VGPU_POD_MEMORY = _gauge("vgpu_device_memory_allocation_for_a_certain_pod",
                         "The vgpu device memory allocated for a certain pod (MiB)",
                         (*_CARD, "podName"))
VGPU_POD_CORES = _gauge("vgpu_device_core_allocation_for_a_certain_pod",
                        "The vgpu device core allocated for a certain pod", (*_CARD, "podName"))
# Lahar's own (``lahar_*``): what the loop's helpers hold back, see docs/web.md.
BIND_QUEUE = Gauge("lahar_bind_queue_depth", "Binds committed and not yet written",
                   registry=REGISTRY)
STATUS_BACKLOG = Gauge("lahar_status_writer_backlog",
                       "PodGroup, Queue and pod status writes waiting to be sent",
                       registry=REGISTRY)
PODGROUP_PENDING = Gauge("lahar_podgroup_controller_pending_pods",
                         "Pods waiting for the PodGroup controller to create their PodGroup",
                         registry=REGISTRY)
CACHE_SYNC_AGE = Gauge("lahar_cache_sync_age_seconds",
                       "Seconds since the cache last received an event from the API server",
                       registry=REGISTRY)
VIEW_BUILD = Gauge("lahar_web_view_build_seconds",
                   "Time the latest web view took to build (0 while nobody reads the view)",
                   registry=REGISTRY)

_known_jobs: dict[str, int] = {}
"""Job name → the unschedulable task count last published for it."""
_known_scalars: dict[str, set[tuple[str, str]]] = {}


def observe_e2e(seconds: float) -> None:
    """One whole scheduling cycle."""
    E2E_LATENCY.observe(seconds * 1000.0)


def observe_open_session(seconds: float) -> None:
    OPEN_SESSION.observe(seconds * 1000.0)


def observe_action(name: str, seconds: float) -> None:
    """One action's ``execute`` within a cycle."""
    ACTION_LATENCY.labels(action=name).observe(seconds * 1000.0)


def observe_plugin(name: str, on_session: str, seconds: float) -> None:
    """A plugin's ``OnSessionOpen`` or ``OnSessionClose`` (pass that word as ``on_session``)."""
    PLUGIN_LATENCY.labels(plugin=name, OnSession=on_session).observe(seconds * 1000.0)


def observe_task_latency(seconds: float) -> None:
    """From pod creation to its bind."""
    TASK_LATENCY.observe(seconds * 1000.0)


def count_schedule_attempts(result: str, count: int = 1) -> None:
    """``result`` is ``scheduled``, ``unschedulable`` or ``error``."""
    if count:
        SCHEDULE_ATTEMPTS.labels(result=result).inc(count)


def record_preemption_attempt() -> None:
    """Count one preemption attempt: ``volcano_total_preemption_attempts`` goes up by one.

    The preempt action calls it on each node where it has run its eviction loop for a
    preemptor, before it checks whether the preemptor now fits there (Volcano's
    ``RegisterPreemptionAttempts`` in ``preempt.go``), so a preemptor tried on three nodes
    counts three attempts.
    """
    PREEMPTION_ATTEMPTS.inc()


def record_victims(count: int) -> None:
    """Publish how many victims the latest preemption chose (``volcano_pod_preemption_victims``).

    A gauge, as in Volcano (``UpdatePreemptionVictimsCount``): the preempt action sets it to
    the number of candidates the Preemptable hooks returned on a node, so it shows the size of
    the most recent choice.
    """
    PREEMPTION_VICTIMS.set(count)


def set_unschedulable(changed: Mapping[str, int | None], jobs: int) -> None:
    """Move the per-job count of unschedulable tasks and set the unschedulable job count.

    ``changed`` maps the jobs (by PodGroup name, Volcano's ``job_id`` label) whose count
    changed since the last call to the tasks their gang still lacks, 0 for a ready job, or to
    None for a job no longer present (its series is dropped). ``jobs`` is how many jobs now
    count more than 0 (``volcano_unschedule_job_count``).
    """
    for job, count in changed.items():
        if count is None:
            if _known_jobs.pop(job, None) is not None:
                UNSCHEDULE_TASKS.remove(job)
        elif _known_jobs.get(job) != count:
            UNSCHEDULE_TASKS.labels(job_id=job).set(count)
            _known_jobs[job] = count
    UNSCHEDULE_JOBS.set(jobs)


def set_queue(name: str, *, allocated: Mapping[str, float] | None = None,
              request: Mapping[str, float] | None = None,
              deserved: Mapping[str, float] | None = None,
              capacity: Mapping[str, float] | None = None,
              real_capacity: Mapping[str, float] | None = None, share: float | None = None,
              weight: float | None = None, overused: bool | None = None) -> None:
    """Publish a queue's gauges. Resource maps use ``cpu`` in milli-cores, ``memory`` in bytes
    and any other key as an extended resource quantity."""
    for kind, resources in (("allocated", allocated), ("request", request),
                            ("deserved", deserved), ("capacity", capacity),
                            ("real_capacity", real_capacity)):
        if resources is None:
            continue
        seen = _known_scalars.setdefault(name, set())
        for resource, value in resources.items():
            if resource == "cpu":
                _QUEUE_RESOURCE_GAUGES[kind, "milli_cpu"].labels(queue_name=name).set(value)
            elif resource == "memory":
                _QUEUE_RESOURCE_GAUGES[kind, "memory_bytes"].labels(queue_name=name).set(value)
            else:
                _QUEUE_RESOURCE_GAUGES[kind, "scalar_resources"].labels(
                    queue_name=name, resource=resource).set(value)
                seen.add((kind, resource))
    if share is not None:
        QUEUE_SHARE.labels(queue_name=name).set(share)
    if weight is not None:
        QUEUE_WEIGHT.labels(queue_name=name).set(weight)
    if overused is not None:
        QUEUE_OVERUSED.labels(queue_name=name).set(1.0 if overused else 0.0)


def forget_queue(name: str) -> None:
    """Drop every series of a deleted queue."""
    for (_, unit), gauge in _QUEUE_RESOURCE_GAUGES.items():
        if unit != "scalar_resources":
            _remove(gauge, name)
    for kind, resource in _known_scalars.pop(name, set()):
        _remove(_QUEUE_RESOURCE_GAUGES[kind, "scalar_resources"], name, resource)
    for gauge in (QUEUE_SHARE, QUEUE_WEIGHT, QUEUE_OVERUSED):
        _remove(gauge, name)


def set_gauge(gauge: Gauge, value: float, *labels: str) -> None:
    """Set one labelled series (the session recorder's generic setter)."""
    gauge.labels(*labels).set(value)


def drop_series(gauge: Gauge, *labels: str) -> None:
    """Remove one labelled series if it exists."""
    _remove(gauge, *labels)


def _remove(gauge: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # never set
        gauge.remove(*labels)


def exposition() -> bytes:
    """The registry in the Prometheus text format."""
    return generate_latest(REGISTRY)
