"""The web view's HTTP server: the pages and their JSON under ``/api/``, read-only.

It runs on the same bounded pool as ``/metrics`` (:class:`scheduler.httpserver`'s server: a
fixed number of worker threads, a cap on connections, idle connections closed), listens where
``--web-address`` says (``127.0.0.1`` when the address names no host), answers only ``GET``
and ``HEAD``, and serves nothing but the published view: what the scheduler's own reads
already show (queues, PodGroups, pods, nodes, HyperNodes), never Secrets, environment or conf.

Routes: ``/`` (overview), ``/queues``, ``/jobs``, ``/jobs/<namespace>/<name>``, ``/nodes``,
``/topology``, and the same under ``/api/`` as JSON (``/api/overview``, …). A request with the
``X-Fragment: main`` header gets only the page's ``<main>`` (the pages' refresh).

Readers share the loop's CPU, so an answer costs as little as it can: each is rendered once per
published picture and kept (with its gzip form, made at the first client that takes gzip);
it carries an ``ETag`` naming the picture, so a poll that finds the picture unchanged gets
``304 Not Modified`` and no body (``Cache-Control: no-cache`` makes browsers ask that way);
and requests are read by the lean wire of :mod:`scheduler.web.wire`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
import socketserver
import threading
import zlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from scheduler.httpserver import IDLE_TIMEOUT, _BoundedServer, parse_address
from scheduler.web.pages import PAGES, document, job, page_body
from scheduler.web.publish import Publisher
from scheduler.web.wire import (
    BadRequest,
    Request,
    accepts_gzip,
    etag_matches,
    read_request,
    response_head,
)

__all__ = ["WebServer", "api_payload", "web_address"]

_log = logging.getLogger(__name__)
_JSON = "application/json; charset=utf-8"
_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_GZIP_FROM = 1024
"""Bytes from which an answer is sent gzipped to a client that takes gzip."""
_HEADERS = (("Cache-Control", "no-cache"), ("Vary", "Accept-Encoding, X-Fragment"),
            ("X-Content-Type-Options", "nosniff"),
            ("Content-Security-Policy",
             "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
             "connect-src 'self'; img-src 'self' data:"))


def web_address(address: str) -> tuple[str, int]:
    """``":8081"`` → ``("127.0.0.1", 8081)``: the view stays on loopback unless told."""
    host, port = parse_address(address)
    if not address.rpartition(":")[0].strip("[]"):
        host = "127.0.0.1"
    return host, port


def api_payload(name: str, publisher: Publisher) -> tuple[int, Any]:
    """``(status, JSON value)`` of ``/api/<name>``."""
    view = publisher.ask()
    if view is None:
        return 503, {"error": "no view published yet: the first one follows the next cycle"}
    meta = {"cycle": view.cycle, "built_at": view.built_at}
    if name == "overview":
        return 200, {**meta, **view.data["overview"], **publisher.summary()}
    if name in ("queues", "jobs", "nodes", "topology"):
        return 200, {**meta, "items": view.data[name]}
    if name.startswith("jobs/"):
        found = _find_job(view.data, name[len("jobs/"):])
        if found is None:
            return 404, {"error": f"no job {name[len('jobs/'):]!r}"}
        return 200, {**meta, **found}
    return 404, {"error": f"no such resource {name!r}"}


def _find_job(data: Any, key: str) -> Any:
    namespace, _, job_name = unquote(key).partition("/")
    for entry in data["jobs"]:
        if entry["namespace"] == namespace and entry["name"] == job_name:
            return entry
    return None


class WebServer:
    """Serves the pages of ``publisher``'s view from a daemon thread."""

    def __init__(self, address: str, publisher: Publisher) -> None:
        self.address = web_address(address)
        self.publisher = publisher
        self.answers: dict[tuple[int, str, bool], _Answer] = {}
        """Rendered answers of the current picture (cleared when a new one is published)."""
        self.lock = threading.Lock()
        self.token = secrets.token_hex(4)
        """Tells this process's ETags from an earlier one's (picture numbers restart)."""
        self._server: _BoundedServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.address[0]}:{self.port}"

    def start(self) -> WebServer:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._server = _BoundedServer(self.address, Handler)  # type: ignore[arg-type]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                         daemon=True, name=f"web-{self.address[1]}").start()
        _log.info("serving the web view on %s", self.url)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def answer(self, request: Request) -> tuple[int, list[tuple[str, str]], bytes]:
        """Status, headers and body for ``request`` (a ``GET`` or ``HEAD``)."""
        path = unquote(request.target.split("?", 1)[0]).rstrip("/") or "/"
        fragment = request.headers.get("x-fragment") == "main"
        # A picture is immutable: each answer is rendered once per picture (at most one a
        # second), so many readers cost bytes sent, not renders (they share the loop's CPU).
        view = self.publisher.current()
        key = (view.cycle if view is not None else -1, path, fragment)
        found = self.answers.get(key)
        if found is None:
            found = self._render(path, fragment)
            if view is not None and found.status < 500:
                found.etag = f'"{self.token}-{view.cycle}{"-f" if fragment else ""}"'
            with self.lock:
                if self.answers and next(iter(self.answers))[0] != key[0]:
                    self.answers.clear()
                self.answers[key] = found
        else:
            self.publisher.ask()
        headers = list(_HEADERS)
        if found.etag is not None:
            gzipped = accepts_gzip(request) and len(found.body) >= _GZIP_FROM
            etag = found.etag[:-1] + '-gz"' if gzipped else found.etag
            headers.append(("ETag", etag))
            if found.status == 200 and etag_matches(request, etag):
                return 304, headers, b""
            if gzipped:
                headers.append(("Content-Encoding", "gzip"))
                return found.status, [("Content-Type", found.content_type), *headers], \
                    found.gzip()
        return found.status, [("Content-Type", found.content_type), *headers], found.body

    def _render(self, path: str, fragment: bool) -> _Answer:
        if path.startswith("/api/"):
            status, value = api_payload(path[len("/api/"):], self.publisher)
            return _Answer(status, json.dumps(value).encode(), _JSON)
        return self._page(path, fragment)

    def _page(self, path: str, fragment: bool) -> _Answer:
        publisher = self.publisher
        name = "overview" if path == "/" else path.lstrip("/")
        key = name.split("/", 1)[0]
        if key not in PAGES or (key != "jobs" and "/" in name):
            return _Answer(404, b"not found\n", _TEXT)
        view = publisher.ask()
        status = 200
        if view is None:
            body = ("<h1>Waiting for the first cycle</h1><p class=muted>The view is built "
                    "after the next scheduling cycle; this page refreshes itself.</p>")
        elif "/" in name:
            found = _find_job(view.data, name[len("jobs/"):])
            status = 200 if found is not None else 404
            body = job(found) if found is not None else "<h1>No such job</h1>"
        else:
            body = page_body(key, view.data, publisher.summary())
        if fragment:
            return _Answer(status, body.encode(), _HTML)
        footer = (f"cycle {view.cycle} · view built in {view.build_seconds * 1000:.1f} ms"
                  if view is not None else "")
        text = document(title=f"Lahar · {PAGES[key]}", sections=[(key, body)], active=key,
                        footer=footer)
        return _Answer(status, text.encode(), _HTML)


