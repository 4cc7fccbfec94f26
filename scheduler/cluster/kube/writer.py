"""Everything the scheduler writes to the API server: binds, evictions, status, events.

:class:`KubeClusterWriter` implements ``scheduler.cache.interface.ClusterWriter`` with raw-JSON
requests and turns API failures into ``WriteError`` / ``BindError`` carrying the HTTP status
(0 = transport). Transient failures (transport, 429, 5xx) are retried with full jitter a bounded
number of times; answers such as 409 "already bound" are surfaced at once.

Write shapes follow Volcano: the Binding carries the device annotations (the API server applies
them atomically with ``spec.nodeName``); eviction first marks the pod ``Ready=False`` / reason
``Evict`` and ``DisruptionTarget=True`` / ``PreemptionByScheduler``, then uses the Eviction API so
PodDisruptionBudgets are honoured; PodGroup status is patched on the object (Volcano's CRD has no
status subresource) and Queue status through ``/status``. Events are core/v1 Events named like
client-go's (``<object>.<hex nanoseconds>``); repeats of the same event bump ``count`` instead of
creating new objects. The events that accompany a successful write (``Scheduled`` after a bind,
``Evict`` after an eviction) are handed to :attr:`KubeClusterWriter.background` when one is set
(``lahar run`` sets the cache's coalescing writer), so a bind worker is free for the next bind
after one round trip.

For node locks the writer also offers ``get_node`` / ``replace_node`` (optimistic concurrency on
``metadata.resourceVersion``; a lost race raises :class:`ConflictError`).
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from scheduler.cache.interface import BindError, Fenced, ObjectRef, WriteError
from scheduler.cluster.kube.client import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    KubeClient,
    object_path,
)
from scheduler.cluster.kube.retry import RetryPolicy, status_of

__all__ = ["ConflictError", "KubeClusterWriter", "rfc3339"]

T = TypeVar("T")
_log = logging.getLogger(__name__)

CORE = "/api/v1"
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
SHARD = "/apis/shard.volcano.sh/v1alpha1"
DRA = "/apis/resource.k8s.io/v1"
EVENT_MESSAGE_LIMIT = 1024
EVENT_REPEAT_WINDOW = 600.0
"""Seconds within which an identical event bumps the previous one's count."""


class ConflictError(WriteError):
    """An update lost an optimistic-concurrency race (HTTP 409); re-read and try again."""

    def __init__(self, message: str, *, status: int = 409) -> None:
        super().__init__(message, status=status)


