"""The HTTP side of the API server double: request parsing, verbs, subresources, watch streams."""

from __future__ import annotations

import bisect
import copy
import itertools
import json
import socket
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.apiserver.selectors import Selector
from tests.apiserver.store import (
    KINDS,
    ApiServerDouble,
    HttpError,
    Recorded,
    Target,
    is_namespaced,
    merge_patch,
    status_body,
    strategic_merge,
)

SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


def make_handler(double: ApiServerDouble) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.double = double
    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle's algorithm the body then waits for the
    # client's delayed ACK (about 40 ms per request on a kept-alive connection).
    disable_nagle_algorithm = True
    double: ApiServerDouble

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    # -- plumbing -------------------------------------------------------------------------------

    def _handle(self) -> None:
        split = urlsplit(self.path)
        query = dict(parse_qsl(split.query))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = Recorded(self.command, split.path, query, headers,
                           json.loads(raw) if raw else None)
        with self.double.cond:
            self.double.requests.append(request)
        is_watch = query.get("watch") in ("true", "1")
        try:
            fault = self.double.take_fault(request, is_watch)
            if fault is not None:
                self._send(fault.status, status_body(fault.status, f"injected {fault.status}"),
                           fault.headers)
                return
            if split.path == "/version":
                self._send(200, {"major": "1", "minor": "34", "gitVersion": "v1.34.0-double"})
                return
            target = self.double.route(split.path)
            if self.command == "GET" and not target.name:
                if is_watch:
                    self._watch(target, query)
                else:
                    self._send(200, self._list(target, query))
                return
            code, payload = self._dispatch(target, request)
            self._send(code, payload)
        except HttpError as error:
            self._send(error.code, status_body(error.code, error.message, error.reason))

    def _send(self, code: int, payload: dict[str, Any],
              headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # -- collections ----------------------------------------------------------------------------

    def _list(self, target: Target, query: dict[str, str]) -> dict[str, Any]:
        """One page; the continue token is ``<version>:<position in the sorted keys>``.

        Only the page's objects are visited, so paging through 100,000 pods stays linear.
        """
        double = self.double
        selector = Selector.from_query(query)
        limit = int(query.get("limit") or 0)
        if query.get("resourceVersion") == "0" and not query.get("continue"):
            limit = 0  # served from the watch cache: a kube-apiserver ignores the limit
        offset = 0
        with double.cond:
            version = double.resource_version
            if query.get("continue"):
                snapshot, start = query["continue"].split(":")
                version, offset = int(snapshot), int(start)
            objects = double.objects[target.collection]
            keys = double.sorted_keys(target.collection)
            prefix = target.namespace + "/" if target.namespace else ""
            page: list[dict[str, Any]] = []
            position = offset
            while position < len(keys) and not (limit and len(page) >= limit):
                key = keys[position]
                position += 1
                obj = objects.get(key)
                if obj is not None and key.startswith(prefix) and selector.matches(obj):
                    page.append(dict(obj))  # stored objects are replaced, never changed
            more = bool(limit) and any(
                key.startswith(prefix) and selector.matches(objects[key])
                for key in itertools.islice(keys, position, None))
        if target.group_version == "v1":  # built-in lists leave kind out of their items
            for item in page:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return {"kind": KINDS.get(target.plural, "Object") + "List",
                "apiVersion": target.group_version,
                "metadata": {"resourceVersion": str(version),
                             "continue": f"{version}:{position}" if more else ""},
                "items": page}

    def _watch(self, target: Target, query: dict[str, str]) -> None:
        double = self.double
        timeout = min(float(query.get("timeoutSeconds") or double.max_watch_seconds),
                      double.max_watch_seconds)
        with double.cond:
            while double._held and not double._closing:
                double.cond.wait(0.05)
            start = query.get("resourceVersion") or ""
            version = int(start) if start else double.resource_version
            gone = version < double.compacted
            drops = double._drops
        if gone and not double.gone_as_event:
            raise HttpError(410, f"too old resource version: {version} ({double.compacted})")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        double._streams.add(self.connection)
        try:
            if gone:
                self._chunk({"type": "ERROR", "object": status_body(
                    410, f"too old resource version: {version} ({double.compacted})")})
            elif self._stream(target, query, version, drops, time.monotonic() + timeout):
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            double._streams.discard(self.connection)

    def _stream(self, target: Target, query: dict[str, str], version: int, drops: int,
                deadline: float) -> bool:
        """Send events after ``version`` until timeout or a drop; True when cut abruptly."""
        double = self.double
        bookmarks = query.get("allowWatchBookmarks") == "true"
        selector = Selector.from_query(query)
        with double.cond:
            position = bisect.bisect_right(double.history, version, key=lambda e: e[0])
        while True:
            with double.cond:
                while (position >= len(double.history) and drops == double._drops
                       and not double._closing and time.monotonic() < deadline):
                    double.cond.wait(max(deadline - time.monotonic(), 0.001))
                dropped, abrupt = drops != double._drops, double._abrupt
                # A dropped stream never carries what happened after the drop.
                end = double._drop_points[drops] if dropped else len(double.history)
                fresh = double.history[position:max(end, position)]
                position = max(end, position)
                closing = double._closing
            for _, collection, kind, obj in fresh:
                if kind == "BOOKMARK":
                    if bookmarks:
                        self._chunk({"type": "BOOKMARK", "object": {
                            "kind": KINDS.get(target.plural, "Object"),
                            "apiVersion": target.group_version, "metadata": obj["metadata"]}})
                elif collection == target.collection and (
                        not target.namespace
                        or obj["metadata"].get("namespace") == target.namespace) and (
                        selector.matches(obj)):
                    self._chunk({"type": kind, "object": obj})
            if dropped and abrupt:
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return True
            if dropped or closing or time.monotonic() >= deadline:
                return False

    # -- objects --------------------------------------------------------------------------------

    def _dispatch(self, target: Target, request: Recorded) -> tuple[int, dict[str, Any]]:
        double, body = self.double, request.body
        key = f"{target.namespace}/{target.name}" if is_namespaced(target.plural) else target.name
        if target.subresource == "status" and target.plural not in double.status_subresources:
            raise HttpError(404, f"{target.plural} has no status subresource")
        with double.cond:
            objects = double.objects[target.collection]
            if self.command == "POST" and not target.name:
                if is_namespaced(target.plural):
                    body.setdefault("metadata", {})["namespace"] = target.namespace
                return 201, double._create(target.collection, body)
            existing = objects.get(key)
            if existing is None:
                raise HttpError(404, f'{target.plural} "{target.name}" not found')
            if self.command == "GET":
                return 200, copy.deepcopy(existing)
            if self.command == "DELETE":
                return 200, double._delete(target.collection, key)
            if self.command == "POST" and target.subresource == "binding":
                return self._bind(target, key, existing, body)
            if self.command == "POST" and target.subresource == "eviction":
                return self._evict(target, key, existing, body)
            if self.command == "PUT":
                return 200, self._replace(target, key, existing, body)
            if self.command == "PATCH":
                return 200, self._patch(target, key, existing, request)
        raise HttpError(405, f"{self.command} {request.path} not supported")

    def _replace(self, target: Target, key: str, existing: dict[str, Any],
                 body: dict[str, Any]) -> dict[str, Any]:
        sent = (body.get("metadata") or {}).get("resourceVersion")
        if sent and sent != existing["metadata"]["resourceVersion"]:
            raise HttpError(409, f'Operation cannot be fulfilled on {target.plural} '
                                 f'"{target.name}": the object has been modified; please apply '
                                 'your changes to the latest version and try again')
        if target.subresource == "status":
            updated = copy.deepcopy(existing)
            updated["status"] = body.get("status")
        else:
            updated = copy.deepcopy(body)
            updated["metadata"]["uid"] = existing["metadata"]["uid"]
        return self.double._commit(target.collection, key, updated, "MODIFIED")

    def _patch(self, target: Target, key: str, existing: dict[str, Any],
               request: Recorded) -> dict[str, Any]:
        content_type = request.headers.get("content-type", "")
        patch = request.body or {}
        if target.subresource == "status":
            patch = {"status": patch.get("status")}
        elif target.plural in self.double.status_subresources:
            patch = {k: v for k, v in patch.items() if k != "status"}  # ignored on the object
        if content_type.startswith("application/merge-patch+json"):
            updated = merge_patch(existing, patch)
        elif content_type.startswith("application/strategic-merge-patch+json"):
            updated = strategic_merge(existing, patch)
        else:
            raise HttpError(415, f"unsupported patch type {content_type!r}")
        updated["metadata"]["uid"] = existing["metadata"]["uid"]
        return self.double._commit(target.collection, key, updated, "MODIFIED")

    def _bind(self, target: Target, key: str, pod: dict[str, Any],
              body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        meta = body.get("metadata") or {}
        if meta.get("name") != target.name:
            raise HttpError(400, "expected binding name to match the pod name")
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            raise HttpError(409, f'pod {target.name} is already assigned to node "{node}"')
        if meta.get("uid") and meta["uid"] != pod["metadata"]["uid"]:
            raise HttpError(409, "Precondition failed: UID in precondition does not match")
        bound = copy.deepcopy(pod)
        bound.setdefault("spec", {})["nodeName"] = body["target"]["name"]
        if meta.get("annotations"):
            bound["metadata"].setdefault("annotations", {}).update(meta["annotations"])
        # As the API server's binding registry does: PodScheduled=True with the binding.
        conditions = [c for c in (bound.setdefault("status", {}).get("conditions") or [])
                      if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True",
                           "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                               time.gmtime())})
        bound["status"]["conditions"] = conditions
        self.double._commit(target.collection, key, bound, "MODIFIED")
        return 201, dict(SUCCESS, code=201)

    def _evict(self, target: Target, key: str, pod: dict[str, Any],
               body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if key in self.double.pdb_blocked:
            raise HttpError(429, "Cannot evict pod as it would violate the pod's disruption "
                                 "budget.")
        wanted = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if wanted and wanted != pod["metadata"]["uid"]:
            raise HttpError(409, "Precondition failed: UID in precondition does not match")
        if self.double.graceful_evictions:
            if not pod["metadata"].get("deletionTimestamp"):
                terminating = copy.deepcopy(pod)
                terminating["metadata"]["deletionTimestamp"] = time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                terminating["metadata"]["deletionGracePeriodSeconds"] = 30
                self.double._commit(target.collection, key, terminating, "MODIFIED")
        else:
            self.double._delete(target.collection, key)
        return 201, dict(SUCCESS, code=201)
