"""A small Kubernetes API server double: the adapter's contract tests and a bare e2e target.

It speaks real HTTP/1.1 on 127.0.0.1 (an ephemeral port) so the official client's transport,
headers and chunked watch streams are exercised for real. It keeps objects per collection, a
global resourceVersion counter and an event history, and implements what the adapter uses:
LIST (with ``limit``/``continue``), WATCH from a resourceVersion (bookmarks, 410 after
compaction as an HTTP answer or an ERROR event), GET/POST/PUT (resourceVersion conflicts)/
PATCH (JSON merge and a strategic merge that merges ``conditions`` by ``type``)/DELETE, and the
pod ``binding`` and ``eviction`` subresources.

Tests script failures with :meth:`ApiServerDouble.fail`, drop or hold watch streams, emit
bookmarks and compact history, and inspect :attr:`ApiServerDouble.requests`.

With ``collections=STANDALONE_COLLECTIONS`` it also acts as a bare API server for the e2e suite
(``python -m tests.apiserver``): Namespaces (deleting one deletes what lives in it),
``generateName``, label and field selectors, Node and Pod status subresources, and the
``PodScheduled`` condition a successful Binding sets.

Custom objects (PodGroup, Queue, Device, HyperNode, NodeShard) are checked against the CRD schemas of
``conf/crds/`` on every write and refused with 422 as a real server refuses them.
"""

from __future__ import annotations

import contextlib
import copy
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from tests.apiserver.crdschema import crd_errors, invalid_message

CLUSTER_SCOPED = {"nodes", "namespaces", "priorityclasses", "queues", "devices",
                  "customresourcedefinitions", "hypernodes", "deviceclasses", "resourceslices",
                  "nodeshards"}
KINDS = {"nodes": "Node", "pods": "Pod", "priorityclasses": "PriorityClass",
         "podgroups": "PodGroup", "queues": "Queue", "devices": "Device", "leases": "Lease",
         "events": "Event", "namespaces": "Namespace", "hypernodes": "HyperNode",
         "nodeshards": "NodeShard",
         "deviceclasses": "DeviceClass", "resourceslices": "ResourceSlice",
         "resourceclaims": "ResourceClaim", "resourceclaimtemplates": "ResourceClaimTemplate"}
DEFAULT_COLLECTIONS = ("v1/nodes", "v1/pods", "v1/events", "v1/namespaces",
                       "scheduling.k8s.io/v1/priorityclasses",
                       "scheduling.volcano.sh/v1beta1/podgroups",
                       "scheduling.volcano.sh/v1beta1/queues", "coordination.k8s.io/v1/leases")
DEVICES = "scheduling.koordinator.sh/v1alpha1/devices"
HYPERNODES = "topology.volcano.sh/v1alpha1/hypernodes"
NODESHARDS = "shard.volcano.sh/v1alpha1/nodeshards"
DRA_COLLECTIONS = tuple(f"resource.k8s.io/v1/{plural}" for plural in (
    "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"))
STANDALONE_COLLECTIONS = (*DEFAULT_COLLECTIONS, DEVICES, HYPERNODES, NODESHARDS,
                          *DRA_COLLECTIONS)


def is_namespaced(plural: str) -> bool:
    return plural not in CLUSTER_SCOPED


@dataclass(slots=True)
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass(slots=True)
class Fault:
    method: str
    pattern: str
    status: int
    times: int
    watch: bool | None = None
    user_agent: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Target:
    collection: str
    group_version: str
    plural: str
    namespace: str
    name: str
    subresource: str


