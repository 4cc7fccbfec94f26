"""A small HTTP server for ``/metrics``, ``/healthz`` and ``/readyz``, on a bounded pool.

Probes are callables so the server knows nothing about the scheduler: ``/healthz`` (alias
``/livez``) answers whether the process is alive and its loop not wedged, ``/readyz`` whether the
caches are synced (or the replica is a healthy standby). ``/metrics`` serves
``scheduler.metrics.REGISTRY``. Volcano serves metrics (``--listen-address``) and health
(``--healthz-address``) on separate ports; one :class:`HttpServer` per address covers both,
or a single one when the addresses are equal.

Connections are served by at most :data:`WORKERS` threads; at most :data:`CONNECTIONS` are
taken at once (the rest are closed on accept), and a connection idle for :data:`IDLE_TIMEOUT`
seconds is closed, so idle or slow clients can neither multiply threads nor hold the probes off
for long.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

__all__ = ["CONNECTIONS", "IDLE_TIMEOUT", "WORKERS", "HttpServer", "parse_address"]

WORKERS = 8
"""Threads serving connections."""
CONNECTIONS = 64
"""Connections taken at once (served or waiting for a thread); more are closed on accept."""
IDLE_TIMEOUT = 2.0
"""Seconds a connection may stay silent (between keep-alive requests, or mid-request)."""

Probe = Callable[[], bool]
_log = logging.getLogger(__name__)
ENDPOINTS = frozenset({"/metrics", "/healthz", "/livez", "/readyz"})


def _exposition() -> bytes:
    """``scheduler.metrics``' registry, its Prometheus client imported at the first scrape (or
    the first cycle's end, whichever comes first) rather than before the first LISTs."""
    from scheduler import metrics

    return metrics.exposition()


def parse_address(address: str) -> tuple[str, int]:
    """``":8080"`` → ``("0.0.0.0", 8080)``; ``"127.0.0.1:0"`` → ephemeral port on loopback."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {address!r} is not host:port")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class HttpServer:
    """Serves the enabled endpoints on one address from a daemon thread."""

    def __init__(self, address: str, *, endpoints: Iterable[str] = ENDPOINTS,
                 healthz: Probe = lambda: True, readyz: Probe = lambda: True,
                 exposition: Callable[[], bytes] | None = None) -> None:
        self.address = parse_address(address)
        self.endpoints = frozenset(endpoints) & ENDPOINTS
        if "/healthz" in self.endpoints:
            self.endpoints |= {"/livez"}
        self.healthz = healthz
        self.readyz = readyz
        self.exposition = exposition or _exposition
        self._server: _BoundedServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.address[0]}:{self.port}"

    def start(self) -> HttpServer:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        server = _BoundedServer(self.address, Handler)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                        daemon=True, name=f"http-{self.address[1]}")
        self._thread.start()
        _log.info("serving %s on %s:%d", ", ".join(sorted(self.endpoints)), self.address[0],
                  self.port)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _BoundedServer(HTTPServer):
    """An HTTP server whose connections are served from a fixed pool of threads."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="http-worker")
        self._slots = threading.BoundedSemaphore(CONNECTIONS)
        self.refused = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            self.shutdown_request(request)
            return
        try:
            self._pool.submit(self._serve, request, client_address)
        except RuntimeError:  # shutting down
            self._slots.release()
            self.shutdown_request(request)

    def _serve(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class _Handler(BaseHTTPRequestHandler):
    server_owner: HttpServer
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT  # the socket's timeout: an idle keep-alive connection is closed

    def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: quiet
        pass

    def do_GET(self) -> None:
        owner = self.server_owner
        path = self.path.split("?", 1)[0]
        if path not in owner.endpoints:
            self._reply(404, b"not found\n")
            return
        try:
            if path == "/metrics":
                from scheduler import metrics

                self._reply(200, owner.exposition(), metrics.CONTENT_TYPE)
            elif path in ("/healthz", "/livez"):
                self._probe(owner.healthz(), b"ok\n", b"unhealthy\n")
            else:
                self._probe(owner.readyz(), b"ok\n", b"not ready\n")
        except Exception:  # a failing probe is an unhealthy answer, not a dead server
            _log.exception("handling %s failed", path)
            self._reply(500, b"internal error\n")

    def _probe(self, passed: bool, good: bytes, bad: bytes) -> None:
        if passed:
            self._reply(200, good)
        else:
            self._reply(503, bad)

    def _reply(self, code: int, body: bytes,
               content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
