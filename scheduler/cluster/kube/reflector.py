"""List-then-watch mirrors of API collections, delivered as raw-dict events.

A :class:`Reflector` keeps one collection (nodes, pods, …) in step with the API server:

1. LIST; the answer's ``resourceVersion`` is the point the watch starts from. The first LIST asks
   for ``resourceVersion=0``, as client-go's reflectors do: the API server answers it from its
   watch cache, in one piece, without a read of etcd (the watch then catches up from the version
   the answer carries). A LIST after 410 Gone reads etcd, in pages of ``page_size``. Against
   what it delivered before, a re-list emits DELETED for objects that vanished (or were replaced
   under the same name by a new UID), ADDED for new ones and MODIFIED for the rest.
2. WATCH from that version with bookmarks on and a server-side timeout, advancing the version on
   every event and bookmark. A stream that ends or drops is resumed from the last version.
3. 410 Gone (an HTTP answer or an ERROR event) means the version was compacted away: LIST again.
4. Any other failure backs off with full jitter and tries again; the reflector never gives up.

Objects are delivered as the decoded JSON dicts, never through the ``kubernetes`` client's
models, and without ``metadata.managedFields``.

Collections of optional CRDs (Koordinator ``Device``, Volcano ``HyperNode`` and ``NodeShard``)
and of the DRA group (``resource.k8s.io/v1``, served from Kubernetes 1.34 on) answer 404 when
absent; that is logged once, counts as synced, and is looked at again after a while.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from scheduler.cluster.kube.client import KubeClient, QueryValue, loads_json, object_path
from scheduler.cluster.kube.firstlist import PAGE_SIZE, FirstList, first_page_query
from scheduler.cluster.kube.retry import status_of
from scheduler.cluster.kube.transport import Response

__all__ = [
    "DEVICES",
    "DRA_RESOURCES",
    "HYPERNODES",
    "NAMESPACES",
    "NODES",
    "NODESHARDS",
    "PODGROUPS",
    "PODS",
    "PRIORITY_CLASSES",
    "QUEUES",
    "RESOURCES",
    "Handler",
    "Reflector",
    "ReflectorGroup",
    "ResourceSpec",
    "WatchError",
    "iter_lines",
]

Handler = Callable[[str, dict[str, Any]], None]
"""Receives ``(event_type, obj)`` with event_type ADDED, MODIFIED or DELETED."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """One watched collection: the kind handed to the cache and where it lives."""

    kind: str
    prefix: str
    plural: str
    optional: bool = False
    label_selector: str | None = None
    field_selector: str | None = None

    @property
    def path(self) -> str:
        return object_path(self.prefix, self.plural)

    @property
    def api_version(self) -> str:
        return self.prefix.removeprefix("/apis/").removeprefix("/api/")


NODES = ResourceSpec("Node", "/api/v1", "nodes")
PODS = ResourceSpec("Pod", "/api/v1", "pods")
PRIORITY_CLASSES = ResourceSpec("PriorityClass", "/apis/scheduling.k8s.io/v1", "priorityclasses")
PODGROUPS = ResourceSpec("PodGroup", "/apis/scheduling.volcano.sh/v1beta1", "podgroups")
QUEUES = ResourceSpec("Queue", "/apis/scheduling.volcano.sh/v1beta1", "queues")
NAMESPACES = ResourceSpec("Namespace", "/api/v1", "namespaces")
DEVICES = ResourceSpec("Device", "/apis/scheduling.koordinator.sh/v1alpha1", "devices",
                       optional=True)
HYPERNODES = ResourceSpec("HyperNode", "/apis/topology.volcano.sh/v1alpha1", "hypernodes",
                          optional=True)
NODESHARDS = ResourceSpec("NodeShard", "/apis/shard.volcano.sh/v1alpha1", "nodeshards",
                          optional=True)
"""Watched only with ``--scheduler-sharding-mode`` hard or soft (not in :data:`RESOURCES`)."""
_DRA = "/apis/resource.k8s.io/v1"
DRA_RESOURCES: tuple[ResourceSpec, ...] = (
    ResourceSpec("DeviceClass", _DRA, "deviceclasses", optional=True),
    ResourceSpec("ResourceSlice", _DRA, "resourceslices", optional=True),
    ResourceSpec("ResourceClaim", _DRA, "resourceclaims", optional=True),
    ResourceSpec("ResourceClaimTemplate", _DRA, "resourceclaimtemplates", optional=True),
)
"""Dynamic Resource Allocation (Kubernetes 1.34+); a server without the group answers 404."""
RESOURCES: tuple[ResourceSpec, ...] = (
    NODES, PODS, PRIORITY_CLASSES, PODGROUPS, QUEUES, NAMESPACES, DEVICES, HYPERNODES,
    *DRA_RESOURCES)


class WatchError(Exception):
    """The watch stream carried an ERROR event other than 410."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class _Gone(Exception):
    """The resourceVersion we watch from is no longer available (410)."""


