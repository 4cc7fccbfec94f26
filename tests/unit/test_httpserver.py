"""The health and metrics server: its endpoints, and a bound on threads whatever clients do."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request

from scheduler.httpserver import CONNECTIONS, IDLE_TIMEOUT, WORKERS, HttpServer


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def test_endpoints_answer_their_probes() -> None:
    server = HttpServer("127.0.0.1:0", healthz=lambda: True, readyz=lambda: False,
                        exposition=lambda: b"# metrics\n").start()
    try:
        assert _status(f"{server.url}/healthz") == 200
        assert _status(f"{server.url}/livez") == 200
        assert _status(f"{server.url}/readyz") == 503
        assert _status(f"{server.url}/metrics") == 200
        assert _status(f"{server.url}/nope") == 404
    finally:
        server.stop()


def test_idle_connections_neither_multiply_threads_nor_hold_probes_off() -> None:
    """300 connections that never send a byte: the workers stay at their bound, connections
    past the bound are closed, and once the idle ones time out the probe answers again."""
    server = HttpServer("127.0.0.1:0").start()
    before = threading.active_count()
    idle: list[socket.socket] = []
    try:
        for _ in range(300):
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=2))
        time.sleep(0.5)
        workers = [t for t in threading.enumerate() if t.name.startswith("http-worker")]
        assert len(workers) <= WORKERS
        assert threading.active_count() - before <= WORKERS
        assert server._server is not None and server._server.refused > 0  # past the bound
        deadline = time.monotonic() + IDLE_TIMEOUT * (CONNECTIONS // WORKERS + 2)
        while _status(f"{server.url}/healthz") != 200:
            assert time.monotonic() < deadline, "healthz never answered"
            time.sleep(0.2)
    finally:
        for sock in idle:
            sock.close()
        server.stop()
