"""PodGroups for plain pods, the way Volcano's podgroup controller makes them.

The scheduler tracks jobs through PodGroups: a pod joins one through the
``scheduling.k8s.io/group-name`` annotation. Pods created by Deployments, StatefulSets or by
hand carry none, and without Volcano's controller manager nobody would give them one. This
controller does that work inside ``lahar run``: for each pending pod of our schedulers without a
group it creates the PodGroup :func:`~scheduler.api.implied.implied_podgroup` describes, then
writes the group name back onto the pod.

None of it is on the scheduling loop's path: the cache schedules such a pod at once under its
implied PodGroup (:mod:`scheduler.cache.implied`), and these writes go out from a small pool of
worker threads, each retried with backoff, then again after ``retry_after`` seconds. A stalled
API server slows the writes, never a decision.

The names are Volcano's, so running next to Volcano's own controller is harmless: whichever
writes first wins and the other finds the PodGroup already there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog

from scheduler.api.errors import ObjectError
from scheduler.api.implied import (
    COPIED_ANNOTATIONS,
    QUEUE_NAME_ANNOTATION,
    implied_podgroup,
)
from scheduler.api.task import GROUP_NAME_ANNOTATION, VOLCANO_GROUP_NAME_ANNOTATION
from scheduler.cluster.kube.client import MERGE_PATCH, KubeClient, object_path
from scheduler.cluster.kube.retry import RetryPolicy, status_of

__all__ = ["COPIED_ANNOTATIONS", "QUEUE_NAME_ANNOTATION", "PodGroupController"]

log = structlog.get_logger("lahar.podgroups")

VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"


@dataclass(slots=True)
class PodGroupController:
    """Creates PodGroups for our schedulers' plain pods (see the module docstring)."""

    client: KubeClient
    scheduler_names: Iterable[str]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    report: Callable[[Mapping[str, Any], str], None] | None = None
    """Called with the pod and a message when a pod cannot be given a PodGroup."""
    workers: int = 8
    retry_after: float = 1.0
    """Seconds before a pod whose writes failed (after their own retries) is tried again."""
    yield_to: Callable[[], bool] = lambda: False
    """True while binds are queued: then one pod is served per ``trickle`` seconds, so these
    writes take the API server's spare capacity, not the binds' (as status writes do)."""
    trickle: float = 0.1
    _names: frozenset[str] = frozenset()
    _pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    _busy: set[str] = field(default_factory=set)
    _done: set[str] = field(default_factory=set)
    _served: int = 0
    """Pods served since the last summary line (one info line per burst, not per pod)."""
    """Pods served whose annotated version the watch has not shown yet."""
    _not_before: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _pool: ThreadPoolExecutor | None = None

    def __post_init__(self) -> None:
        self._names = frozenset(self.scheduler_names)

    def wants(self, pod: Mapping[str, Any]) -> bool:
        """A pending pod of ours, not being deleted, that belongs to no PodGroup."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        annotations = meta.get("annotations") or {}
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        return (spec.get("schedulerName", "default-scheduler") in self._names
                and not spec.get("nodeName")
                and phase == "Pending"
                and not meta.get("deletionTimestamp")
                and not annotations.get(GROUP_NAME_ANNOTATION)
                and not annotations.get(VOLCANO_GROUP_NAME_ANNOTATION))

    def observe(self, event_type: str, pod: Mapping[str, Any]) -> None:
        """Feed one pod watch event (safe from any thread)."""
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        with self._lock:
            if event_type != "DELETED" and self.wants(pod):
                if key not in self._done:
                    self._pending[key] = dict(pod)
                    self._wake.set()
            else:
                self._pending.pop(key, None)
                self._not_before.pop(key, None)
                self._done.discard(key)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def sync(self) -> int:
        """Serve every collected pod now, in this thread; returns how many were done."""
        with self._lock:
            batch = [item for item in self._pending.items() if item[0] not in self._busy]
        return sum(self._finish(key, pod, self._serve(pod)) for key, pod in batch)

    def start(self, stop: threading.Event) -> None:
        """Serve collected pods from background threads until ``stop`` is set."""
        self._pool = ThreadPoolExecutor(max_workers=self.workers,
                                        thread_name_prefix="lahar-podgroups")
        self._thread = threading.Thread(target=self._dispatch, args=(stop,),
                                         name="lahar-podgroup-dispatch", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _dispatch(self, stop: threading.Event) -> None:
        assert self._pool is not None
        yielding = False
        while not stop.is_set():
            if yielding:  # one pod per trickle, however many pod events arrive meanwhile
                stop.wait(self.trickle)
            else:
                self._wake.wait(self.retry_after)
            self._wake.clear()
            if stop.is_set():
                return
            yielding = self.yield_to()
            batch = self._take(limit=1 if yielding else None)
            for key, pod in batch:
                try:
                    self._pool.submit(self._work, key, pod)
                except RuntimeError:  # the pool was shut down: stopping
                    return

    def _take(self, *, limit: int | None) -> list[tuple[str, dict[str, Any]]]:
        """Up to ``limit`` pending pods that are neither in flight nor waiting to be retried,
        marked in flight."""
        now = time.monotonic()
        batch: list[tuple[str, dict[str, Any]]] = []
        with self._lock:
            for key, pod in self._pending.items():
                if key in self._busy or self._not_before.get(key, 0.0) > now:
                    continue
                batch.append((key, pod))
                if limit is not None and len(batch) >= limit:
                    break
            self._busy.update(key for key, _ in batch)
        return batch

    def _work(self, key: str, pod: dict[str, Any]) -> None:
        try:
            done = self._serve(pod)
        except Exception as error:  # a worker must never die with a pod in flight
            log.warning("cannot give a pod its PodGroup", pod=key, error=str(error))
            done = False
        self._finish(key, pod, done)

    def _finish(self, key: str, pod: dict[str, Any], done: bool) -> int:
        with self._lock:
            self._busy.discard(key)
            if done:
                self._not_before.pop(key, None)
                self._done.add(key)
                self._pending.pop(key, None)
                self._served += 1
                if not self._pending and not self._busy:
                    log.info("gave plain pods their PodGroups", pods=self._served)
                    self._served = 0
            else:
                self._not_before[key] = time.monotonic() + self.retry_after
                self._wake.set()  # the dispatcher waits out retry_after before trying again
        return int(done)

    def _serve(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        namespace, name = meta.get("namespace", "default"), meta.get("name", "")
        try:
            group = implied_podgroup(pod)
        except (ObjectError, ValueError) as error:
            message = f"cannot create a PodGroup for pod {namespace}/{name}: {error}"
            log.warning("pod left without a PodGroup", pod=f"{namespace}/{name}",
                        error=str(error))
            if self.report is not None:
                self.report(pod, message)
            return True  # not retried until the pod changes
        group_name = group["metadata"]["name"]
        try:
            self.retry.call(self.client.request_json, "POST",
                            object_path(VOLCANO, "podgroups", namespace=namespace), body=group)
            log.debug("created a PodGroup for a plain pod", pod=f"{namespace}/{name}",
                      podgroup=group_name)
        except Exception as error:
            if status_of(error) != 409:  # 409: it exists already (a sibling or Volcano)
                log.warning("cannot create PodGroup", podgroup=f"{namespace}/{group_name}",
                            pod=f"{namespace}/{name}", error=str(error))
                return False
        patch = {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: group_name}}}
        try:
            self.retry.call(self.client.request_json, "PATCH",
                            object_path("/api/v1", "pods", name=name, namespace=namespace),
                            body=patch, content_type=MERGE_PATCH)
        except Exception as error:
            if status_of(error) == 404:
                return True  # the pod is gone
            log.warning("cannot annotate pod with its PodGroup", pod=f"{namespace}/{name}",
                        podgroup=group_name, error=str(error))
            return False
        return True
