"""PodGroups for plain pods, the way Volcano's podgroup controller makes them.

The scheduler tracks jobs through PodGroups: a pod joins one through the
``scheduling.k8s.io/group-name`` annotation. Pods created by Deployments, StatefulSets or by
hand carry none, and without Volcano's controller manager nobody would give them one. This
controller does that work inside ``lahar run``: for each pod of our schedulers without a group
(pending or not, as Volcano's controller) it creates the PodGroup
:func:`~scheduler.api.implied.implied_podgroup` describes, then writes the group name onto the
pod.

None of it is on the scheduling loop's path: the cache schedules such a pod at once under its
implied PodGroup (:mod:`scheduler.cache.implied`), and these writes go out from a small pool of
worker threads, each retried with backoff, then again after ``retry_after`` seconds. A stalled
API server slows the writes, never a decision. While binds are queued the controller yields
to them (one pod per ``trickle`` seconds); a pod bound meanwhile still gets its PodGroup
afterwards. Its bind carried the group name (the API server applies a Binding's annotations to
the pod), so then only the PodGroup is created and the pod is not patched.

The names are Volcano's, so running next to Volcano's own controller is harmless: whichever
writes first wins and the other finds the PodGroup already there. A pod that names its implied
PodGroup but whose PodGroup is missing (a bind that carried the name, then a restart before the
PodGroup was written) gets it once the caches have synced.
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
    implied_podgroup_name,
)
from scheduler.api.task import GROUP_NAME_ANNOTATION, group_of
from scheduler.cluster.kube.client import MERGE_PATCH, KubeClient, object_path
from scheduler.cluster.kube.retry import RetryPolicy, status_of

__all__ = ["COPIED_ANNOTATIONS", "QUEUE_NAME_ANNOTATION", "PodGroupController"]

log = structlog.get_logger("lahar.podgroups")

VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"


@dataclass(slots=True)
class _Wanted:
    """A pod waiting for its PodGroup (the latest version seen)."""

    pod: dict[str, Any]
    annotated: bool = False
    """The pod names its implied PodGroup already (its Binding carried the name): no patch."""


@dataclass(slots=True)
class PodGroupController:
    """Creates PodGroups for our schedulers' plain pods (see the module docstring)."""

    client: KubeClient
    scheduler_names: Iterable[str]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    report: Callable[[Mapping[str, Any], str], None] | None = None
    """Called with the pod and a message when a pod cannot be given a PodGroup."""
    workers: int = 8
    """Writes in flight at most."""
    retry_after: float = 1.0
    """Seconds before a pod whose writes failed (after their own retries) is tried again."""
    yield_to: Callable[[], bool] = lambda: False
    """True while binds are queued: then one pod is served per ``trickle`` seconds, so these
    writes take the API server's spare capacity, not the binds' (as status writes do)."""
    trickle: float = 0.1
    known: Callable[[str, str], bool] = lambda namespace, name: False
    """Whether the PodGroup ``namespace/name`` exists (``lahar run`` asks its cache)."""
    synced: Callable[[], bool] = lambda: True
    """Whether the caches have synced: nothing is written before (and ``known`` is trusted)."""
    _names: frozenset[str] = frozenset()
    _pending: dict[str, _Wanted] = field(default_factory=dict)
    _unverified: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Pods listed already naming their implied PodGroup, checked once the caches synced."""
    _busy: set[str] = field(default_factory=set)
    _done: set[str] = field(default_factory=set)
    _served: int = 0
    """Pods served since the last summary line (one info line per burst, not per pod)."""
    _not_before: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _pool: ThreadPoolExecutor | None = None

    def __post_init__(self) -> None:
        self._names = frozenset(self.scheduler_names)

    def ours(self, pod: Mapping[str, Any]) -> bool:
        """A pod of our schedulers, not being deleted."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        return (spec.get("schedulerName", "default-scheduler") in self._names
                and not meta.get("deletionTimestamp"))

    def observe(self, event_type: str, pod: Mapping[str, Any]) -> None:
        """Feed one pod watch event (safe from any thread)."""
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        group = group_of(meta) if event_type != "DELETED" and self.ours(pod) else None
        with self._lock:
            if group == "":  # ours, in no PodGroup yet
                if key not in self._done:
                    self._pending[key] = _Wanted(dict(pod))
                    self._wake.set()
                return
            wanted = self._pending.get(key)
            if group is not None and _names_its_own(pod, group):
                if wanted is not None:  # the bind brought the name before the patch
                    wanted.pod, wanted.annotated = dict(pod), True
                elif event_type == "ADDED" and key not in self._done:  # its PodGroup may lack
                    self._unverified[key] = dict(pod)
                    self._wake.set()
                return
            self._pending.pop(key, None)
            self._unverified.pop(key, None)
            self._not_before.pop(key, None)
            self._done.discard(key)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending) + len(self._unverified)

    def sync(self) -> int:
        """Serve every collected pod now, in this thread; returns how many were done."""
        self._verify()
        batch = self._take(limit=None)
        return sum(self._finish(key, self._serve(key, wanted)) for key, wanted in batch)

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
            if not self.synced():  # as Volcano's workers, which start after the caches sync
                stop.wait(0.05)
                continue
            self._verify()
            yielding = self.yield_to()
            with self._lock:
                room = self.workers - len(self._busy)
            batch = self._take(limit=min(room, 1) if yielding else room)
            for key, wanted in batch:
                try:
                    self._pool.submit(self._work, key, wanted)
                except RuntimeError:  # the pool was shut down: stopping
                    return

    def _verify(self) -> None:
        """Once the caches synced: pods listed naming a PodGroup that exists are done, the
        others wait for their PodGroup to be created."""
        with self._lock:
            if not self._unverified or not self.synced():
                return
            for key, pod in self._unverified.items():
                meta = pod.get("metadata") or {}
                if self.known(meta.get("namespace", "default"), group_of(meta)):
                    self._done.add(key)
                else:
                    self._pending[key] = _Wanted(pod, annotated=True)
            self._unverified.clear()

    def _take(self, *, limit: int | None) -> list[tuple[str, _Wanted]]:
        """Up to ``limit`` pending pods that are neither in flight nor waiting to be retried,
        marked in flight."""
        if limit is not None and limit <= 0:
            return []
        now = time.monotonic()
        batch: list[tuple[str, _Wanted]] = []
        with self._lock:
            for key, wanted in self._pending.items():
                if key in self._busy or self._not_before.get(key, 0.0) > now:
                    continue
                batch.append((key, wanted))
                if limit is not None and len(batch) >= limit:
                    break
            self._busy.update(key for key, _ in batch)
        return batch

    def _work(self, key: str, wanted: _Wanted) -> None:
        try:
            done = self._serve(key, wanted)
        except Exception as error:  # a worker must never die with a pod in flight
            log.warning("cannot give a pod its PodGroup", pod=key, error=str(error))
            done = False
        self._finish(key, done)

    def _finish(self, key: str, done: bool) -> int:
        with self._lock:
            self._busy.discard(key)
            if done:
                self._not_before.pop(key, None)
                if self._pending.pop(key, None) is not None:
                    self._done.add(key)
                self._served += 1
                if not self._pending and not self._busy:
                    log.info("gave plain pods their PodGroups", pods=self._served)
                    self._served = 0
            else:
                self._not_before[key] = time.monotonic() + self.retry_after
        self._wake.set()  # room for the next pod; a failed one waits out retry_after
        return int(done)

    def _serve(self, key: str, wanted: _Wanted) -> bool:
        pod = wanted.pod
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
        with self._lock:
            current = self._pending.get(key, wanted)
            if current.annotated:
                return True  # its bind wrote the name meanwhile
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


def _names_its_own(pod: Mapping[str, Any], group: str) -> bool:
    """Whether ``group`` is the PodGroup this controller would make for ``pod``."""
    try:
        return group == implied_podgroup_name(pod)
    except (ObjectError, ValueError, KeyError, TypeError):
        return False