def rfc3339(seconds: float) -> str:
    """``2006-01-02T15:04:05Z`` — the timestamp format of conditions and core Events."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclasses.dataclass(slots=True)
class _SeenEvent:
    name: str
    namespace: str
    count: int
    last: float


class KubeClusterWriter:
    """``ClusterWriter`` against a real API server (thread-safe; share one per process)."""

    def __init__(self, client: KubeClient, *, scheduler_name: str = "lahar",
                 retry: RetryPolicy | None = None, clock: Callable[[], float] = time.time,
                 instance: str | None = None) -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.retry = retry or RetryPolicy()
        self._evict_retry = dataclasses.replace(self.retry, retry_throttled=False)
        self.clock = clock
        self.instance = (instance or socket.gethostname())[:128]
        self._seen: OrderedDict[tuple[str, ...], _SeenEvent] = OrderedDict()
        self._seen_lock = threading.Lock()
        self.background: Callable[[Hashable, Callable[[], None]], Any] | None = None
        """Where follow-up events go instead of being written inline (key, write)."""
        self.may_bind: Callable[[], bool] = lambda: True
        """Asked before every attempt of a bind, retries included (``lahar run``: "still the
        leader"); a no raises :class:`Fenced` and nothing is sent."""

    # -- pods -----------------------------------------------------------------------------------

    def bind(self, *, namespace: str, name: str, uid: str, node: str,
             annotations: Mapping[str, str]) -> None:
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        if annotations:
            metadata["annotations"] = dict(annotations)
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        path = object_path(CORE, "pods", namespace=namespace, name=name, subresource="binding")
        what = f"bind {namespace}/{name} to {node}"

        def attempt() -> int:
            if not self.may_bind():
                raise Fenced(f"{what}: not sent, this replica no longer leads")
            return self._status_of_post(path, body)

        status = self._call(what, attempt, error=BindError)
        if status not in (200, 201):
            raise BindError(f"{what}: unexpected HTTP {status}", status=status)
        self._record_quietly(ObjectRef(kind="Pod", name=name, namespace=namespace, uid=uid),
                             type="Normal", reason="Scheduled",
                             message=f"Successfully assigned {namespace}/{name} to {node}")

    def evict(self, *, namespace: str, name: str, uid: str, reason: str, message: str,
              preemptor: ObjectRef | None = None) -> None:
        """Mark the pod's conditions, then POST its Eviction; a pod already gone is done.

        The order is kube-scheduler's (``PrepareCandidate``): the ``DisruptionTarget``
        condition first, so the pod's owner can tell a preemption from a crash, then the
        Eviction, which the API server refuses (429) while a PodDisruptionBudget forbids it.
        A ``Warning Evict`` event on the pod says why (``message``, Volcano's
        ``Pod is evicted, because of <reason>``), with the preemptor as its ``related`` object
        when known.
        """
        now = rfc3339(self.clock())
        conditions = [
            {"type": "Ready", "status": "False", "reason": "Evict",
             "message": message or reason, "lastTransitionTime": now},
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "message": f"{self.scheduler_name}: preempting to accommodate a higher priority pod",
             "lastTransitionTime": now},
        ]
        status_path = object_path(CORE, "pods", namespace=namespace, name=name,
                                  subresource="status")
        try:
            self._call(f"mark {namespace}/{name} for eviction",
                       lambda: self._patch(status_path, {"status": {"conditions": conditions}},
                                           STRATEGIC_MERGE_PATCH))
        except WriteError as error:
            if error.status == 404:
                return
            raise
        eviction: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                    "metadata": {"name": name, "namespace": namespace}}
        if uid:
            eviction["deleteOptions"] = {"preconditions": {"uid": uid}}
        path = object_path(CORE, "pods", namespace=namespace, name=name, subresource="eviction")
        try:
            self._call(f"evict {namespace}/{name}", lambda: self._status_of_post(path, eviction),
                       policy=self._evict_retry)
        except WriteError as error:
            if error.status == 404:
                return
            raise
        self._record_quietly(ObjectRef(kind="Pod", name=name, namespace=namespace, uid=uid),
                             type="Warning", reason="Evict",
                             message=message or f"Pod is evicted, because of {reason}",
                             related=preemptor)

    def update_pod_condition(self, *, namespace: str, name: str, condition: Mapping[str, Any],
                             nominated_node: str | None = None) -> None:
        """Strategic-merge the condition (merged by ``type``) into the pod's status."""
        entry = dict(condition)
        entry.setdefault("lastTransitionTime", rfc3339(self.clock()))
        status: dict[str, Any] = {"conditions": [entry]}
        if nominated_node is not None:
            status["nominatedNodeName"] = nominated_node
        path = object_path(CORE, "pods", namespace=namespace, name=name, subresource="status")
        self._call(f"update condition {entry.get('type')} of {namespace}/{name}",
                   lambda: self._patch(path, {"status": status}, STRATEGIC_MERGE_PATCH))

    def get_pod(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as the API server has it now, or None when it no longer exists."""
        path = object_path(CORE, "pods", namespace=namespace, name=name)
        try:
            return self._call(f"get pod {namespace}/{name}",
                              lambda: self.client.request_json("GET", path))
        except WriteError as error:
            if error.status == 404:
                return None
            raise

    # -- PodGroups and Queues -------------------------------------------------------------------

    def update_podgroup_status(self, *, namespace: str, name: str,
                               status: Mapping[str, Any]) -> None:
        path = object_path(VOLCANO, "podgroups", namespace=namespace, name=name)
        self._call(f"update status of podgroup {namespace}/{name}",
                   lambda: self._patch(path, {"status": dict(status)}, MERGE_PATCH))

    def update_queue_status(self, *, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch through ``/status`` (the only verb the deploy RBAC grants on Queues'
        status). A 404 there means the Queue is gone, or its CRD was installed without the
        status subresource (``conf/crds`` has it): the error says both, and no other path is
        tried — patching the Queue object itself would need a verb the role does not grant."""
        body = {"status": dict(status)}
        what = f"update status of queue {name}"
        try:
            self._call(what, lambda: self._patch(
                object_path(VOLCANO, "queues", name=name, subresource="status"), body,
                MERGE_PATCH))
        except WriteError as error:
            if error.status != 404:
                raise
            raise WriteError(f"{what}: 404: the Queue was deleted, or its CRD has no status "
                             "subresource (install conf/crds)", status=404) from None

    def update_node_shard_status(self, *, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch this scheduler's fields (``nodesInUse``, ``nodesToAdd``,
        ``nodesToRemove``) into its NodeShard's ``/status``; Volcano's scheduler writes the
        same fields (UpdateNodeShardStatus). A 404 means the NodeShard is gone."""
        self._call(f"update status of nodeshard {name}", lambda: self._patch(
            object_path(SHARD, "nodeshards", name=name, subresource="status"),
            {"status": dict(status)}, MERGE_PATCH))

    def ensure_queue(self, name: str, *, weight: int = 1, reclaimable: bool = True) -> bool:
        """Create the Queue unless it exists; True when this call created it."""
        try:
            self._call(f"get queue {name}", lambda: self.client.request_json(
                "GET", object_path(VOLCANO, "queues", name=name)))
            return False
        except WriteError as error:
            if error.status != 404:
                raise
        body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": weight, "reclaimable": reclaimable}}
        try:
            self._call(f"create queue {name}", lambda: self.client.request_json(
                "POST", object_path(VOLCANO, "queues"), body=body))
        except WriteError as error:
            if error.status == 409:  # created meanwhile by someone else
                return False
            raise
        return True

    # -- ResourceClaims (DRA) --------------------------------------------------------------------

    def get_resource_claim(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        path = object_path(DRA, "resourceclaims", namespace=namespace, name=name)
        try:
            return self._call(f"get resourceclaim {namespace}/{name}",
                              lambda: self.client.request_json("GET", path))
        except WriteError as error:
            if error.status == 404:
                return None
            raise

    def update_resource_claim_status(self, claim: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the claim's ``status`` subresource; its ``resourceVersion`` guards the write
        (409 when the claim changed since it was read)."""
        meta = claim.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        path = object_path(DRA, "resourceclaims", namespace=namespace, name=name,
                           subresource="status")
        return self._call(f"update status of resourceclaim {namespace}/{name}",
                          lambda: self.client.request_json("PUT", path, body=dict(claim)))

    # -- nodes (node locks) ---------------------------------------------------------------------

    def get_node(self, name: str) -> dict[str, Any]:
        path = object_path(CORE, "nodes", name=name)
        return self._call(f"get node {name}", lambda: self.client.request_json("GET", path))

    def replace_node(self, node: dict[str, Any]) -> dict[str, Any]:
        """PUT the node as given; its ``metadata.resourceVersion`` guards against lost updates."""
        name = str((node.get("metadata") or {}).get("name") or "")
        if not name:
            raise WriteError("replace node: metadata.name is empty", status=400)
        path = object_path(CORE, "nodes", name=name)
        return self._call(f"replace node {name}",
                          lambda: self.client.request_json("PUT", path, body=node))

    # -- events ---------------------------------------------------------------------------------

    def record_event(self, *, involved: ObjectRef, type: str, reason: str, message: str,
                     related: ObjectRef | None = None) -> None:
        namespace = involved.namespace or "default"
        message = message[:EVENT_MESSAGE_LIMIT]
        key = (involved.kind, involved.namespace, involved.name, involved.uid, type, reason,
               message)
        now = self.clock()
        with self._seen_lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen.last <= EVENT_REPEAT_WINDOW:
                seen.count += 1
                seen.last = now
                self._seen.move_to_end(key)
                repeat: _SeenEvent | None = dataclasses.replace(seen)
            else:
                repeat = None
        if repeat is not None and self._bump_event(repeat, now):
            return
        name = f"{involved.name}.{time.time_ns():x}"
        stamp = rfc3339(now)
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": _reference(involved),
            "reason": reason, "message": message, "type": type,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
            "source": {"component": self.scheduler_name},
            "reportingComponent": self.scheduler_name, "reportingInstance": self.instance,
        }
        if related is not None:
            body["related"] = _reference(related)
        path = object_path(CORE, "events", namespace=namespace)
        self._call(f"record event {reason} on {involved.kind} {involved.name}",
                   lambda: self.client.request_json("POST", path, body=body))
        with self._seen_lock:
            self._seen[key] = _SeenEvent(name=name, namespace=namespace, count=1, last=now)
            while len(self._seen) > 4096:
                self._seen.popitem(last=False)

    def _bump_event(self, seen: _SeenEvent, now: float) -> bool:
        """Raise the count of an earlier identical event; False if it is gone (create anew)."""
        path = object_path(CORE, "events", namespace=seen.namespace, name=seen.name)
        body = {"count": seen.count, "lastTimestamp": rfc3339(now)}
        try:
            self._call(f"update event {seen.name}", lambda: self._patch(path, body, MERGE_PATCH))
        except WriteError as error:
            if error.status == 404:
                return False
            raise
        return True

    def _record_quietly(self, involved: ObjectRef, *, type: str, reason: str,
                        message: str, related: ObjectRef | None = None) -> None:
        """An event that accompanies a write that already succeeded: failing it only logs."""

        def write() -> None:
            self.record_event(involved=involved, type=type, reason=reason, message=message,
                              related=related)

        if self.background is not None:
            key = f"{involved.kind} {involved.namespace}/{involved.name} {involved.uid}"
            self.background((f"event {reason}", key), write)
            return
        try:
            write()
        except WriteError as error:
            _log.warning("cannot record event %s on %s/%s: %s", reason, involved.namespace,
                         involved.name, error)

    # -- plumbing -------------------------------------------------------------------------------

    def _status_of_post(self, path: str, body: Mapping[str, Any]) -> int:
        response = self.client.request("POST", path, body=body)
        try:
            response.drain_conn()
        finally:
            response.release_conn()
        return int(response.status)

    def _patch(self, path: str, body: Mapping[str, Any], content_type: str) -> dict[str, Any]:
        return self.client.request_json("PATCH", path, body=body, content_type=content_type)

    def _call(self, what: str, fn: Callable[[], T], *,
                 error: type[WriteError] = WriteError, policy: RetryPolicy | None = None) -> T:
        """Run ``fn`` under the retry policy; API failures become ``error`` with the status."""
        try:
            return (policy or self.retry).call(fn)
        except Exception as failure:
            status = status_of(failure)
            if status is None:
                raise
            if status == 409 and error is WriteError:
                error = ConflictError
            raise error(f"{what}: {_reason(failure)}", status=status) from failure


def _reference(ref: ObjectRef) -> dict[str, Any]:
    """An event's ``involvedObject`` / ``related`` (an ObjectReference)."""
    out: dict[str, Any] = {"kind": ref.kind, "name": ref.name, "apiVersion": ref.api_version}
    if ref.namespace:
        out["namespace"] = ref.namespace
    if ref.uid:
        out["uid"] = ref.uid
    return out


def _reason(failure: BaseException) -> str:
    """The API server's own message (from its ``Status`` body) when there is one."""
    if isinstance(failure, ApiError):
        if failure.message:
            return f"HTTP {failure.status}: {failure.message}"
        return f"HTTP {failure.status}: {failure.reason or ''}".rstrip(": ")
    return f"{type(failure).__name__}: {failure}"
