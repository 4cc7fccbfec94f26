"""The web view's HTTP server: the pages and their JSON under ``/api/``, read-only.

It runs on the same bounded pool as ``/metrics`` (:class:`scheduler.httpserver`'s server: a
fixed number of worker threads, a cap on connections, idle connections closed), listens where
``--web-address`` says (``127.0.0.1`` when the address names no host), answers only ``GET``
and ``HEAD``, and serves nothing but the published view: what the scheduler's own reads
already show (queues, PodGroups, pods, nodes, HyperNodes), never Secrets, environment or conf.

Routes: ``/`` (overview), ``/queues``, ``/jobs``, ``/jobs/<namespace>/<name>``, ``/nodes``,
``/topology``, and the same under ``/api/`` as JSON (``/api/overview``, …). A request with the
``X-Fragment: main`` header gets only the page's ``<main>`` (the pages' refresh).
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from scheduler.httpserver import IDLE_TIMEOUT, _BoundedServer, parse_address
from scheduler.web.pages import PAGES, document, job, page_body
from scheduler.web.publish import Publisher

__all__ = ["WebServer", "api_payload", "web_address"]

_log = logging.getLogger(__name__)
_JSON = "application/json; charset=utf-8"
_HTML = "text/html; charset=utf-8"
_HEADERS = (("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
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
        self.answers: dict[tuple[int, str, bool], tuple[int, bytes, str]] = {}
        """Rendered answers of the current picture (cleared when a new one is published)."""
        self.lock = threading.Lock()
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

        self._server = _BoundedServer(self.address, Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                         daemon=True, name=f"web-{self.address[1]}").start()
        _log.info("serving the web view on %s", self.url)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Handler(BaseHTTPRequestHandler):
    server_owner: WebServer
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = unquote(self.path.split("?", 1)[0]).rstrip("/") or "/"
        owner = self.server_owner
        publisher = owner.publisher
        # A picture is immutable: each answer is rendered once per picture (at most one a
        # second), so many readers cost bytes sent, not renders (they share the loop's CPU).
        view = publisher.current()
        key = (view.cycle if view is not None else -1, path,
               self.headers.get("X-Fragment") == "main")
        try:
            cached = owner.answers.get(key)
            if cached is None:
                if path.startswith("/api/"):
                    status, value = api_payload(path[len("/api/"):], publisher)
                    cached = (status, json.dumps(value).encode(), _JSON)
                else:
                    cached = self._page(path)
                with owner.lock:
                    if owner.answers and next(iter(owner.answers))[0] != key[0]:
                        owner.answers.clear()
                    owner.answers[key] = cached
            else:
                publisher.ask()
            self._reply(*cached)
        except Exception:
            _log.exception("serving %s failed", path)
            self._reply(500, b"internal error\n", "text/plain; charset=utf-8")

    def _page(self, path: str) -> tuple[int, bytes, str]:
        publisher = self.server_owner.publisher
        name = "overview" if path == "/" else path.lstrip("/")
        key = name.split("/", 1)[0]
        if key not in PAGES or (key != "jobs" and "/" in name):
            return 404, b"not found\n", "text/plain; charset=utf-8"
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
        if self.headers.get("X-Fragment") == "main":
            return status, body.encode(), _HTML
        footer = (f"cycle {view.cycle} · view built in {view.build_seconds * 1000:.1f} ms"
                  if view is not None else "")
        text = document(title=f"Lahar · {PAGES[key]}", sections=[(key, body)], active=key,
                        footer=footer)
        return status, text.encode(), _HTML

    def _reply(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for header, value in _HEADERS:
            self.send_header(header, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
