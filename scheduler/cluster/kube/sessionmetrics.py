"""Volcano's metrics that only a closed session knows, published at the session's close.

:func:`record_cycle` (``cyclemetrics``) reads the cache; what the plugins computed lives in the
session alone and is gone after it: each queue's deserved, share, real capability and
overused verdict (proportion's or capacity's figures), each job's share (drf), when a job
first became ready (Volcano's ``e2e_job_scheduling_*``), how many cycles each job ended not
ready (``job_retry_counts``, the gang plugin's ``OnSessionClose``), and each vGPU card's usage
(Volcano sets those gauges from the card ledger's ``GetStatus``). Only series whose value
changed are set, so a cycle costs what changed plus one pass over jobs and vGPU nodes.

The Prometheus client (``scheduler.metrics``) is imported at the first session's close, not
with this module: ``lahar run`` imports this module before its first cycle, and the client's
import would delay the first binds.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from scheduler.api.podgroup import PHASE_RUNNING
from scheduler.api.resource import Resource

__all__ = ["LaharGauges", "SessionMetrics", "chain"]

_log = logging.getLogger(__name__)


def _metrics() -> Any:
    from scheduler import metrics

    return metrics


def _resource_map(resource: Resource) -> dict[str, float]:
    values = {"cpu": resource.milli_cpu, "memory": resource.memory}
    values.update(resource.scalars)
    return values


class SessionMetrics:
    """The loop's ``on_close`` part that publishes session-only metrics (see the module)."""

    def __init__(self) -> None:
        self._last: dict[tuple[Any, ...], float] = {}
        self._ready: set[str] = set()

    def _set(self, gauge: Any, value: float, *labels: str) -> None:
        key = (gauge, *labels)
        if self._last.get(key) != value:
            self._last[key] = value
            _metrics().set_gauge(gauge, value, *labels)

    def __call__(self, session: Any, stats: Any) -> None:
        metrics = _metrics()
        now = session.clock()
        for entry in session.plugin_entries():
            plugin = entry.plugin
            attrs = getattr(plugin, "attrs", None)
            if isinstance(attrs, dict):
                for attr in attrs.values():
                    queue = attr.queue
                    metrics.set_queue(
                        queue.name, deserved=_resource_map(attr.deserved), share=attr.share,
                        real_capacity=_resource_map(attr.real_capability)
                        if attr.real_capability is not None else None,
                        overused=bool(session.overused(queue)))
            shares = getattr(plugin, "shares", None)
            if isinstance(shares, dict):
                for uid, share in shares.items():
                    job = session.jobs.get(uid)
                    if job is not None:
                        self._set(metrics.JOB_SHARE, float(share), job.namespace, job.name)
        for job in session.jobs.values():
            key = str(job.uid)
            # the gang plugin's close: one retry per cycle a valid job ends not ready
            if (job.podgroup.phase != PHASE_RUNNING and job.tasks and session.is_valid(job)
                    and not session.job_ready(job)):
                metrics.JOB_RETRIES.labels(job_id=job.name).inc()
            if job.podgroup.phase == PHASE_RUNNING and key not in self._ready:
                self._ready.add(key)
                created = job.podgroup.creation or now
                labels = (job.name, str(job.queue), job.namespace)
                millis = max(now - created, 0.0) * 1000.0
                metrics.E2E_JOB_LATENCY.observe(millis)
                metrics.set_gauge(metrics.E2E_JOB_DURATION, millis, *labels)
                metrics.set_gauge(metrics.E2E_JOB_START, float(int(created)), *labels)
                metrics.set_gauge(metrics.E2E_JOB_LAST, float(int(now)), *labels)
        self._ready &= {str(uid) for uid in session.jobs}
        self._vgpu(session)

    def _vgpu(self, session: Any) -> None:
        metrics = _metrics()
        for node in session.nodes.values():
            for ledger in node.others.values():
                for card in getattr(ledger, "cards", None) or ():
                    info = getattr(card, "info", None)
                    if info is None:
                        continue
                    labels = (info.uuid, node.name)
                    self._set(metrics.VGPU_SHARED, float(card.used_num), *labels)
                    self._set(metrics.VGPU_MEMORY, float(card.used_mem), *labels)
                    self._set(metrics.VGPU_CORES, float(card.used_cores), *labels)
                    self._set(metrics.VGPU_LIMIT, float(info.memory), *labels)
                pods = getattr(ledger, "pods", {}) or {}
                held: dict[tuple[str, str, str], list[float]] = {}
                for uid, charges in (getattr(ledger, "charges", {}) or {}).items():
                    for charge in charges:
                        if len(charge) == 4:  # vGPU: (uuid, memory, cores, type)
                            sums = held.setdefault(
                                (str(charge[0]), node.name, str(pods.get(uid, uid))), [0.0, 0.0])
                            sums[0] += charge[1]
                            sums[1] += charge[2]
                for pod_labels, (memory, cores) in held.items():
                    self._set(metrics.VGPU_POD_MEMORY, memory, *pod_labels)
                    self._set(metrics.VGPU_POD_CORES, cores, *pod_labels)


class LaharGauges:
    """Lahar's own gauges (``lahar_*``), read after each cycle from the loop's helpers."""

    def __init__(self, cache: Any, groups: Any = None) -> None:
        self.cache = cache
        self.groups = groups
        self.last_event = time.monotonic()

    def saw_event(self) -> None:
        self.last_event = time.monotonic()

    def __call__(self, session: Any, stats: Any) -> None:
        metrics = _metrics()
        binds = getattr(self.cache, "binds", None)
        metrics.BIND_QUEUE.set(binds.backlog if binds is not None else 0)
        writer = getattr(self.cache, "background", None)
        metrics.STATUS_BACKLOG.set(writer.backlog if writer is not None else 0)
        metrics.PODGROUP_PENDING.set(self.groups.pending if self.groups is not None else 0)
        metrics.CACHE_SYNC_AGE.set(time.monotonic() - self.last_event)


def chain(*hooks: Any) -> Any:
    """One ``on_close`` hook calling each of ``hooks`` (None left out) in turn."""
    present = [hook for hook in hooks if hook is not None]

    def call(session: Any, stats: Any) -> None:
        for hook in present:
            try:
                hook(session, stats)
            except Exception:  # metrics and the web view never fail a cycle
                _log.exception("on_close hook %r failed", hook)

    return call
