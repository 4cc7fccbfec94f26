"""The write side of :class:`~scheduler.cache.cache.SchedulerCache`: binds, evictions, events.

Decisions a session hands back are applied to the cache at once and queued as writes;
:meth:`CacheWrites.flush` performs them outside the cache lock. With
:meth:`CacheWrites.start_background` binds go to a pool of bind workers the moment a gang is
committed, and events, pod conditions and PodGroup / Queue status to a coalescing writer
(:mod:`scheduler.cache.binder`, :mod:`scheduler.cache.statuswriter`); evictions and resyncs stay
with :meth:`flush`. A bind the cluster refuses is rolled back and its pod resynced from the
cluster after a per-pod backoff.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PodGroup
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, TaskID, TaskStatus
from scheduler.cache.binder import BindPool
from scheduler.cache.dra import DraStore
from scheduler.cache.implied import ImpliedGroups
from scheduler.cache.interface import ClusterWriter, Fenced, ObjectRef, WriteError
from scheduler.cache.resync import ResyncQueue
from scheduler.cache.status import StatusRecorder
from scheduler.cache.statuswriter import CoalescingWriter
from scheduler.framework.close import rfc3339

__all__ = ["CacheWrites"]

log = structlog.get_logger("lahar.cache")


class CacheWrites:
    """Mixed into the cache; relies on the state and the handlers the cache defines."""

    writer: ClusterWriter
    clock: Callable[[], float]
    lock: threading.RLock
    tasks: dict[TaskID, TaskInfo]
    pods: dict[str, Mapping[str, Any]]
    arrivals: dict[str, int]
    resync: ResyncQueue
    status: StatusRecorder
    podgroups: dict[JobID, PodGroup]
    nominated: dict[str, list[ObjectRef]]
    pre_bind_hooks: list[Callable[[TaskInfo], None]]
    post_bind_hooks: list[Callable[[TaskInfo, Exception | None], None]]
    _writes: deque[Callable[[], None]]
    binds: BindPool[TaskInfo] | None
    committed_binds: int
    background: CoalescingWriter | None
    implied: ImpliedGroups
    dra: DraStore
    _event_ids = itertools.count()

    if TYPE_CHECKING:  # defined by the cache
        def _add_task(self, task: TaskInfo) -> None: ...

        def _remove_task(self, task: TaskInfo) -> None: ...

        def _pod(self, deleted: bool, obj: Mapping[str, Any]) -> None: ...

        def apply(self, event: str, kind: str, obj: Mapping[str, Any]) -> None: ...

    # -- SessionSink ----------------------------------------------------------------------
    def bind(self, tasks: Sequence[TaskInfo]) -> None:
        """Mark the tasks Binding on their nodes at once (Volcano's ``AddBindTask``), so the
        next session sees them placed, and queue their Binding writes."""
        marked: list[TaskInfo] = []
        with self.lock:
            for decided in tasks:
                task = self.tasks.get(decided.uid)
                if task is None:
                    continue
                self._remove_task(task)
                task.status = TaskStatus.BINDING
                task.node_name = decided.node_name
                task.bind_annotations = dict(decided.bind_annotations)
                self.implied.name_on_bind(task)
                self._add_task(task)
                marked.append(task)
            self.committed_binds += len(marked)
            self.dra.committed(marked)
            if self.binds is None:
                self._writes.extend(functools.partial(self._write_bind, t) for t in marked)
                return
        # Outside the lock: a full pool makes the session wait, and the workers need the lock.
        for task in marked:
            self.binds.submit(task)

    def _write_bind(self, task: TaskInfo) -> None:
        failure: WriteError | None = None
        try:
            for hook in self.pre_bind_hooks:
                hook(task)
            self.writer.bind(
                namespace=task.namespace,
                name=task.name,
                uid=str(task.uid),
                node=task.node_name,
                annotations=task.bind_annotations,
            )
        except Fenced:
            self._bind_dropped(task)  # no longer the leader: no report, no hooks
            return
        except WriteError as exc:
            if exc.status == 409:
                log.info("pod already bound", pod=task.key)
            else:
                failure = exc
                self._bind_failed(task, exc)
        for after in self.post_bind_hooks:
            after(task, failure)

    def report_event(self, *, involved: ObjectRef, type: str, reason: str, message: str) -> None:
        """Queue an Event (written by the next :meth:`flush` or the background writer, never
        under the cache lock)."""
        self.enqueue_status(
            ("event", str(next(self._event_ids))),
            lambda: self.writer.record_event(
                involved=involved, type=type, reason=reason, message=message
            ),
        )

    def enqueue_status(self, key: Hashable, write: Callable[[], None]) -> None:
        """Queue a status or event write under the key of what it writes (latest per key
        wins when a background writer runs)."""
        if self.background is not None:
            self.background.put(key, write)
        else:
            self._writes.append(write)

    def _status_lost(self, key: Hashable) -> None:
        with self.lock:
            self.status.lost(key)

    def _bind_dropped(self, task: TaskInfo) -> None:
        """A bind that was never sent (the Lease was lost): give its node back."""
        self.dra.forget(task.uid)
        with self.lock:
            if self.tasks.get(task.uid) is task:
                self._remove_task(task)
                self.resync.add(task.key)

    def _bind_failed(self, task: TaskInfo, exc: Exception) -> None:
        log.warning("bind failed", pod=task.key, node=task.node_name, error=str(exc))
        message = f"failed to bind to node {task.node_name}: {exc}"
        with self.lock:
            current = self.tasks.get(task.uid)
            if current is task:
                self._remove_task(task)  # frees the node; the pod returns on its resync
                delay = self.resync.add(task.key)
                log.info("pod will be resynced", pod=task.key, delay=round(delay, 3),
                         failures=self.resync.failures(task.key))
        ref = ObjectRef(kind="Pod", name=task.name, namespace=task.namespace, uid=str(task.uid))
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulerError",
            "message": message,
            "lastTransitionTime": rfc3339(self.clock()),
        }
        with self.lock:
            self.status.pod_conditions[task.key] = ("SchedulerError", message)

        def report() -> None:
            self.writer.update_pod_condition(
                namespace=task.namespace, name=task.name, condition=condition
            )
            self.writer.record_event(
                involved=ref, type="Warning", reason="FailedScheduling", message=message
            )

        if self.background is not None:
            self.background.put(("pod", task.key), report)
            return
        try:
            report()
        except WriteError as write_exc:
            log.warning("could not report bind failure", pod=task.key, error=str(write_exc))

    def evict(self, task: TaskInfo, reason: str, *, for_job: JobInfo | None = None) -> None:
        """Take a victim out of service: Releasing at once, evicted by the next flush.

        As Volcano's ``SchedulerCache.Evict``: the cached task turns Releasing (its node keeps
        counting it until the pod is gone), the writer evicts the pod and its PodGroup gets a
        ``Normal Evict <reason>`` event. A refused eviction is rolled back (the task is rebuilt
        from the pod as last watched) and the pod is re-read after a per-pod backoff.
        """
        with self.lock:
            cached = self.tasks.get(task.uid)
            if cached is None:
                return
            self._remove_task(cached)
            cached.status = TaskStatus.RELEASING
            self._add_task(cached)
            podgroup = self.podgroups.get(cached.job)
        preemptor = None
        if for_job is not None:  # gang eviction: the victim made room for the whole gang
            preemptor = ObjectRef(kind="PodGroup", name=for_job.podgroup.name,
                                  namespace=for_job.podgroup.namespace,
                                  uid=for_job.podgroup.uid,
                                  api_version="scheduling.volcano.sh/v1beta1")
        self._writes.append(functools.partial(self._write_evict, cached, reason, preemptor))
        if podgroup is not None:
            ref = ObjectRef(kind="PodGroup", name=podgroup.name, namespace=podgroup.namespace,
                            uid=podgroup.uid, api_version="scheduling.volcano.sh/v1beta1")
            self.report_event(involved=ref, type="Normal", reason="Evict", message=reason)

    def _write_evict(self, task: TaskInfo, reason: str,
                     preemptor: ObjectRef | None = None) -> None:
        if preemptor is None:
            with self.lock:
                nominated = {ref.uid: ref for ref in self.nominated.get(task.node_name, [])}
            # Name the preemptor only when one pod was nominated to the victim's node this
            # cycle; with several the victims made room for all of them together.
            preemptor = next(iter(nominated.values())) if len(nominated) == 1 else None
        try:
            self.writer.evict(
                namespace=task.namespace,
                name=task.name,
                uid=str(task.uid),
                reason=reason,
                message=f"Pod is evicted, because of {reason}",
                preemptor=preemptor,
            )
        except WriteError as exc:
            if exc.status == 404:
                return  # already gone: its deletion arrives through the watch
            self._evict_failed(task, exc)

    def _evict_failed(self, task: TaskInfo, exc: WriteError) -> None:
        log.warning("eviction failed", pod=task.key, status=exc.status, error=str(exc))
        with self.lock:
            if self.tasks.get(task.uid) is not task:
                return  # the pod changed meanwhile; the newer version stands
            pod = self.pods.get(task.key)
            if pod is not None:
                self._pod(False, pod)
            delay = self.resync.add(task.key)
            log.info("pod will be resynced", pod=task.key, delay=round(delay, 3),
                     failures=self.resync.failures(task.key))

    # -- writing --------------------------------------------------------------------------
    def resync_due(self) -> int:
        """Bring back the pods whose bind failed and whose backoff is over; returns how many.

        Each is read again from the cluster when the writer can (``get_pod``), otherwise rebuilt
        from its last watched version; a failed read backs off again.
        """
        with self.lock:
            keys = self.resync.due()
        get_pod = getattr(self.writer, "get_pod", None)
        for key in keys:
            namespace, _, name = key.partition("/")
            with self.lock:
                pod: Mapping[str, Any] | None = self.pods.get(key)
            if get_pod is not None:
                try:
                    pod = get_pod(namespace=namespace, name=name)
                except WriteError as exc:
                    with self.lock:
                        self.resync.add(key)
                    log.warning("cannot resync pod", pod=key, error=str(exc))
                    continue
            if pod is None:
                with self.lock:
                    self.pods.pop(key, None)
                    self.resync.forget(key)
                continue
            self.apply("MODIFIED", "Pod", pod)
        return len(keys)

    def flush(self) -> int:
        """Resync due pods, then perform every queued write; returns how many were attempted."""
        self.resync_due()
        done = 0
        while True:
            with self.lock:
                if not self._writes:
                    return done
                write = self._writes.popleft()
            try:
                write()
            except WriteError as exc:
                log.warning("write failed", error=str(exc), status=exc.status)
            done += 1

    @property
    def pending_writes(self) -> int:
        """Writes not yet done: queued for :meth:`flush`, binds and background writes."""
        waiting = len(self._writes)
        if self.binds is not None:
            waiting += self.binds.backlog
        if self.background is not None:
            waiting += self.background.backlog
        return waiting

    # -- background writers ---------------------------------------------------------------
    def start_background(self, *, bind_workers: int, gate: Callable[[], bool] | None = None,
                         status_workers: int = 2, bind_capacity: int = 5000,
                         status_capacity: int = 20_000) -> None:
        """Write binds from ``bind_workers`` threads, the pod first seen first, and status
        through a coalescing writer.

        ``gate`` is asked right before each bind is sent (``lahar run`` passes "still the
        leader"); a bind it refuses is not sent and its task goes back to Pending.
        """
        arrivals = self.arrivals
        pool: BindPool[TaskInfo] = BindPool(
            send=self._write_bind, workers=bind_workers, capacity=bind_capacity,
            dropped=self._bind_dropped,
            order=lambda task: arrivals.get(task.key, -1))
        if gate is not None:
            pool.gate = gate
        self.binds = pool.start()
        self.background = CoalescingWriter(workers=status_workers, capacity=status_capacity,
                                           yield_to=pool.busy, lost=self._status_lost).start()

    def stop_background(self, *, send_binds: bool, timeout: float = 10.0) -> None:
        """Stop the background writers: queued binds are sent when ``send_binds`` (else rolled
        back) for at most ``timeout`` seconds while status writes already flush beside them,
        then every status write left is flushed, for at most ``timeout`` seconds more."""
        background = self.background
        beside: threading.Thread | None = None
        if self.binds is not None and background is not None and background.backlog:
            beside = threading.Thread(target=background.flush, args=(timeout,), daemon=True,
                                      name="status-flush-beside-binds")
            beside.start()
        if self.binds is not None:
            self.binds.stop(drain=send_binds, timeout=timeout)
        if background is not None:
            background.stop(timeout=timeout)
        if beside is not None:
            beside.join(1.0)