class HttpError(Exception):
    def __init__(self, code: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.reason = code, message, reason or _REASONS.get(code, "")


_REASONS = {400: "BadRequest", 404: "NotFound", 405: "MethodNotAllowed", 409: "Conflict",
            410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable"}


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def status_body(code: int, message: str, reason: str = "") -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason or _REASONS.get(code, ""), "code": code}


def merge_patch(target: Any, patch: Any, *, conditions_by_type: bool = False) -> Any:
    """RFC 7386 JSON merge patch; with ``conditions_by_type``, ``conditions`` lists merge
    element-wise by ``type`` as a strategic merge patch does."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif conditions_by_type and key == "conditions" and isinstance(value, list):
            merged = [dict(c) for c in result.get(key) or []]
            for condition in value:
                for index, existing in enumerate(merged):
                    if existing.get("type") == condition.get("type"):
                        merged[index] = merge_patch(existing, condition)
                        break
                else:
                    merged.append(copy.deepcopy(condition))
            result[key] = merged
        else:
            result[key] = merge_patch(result.get(key), value,
                                      conditions_by_type=conditions_by_type)
    return result


def strategic_merge(target: Any, patch: Any) -> Any:
    """Merge patch, except ``conditions`` lists merge element-wise by ``type``."""
    return merge_patch(target, patch, conditions_by_type=True)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up (a stopped watch, a killed scheduler) are not worth a traceback."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class ApiServerDouble:
    """State, scripting hooks and the HTTP server; use as a context manager or start/stop."""

    def __init__(self, *, collections: tuple[str, ...] = DEFAULT_COLLECTIONS,
                 status_subresources: tuple[str, ...] = ("queues", "pods"),
                 max_watch_seconds: float = 10.0, port: int = 0) -> None:
        self.cond = threading.Condition()
        self.resource_version = 100
        self.objects: dict[str, dict[str, dict[str, Any]]] = {c: {} for c in collections}
        self.status_subresources = set(status_subresources)
        self.history: list[tuple[int, str, str, dict[str, Any]]] = []
        self.compacted = 0
        self.gone_as_event = True
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self.pdb_blocked: set[str] = set()
        self.graceful_evictions = False
        """When True an eviction only marks the pod terminating (``deletionTimestamp``), as a
        pod with a grace period on a real cluster; :meth:`delete` then plays the kubelet."""
        self.max_watch_seconds = max_watch_seconds
        self.port = port
        self.validate_crds = True
        """Refuse (422) custom objects that break their CRD's schema in ``conf/crds/``, as a
        real server does (:mod:`tests.apiserver.crdschema`); off only for a test that stores
        an object a server would refuse, to see how the scheduler reads it."""
        self._drops = 0
        self._drop_points: list[int] = []
        self._abrupt = False
        self._held = False
        self._closing = False
        self._server: ThreadingHTTPServer | None = None
        self._streams: set[socket.socket] = set()
        self._sorted: dict[str, tuple[int, list[str]]] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> str:
        from tests.apiserver.handler import make_handler

        self._server = _QuietServer(("127.0.0.1", self.port), make_handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        with self.cond:
            self._closing = True
            self.cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for sock in list(self._streams):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> ApiServerDouble:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ------------------------------------------------------------------------------

    def serve(self, collection: str) -> None:
        with self.cond:
            self.objects.setdefault(collection, {})

    def fail(self, method: str, pattern: str, status: int, *, times: int = 1,
             watch: bool | None = None, user_agent: str | None = None,
             headers: dict[str, str] | None = None) -> None:
        """Answer the next ``times`` matching requests with ``status``."""
        with self.cond:
            self.faults.append(Fault(method.upper(), pattern, status, times, watch, user_agent,
                                     headers or {}))

    def drop_watches(self, *, abrupt: bool = False) -> None:
        """End every open watch stream (cleanly, or by cutting the connection)."""
        with self.cond:
            self._drops += 1
            self._drop_points.append(len(self.history))
            self._abrupt = abrupt
            self.cond.notify_all()

    @contextlib.contextmanager
    def watches_held(self) -> Iterator[None]:
        """Drop open watches and make new ones wait until the block ends."""
        with self.cond:
            self._held = True
        self.drop_watches()
        try:
            yield
        finally:
            with self.cond:
                self._held = False
                self.cond.notify_all()

    def compact(self, *, as_event: bool = True) -> None:
        """Forget history: watching from any version older than now answers 410."""
        with self.cond:
            self.compacted = self.resource_version
            self.gone_as_event = as_event

    def bookmark(self) -> int:
        """Send a BOOKMARK at the current resourceVersion to watches that asked for them."""
        with self.cond:
            self.resource_version += 1
            version = self.resource_version
            self.history.append((version, "*", "BOOKMARK",
                                 {"metadata": {"resourceVersion": str(version)}}))
            self.cond.notify_all()
            return version

    def requests_to(self, method: str, pattern: str) -> list[Recorded]:
        with self.cond:
            return [r for r in self.requests
                    if r.method == method.upper() and re.search(pattern, r.path)]

    # -- object store ---------------------------------------------------------------------------

    def create(self, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.cond:
            return self._create(collection, copy.deepcopy(obj))

    def update(self, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.cond:
            key = _key(obj)
            stored = copy.deepcopy(obj)
            stored["metadata"]["uid"] = self.objects[collection][key]["metadata"]["uid"]
            return self._commit(collection, key, stored, "MODIFIED")

    def delete(self, collection: str, key: str) -> None:
        with self.cond:
            self._delete(collection, key)

    def sorted_keys(self, collection: str) -> list[str]:
        """The collection's keys in order, recomputed only after a change (under the lock)."""
        size = len(self.objects[collection])
        cached = self._sorted.get(collection)
        if cached is None or cached[0] != self.resource_version or len(cached[1]) != size:
            cached = (self.resource_version, sorted(self.objects[collection]))
            self._sorted[collection] = cached
        return cached[1]

    def populate(self, collection: str, objects: list[dict[str, Any]]) -> None:
        """Store many objects at once, as if created before anyone watched: no history, no
        copies (for scale benchmarks)."""
        with self.cond:
            self.resource_version += 1
            version = str(self.resource_version)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            store = self.objects[collection]
            for obj in objects:
                meta = obj.setdefault("metadata", {})
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", stamp)
                meta["resourceVersion"] = version
                store[_key(obj)] = obj
            self.compacted = max(self.compacted, self.resource_version)
            self.cond.notify_all()

    def get(self, collection: str, key: str) -> dict[str, Any] | None:
        with self.cond:
            obj = self.objects[collection].get(key)
            return copy.deepcopy(obj) if obj is not None else None

    def _create(self, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        if not meta.get("name"):
            raise HttpError(422, "metadata.name: Required value", "Invalid")
        key = _key(obj)
        if key in self.objects[collection]:
            raise HttpError(409, f"{collection} \"{key}\" already exists", "AlreadyExists")
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        if collection == "v1/namespaces":
            obj.setdefault("status", {})["phase"] = "Active"
        return self._commit(collection, key, obj, "ADDED")

    def _commit(self, collection: str, key: str, obj: dict[str, Any],
                event: str) -> dict[str, Any]:
        if self.validate_crds:
            errors = crd_errors(collection, obj)
            if errors:
                raise HttpError(422, invalid_message(collection, obj, errors), "Invalid")
        self.resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        self.objects[collection][key] = obj
        self.history.append((self.resource_version, collection, event, copy.deepcopy(obj)))
        self.cond.notify_all()
        return copy.deepcopy(obj)

    def _delete(self, collection: str, key: str) -> dict[str, Any]:
        obj = self.objects[collection].pop(key, None)
        if obj is None:
            raise HttpError(404, f"{collection} \"{key}\" not found")
        self.resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        self.history.append((self.resource_version, collection, "DELETED", copy.deepcopy(obj)))
        self.cond.notify_all()
        if collection == "v1/namespaces":  # what the namespace controller does, at once
            for other, objects in self.objects.items():
                for member in [k for k in objects if k.startswith(f"{key}/")]:
                    self._delete(other, member)
        return obj

    # -- request handling (called by the handler under no lock) --------------------------------

    def route(self, path: str) -> Target:
        segments = [s for s in path.split("/") if s]
        if segments[:1] == ["api"]:
            group_version, rest = segments[1], segments[2:]
        elif segments[:1] == ["apis"] and len(segments) >= 3:
            group_version, rest = f"{segments[1]}/{segments[2]}", segments[3:]
        else:
            raise HttpError(404, f"no route for {path}")
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise HttpError(404, f"no route for {path}")
        collection = f"{group_version}/{rest[0]}"
        if collection not in self.objects:
            raise HttpError(404, f"the server could not find the requested resource ({path})")
        return Target(collection, group_version, rest[0], namespace,
                      rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else "")

    def take_fault(self, request: Recorded, is_watch: bool) -> Fault | None:
        with self.cond:
            for fault in self.faults:
                if (fault.times > 0 and fault.method == request.method
                        and re.search(fault.pattern, request.path)
                        and (fault.watch is None or fault.watch == is_watch)
                        and (fault.user_agent is None
                             or request.headers.get("user-agent") == fault.user_agent)):
                    fault.times -= 1
                    return fault
        return None