def iter_lines(response: Response) -> Iterator[bytes]:
    """Non-empty newline-delimited lines of a chunked streaming response, as they arrive."""
    buffer = b""
    for chunk in response.stream(None, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _strip(obj: dict[str, Any]) -> None:
    """Drop ``metadata.managedFields``: nothing here reads it, and on a real API server it is
    often the largest part of a pod (kube-scheduler's informers drop it too)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


def _meta(obj: dict[str, Any], field: str) -> str:
    return str((obj.get("metadata") or {}).get(field) or "")


class Reflector:
    """Mirrors one collection into ``handler`` calls; run it with :meth:`start`."""

    def __init__(self, *, client: KubeClient, resource: ResourceSpec, handler: Handler,
                 page_size: int = PAGE_SIZE, watch_timeout: int = 300,
                 backoff_initial: float = 0.5, backoff_max: float = 30.0,
                 missing_recheck: float = 300.0, rng: random.Random | None = None,
                 first_page: FirstList | None = None) -> None:
        """``first_page``: this collection's first page, already sent
        (:mod:`~scheduler.cluster.kube.firstlist`); taken in place of the first request when
        it was sent with the same query, as if the reflector had sent it."""
        self.client = client
        self.resource = resource
        self.handler = handler
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.missing_recheck = missing_recheck
        self._rng = rng or random.Random()
        self._store: dict[str, dict[str, Any]] = {}
        self._resource_version = ""
        self._synced = threading.Event()
        self._response: Response | None = None
        self._response_lock = threading.Lock()
        self._first_page = first_page
        self.lists = 0
        """How many complete LISTs were done (re-lists included)."""

    @property
    def has_synced(self) -> bool:
        """True once the first LIST has been delivered (or the optional CRD is absent)."""
        return self._synced.is_set()

    @property
    def resource_version(self) -> str:
        return self._resource_version

    def keys(self) -> list[str]:
        """``namespace/name`` (or ``name``) of every object currently mirrored."""
        return sorted(self._store)

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run in a daemon thread until ``stop`` is set."""
        thread = threading.Thread(target=self.run, args=(stop,), daemon=True,
                                  name=f"reflector-{self.resource.plural}")
        thread.start()
        return thread

    def interrupt(self) -> None:
        """Shut the current watch connection so a blocked read returns at once."""
        with self._response_lock:
            response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # already closed: nothing to unblock
                response.shutdown()

    def run(self, stop: threading.Event) -> None:
        """List, then watch until ``stop``; re-list on 410, back off on other failures."""
        failures = 0
        gone_in_a_row = 0
        need_list = True
        consistent = False
        while not stop.is_set():
            try:
                if need_list:
                    if not self._list(consistent=consistent):
                        stop.wait(self.missing_recheck)
                        continue
                    need_list = False
                self._watch(stop)
                failures = gone_in_a_row = 0
            except _Gone:
                _log.info("%s: resourceVersion %s expired, re-listing",
                          self.resource.plural, self._resource_version)
                need_list = consistent = True
                gone_in_a_row += 1
                if gone_in_a_row > 1:  # the fresh list was already too old: do not spin
                    stop.wait(self._backoff(gone_in_a_row - 1))
            except Exception as error:  # any failure: back off, then resume
                if stop.is_set():
                    break
                if status_of(error) == 410 and not need_list:
                    need_list = consistent = True
                    continue
                failures += 1
                delay = self._backoff(failures)
                _log.warning("%s: %s failed (%s); retrying in %.2fs", self.resource.plural,
                             "list" if need_list else "watch", _describe(error), delay)
                stop.wait(delay)

    def _backoff(self, failures: int) -> float:
        ceiling = min(self.backoff_max, self.backoff_initial * 2 ** min(failures - 1, 30))
        return self._rng.uniform(0, ceiling)

    def _list(self, *, consistent: bool = False) -> bool:
        """Full LIST; False when an optional collection does not exist. ``consistent`` reads
        etcd (after 410 Gone); otherwise the first page may come from the watch cache."""
        items: dict[str, dict[str, Any]] = {}
        token: str | None = None
        version = ""
        while True:
            query: dict[str, QueryValue]
            if token is None and not consistent:  # the first page may take the cache's version
                query = first_page_query(limit=self.page_size,
                                         label_selector=self.resource.label_selector,
                                         field_selector=self.resource.field_selector)
            else:  # a continued page may not name a version
                query = {"limit": self.page_size, "continue": token, "resourceVersion": None,
                         "labelSelector": self.resource.label_selector,
                         "fieldSelector": self.resource.field_selector}
            sent, self._first_page = self._first_page, None
            try:
                if sent is not None and sent.path == self.resource.path and sent.query == query:
                    page = sent.result()
                else:
                    page = self.client.request_json("GET", self.resource.path, query=query)
            except Exception as error:
                status = status_of(error)
                if status == 404 and self.resource.optional:
                    if not self._synced.is_set():
                        _log.info("%s: %s not served (CRD not installed); skipping",
                                  self.resource.plural, self.resource.api_version)
                    self._synced.set()
                    return False
                if status == 410 and token is not None:  # continue token expired: start over
                    items, token = {}, None
                    continue
                raise
            for item in page.get("items") or []:
                _strip(item)
                item.setdefault("kind", self.resource.kind)
                item.setdefault("apiVersion", self.resource.api_version)
                items[_key(item)] = item
            meta = page.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            token = meta.get("continue") or None
            if token is None:
                break
        self._replace(items, version)
        return True

    def _replace(self, items: dict[str, dict[str, Any]], version: str) -> None:
        previous = self._store
        self._store = items
        self._resource_version = version
        for key, gone in previous.items():
            current = items.get(key)
            if current is None or _meta(current, "uid") != _meta(gone, "uid"):
                self._deliver("DELETED", gone)
        for key, obj in items.items():
            before = previous.get(key)
            same = before is not None and _meta(obj, "uid") == _meta(before, "uid")
            self._deliver("MODIFIED" if same else "ADDED", obj)
        self.lists += 1
        self._synced.set()

    def _watch(self, stop: threading.Event) -> None:
        """One watch request from the current resourceVersion, consumed until it ends."""
        query: dict[str, QueryValue] = {
            "watch": True, "allowWatchBookmarks": True,
            "resourceVersion": self._resource_version,
            "timeoutSeconds": self.watch_timeout,
            "labelSelector": self.resource.label_selector,
            "fieldSelector": self.resource.field_selector}
        response = self.client.request("GET", self.resource.path, query=query,
                                       timeout=(5.0, self.watch_timeout + 30.0))
        with self._response_lock:
            self._response = response
        try:
            for line in iter_lines(response):
                if stop.is_set():
                    return
                self._on_event(loads_json(line))
        finally:
            with self._response_lock:
                self._response = None
            response.release_conn()

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "BOOKMARK":
            self._resource_version = _meta(obj, "resourceVersion") or self._resource_version
            return
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise _Gone(obj.get("message", "gone"))
            raise WatchError(str(obj.get("message") or obj), status=code)
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            _log.debug("%s: ignoring watch event %r", self.resource.plural, kind)
            return
        version = _meta(obj, "resourceVersion")
        if version:
            self._resource_version = version
        _strip(obj)
        if kind == "DELETED":
            self._store.pop(_key(obj), None)
        else:
            self._store[_key(obj)] = obj
        self._deliver(kind, obj)

    def _deliver(self, event_type: str, obj: dict[str, Any]) -> None:
        try:
            self.handler(event_type, obj)
        except Exception:  # a handler bug must not stop the mirror
            _log.exception("%s: handler failed on %s %s", self.resource.plural, event_type,
                           _key(obj))


class ReflectorGroup:
    """Several reflectors started and stopped together, with a combined sync flag."""

    def __init__(self, reflectors: list[Reflector]) -> None:
        self.reflectors = reflectors
        self.threads: list[threading.Thread] = []

    @property
    def has_synced(self) -> bool:
        return all(reflector.has_synced for reflector in self.reflectors)

    def start(self, stop: threading.Event) -> None:
        self.threads = [reflector.start(stop) for reflector in self.reflectors]

    def wait_for_sync(self, stop: threading.Event, *, timeout: float | None = None,
                      poll: float = 0.05) -> bool:
        """Block until every reflector synced; False on timeout or when ``stop`` is set."""
        waited = 0.0
        while not self.has_synced:
            if stop.wait(poll):
                return False
            waited += poll
            if timeout is not None and waited >= timeout:
                return False
        return True

    def interrupt(self) -> None:
        for reflector in self.reflectors:
            reflector.interrupt()

    def join(self, timeout: float = 5.0) -> None:
        for thread in self.threads:
            thread.join(timeout)


def _describe(error: BaseException) -> str:
    status = status_of(error)
    if status:
        return f"HTTP {status}"
    return f"{type(error).__name__}: {error}"