@dataclass(slots=True)
class _Answer:
    status: int
    body: bytes
    content_type: str
    etag: str | None = None
    """Set when the answer comes from a published picture (never for "no view yet")."""
    gzipped: bytes | None = None

    def gzip(self) -> bytes:
        if self.gzipped is None:  # two threads may both compress: same bytes, no harm
            packer = zlib.compressobj(5, zlib.DEFLATED, 31)  # 31: the gzip container
            self.gzipped = packer.compress(self.body) + packer.flush()
        return self.gzipped


class _Handler(socketserver.StreamRequestHandler):
    server_owner: WebServer
    timeout = IDLE_TIMEOUT  # an idle keep-alive connection is closed

    def setup(self) -> None:
        super().setup()
        with contextlib.suppress(OSError):  # head and body may go out as two writes
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        while True:
            try:
                request = read_request(self.rfile)
            except BadRequest as bad:
                self._send(bad.status, [("Content-Type", _TEXT)],
                           f"{bad.message}\n".encode(), keep_alive=False, head=False)
                return
            except OSError:  # idle timeout or reset
                return
            if request is None:
                return
            head = request.method == "HEAD"
            if request.method not in ("GET", "HEAD"):
                status, headers, body = 405, [("Content-Type", _TEXT), ("Allow", "GET, HEAD")], \
                    b"the web view is read-only: GET and HEAD only\n"
            else:
                try:
                    status, headers, body = self.server_owner.answer(request)
                except Exception:
                    _log.exception("serving %s failed", request.target[:200])
                    status, headers, body = 500, [("Content-Type", _TEXT)], b"internal error\n"
            try:
                self._send(status, headers, body, keep_alive=request.keep_alive, head=head)
            except OSError:
                return
            if not request.keep_alive:
                return

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes, *,
              keep_alive: bool, head: bool) -> None:
        top = response_head(status, headers, length=None if status == 304 else len(body),
                            keep_alive=keep_alive)
        if head or not body:
            self.wfile.write(top)
        elif len(body) < 65536:
            self.wfile.write(top + body)
        else:
            self.wfile.write(top)
            self.wfile.write(body)
