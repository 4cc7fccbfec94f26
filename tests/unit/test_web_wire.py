"""The web view's HTTP wire: requests read within bounds, answers that cost readers little.

Keep-alive and the bounds follow RFC 9112 (§2.2 stray empty line, §9.3 persistence); ETags
and ``If-None-Match`` follow RFC 9110 §8.8.3 / §13.1.2 (weak comparison for ``GET``). A
browser's ``fetch`` revalidates an answer marked ``Cache-Control: no-cache`` with the ETag it
kept, which is how fifty polling tabs cost the scheduler a 304 each while the picture stands.
"""

from __future__ import annotations

import gzip
import http.client
import io
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.web.publish import Publisher
from scheduler.web.server import WebServer
from scheduler.web.view import View
from scheduler.web.wire import (
    MAX_HEADERS,
    MAX_LINE,
    BadRequest,
    accepts_gzip,
    etag_matches,
    read_request,
)


def _read(raw: bytes) -> Any:
    return read_request(io.BytesIO(raw))


def test_request_line_headers_and_keep_alive() -> None:
    req = _read(b"GET /api/jobs?x=1 HTTP/1.1\r\nHost: h\r\nX-Fragment: main\r\n"
                b"Accept-Encoding: gzip\r\naccept-encoding: br\r\n\r\n")
    assert (req.method, req.target, req.version) == ("GET", "/api/jobs?x=1", "HTTP/1.1")
    assert req.headers["x-fragment"] == "main" and req.keep_alive
    assert req.headers["accept-encoding"] == "gzip, br"  # repeated headers are joined
    assert not _read(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive
    assert not _read(b"GET / HTTP/1.0\r\n\r\n").keep_alive
    assert _read(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive
    assert not _read(b"GET / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc").keep_alive
    assert _read(b"\r\nGET / HTTP/1.1\r\n\r\n").target == "/"
    assert _read(b"") is None


@pytest.mark.parametrize(("raw", "status"), [
    (b"GET /\r\n\r\n", 400),
    (b"GET / HTTP/2.0\r\n\r\n", 505),
    (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\n bad: space\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: h\r\n", 400),
    (b"GET /" + b"a" * MAX_LINE + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * MAX_LINE + b"\r\n\r\n", 431),
    (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * (MAX_HEADERS + 1) + b"\r\n", 431),
])
def test_bad_requests_are_refused_with_their_status(raw: bytes, status: int) -> None:
    with pytest.raises(BadRequest) as caught:
        _read(raw)
    assert caught.value.status == status


def test_gzip_and_etag_negotiation() -> None:
    def req(**headers: str) -> Any:
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return _read(f"GET / HTTP/1.1\r\n{lines}\r\n".encode())

    assert accepts_gzip(req(**{"Accept-Encoding": "gzip, deflate, br"}))
    assert not accepts_gzip(req(**{"Accept-Encoding": "gzip;q=0, br"}))
    assert not accepts_gzip(req())
    assert etag_matches(req(**{"If-None-Match": 'W/"a-1", "b-2"'}), '"b-2"')
    assert etag_matches(req(**{"If-None-Match": 'W/"a-1"'}), '"a-1"')
    assert etag_matches(req(**{"If-None-Match": "*"}), '"x"')
    assert not etag_matches(req(**{"If-None-Match": '"a-1"'}), '"a-2"')


def _publisher(cycle: int, jobs: int) -> Publisher:
    publisher = Publisher()
    data = {"overview": {"nodes": 1}, "queues": [], "nodes": [], "topology": [],
            "jobs": [{"uid": f"u{i}", "name": f"j{i}", "namespace": "team", "queue": "default",
                      "phase": "Pending", "min_member": 1, "priority": 0, "ready": 0,
                      "running": 0, "pending": 1, "age_seconds": 5.0, "waiting_seconds": 5.0,
                      "queue_position": i + 1, "reason": "0/1 nodes are unavailable" * 2,
                      "conditions": [], "pods": []} for i in range(jobs)]}
    publisher._view = View(cycle=cycle, built_at=0.0, build_seconds=0.0, data=data)
    return publisher


@pytest.fixture
def server() -> Iterator[WebServer]:
    running = WebServer("127.0.0.1:0", _publisher(1, 200)).start()
    try:
        yield running
    finally:
        running.stop()


def test_unchanged_picture_is_a_304_and_a_new_one_is_sent(server: WebServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/api/jobs")
    first = conn.getresponse()
    body = first.read()
    etag = first.getheader("ETag")
    assert first.status == 200 and etag and first.getheader("Cache-Control") == "no-cache"
    assert json.loads(body)["items"][0]["name"] == "j0"
    conn.request("GET", "/api/jobs", headers={"If-None-Match": etag})  # same connection
    again = conn.getresponse()
    assert again.status == 304 and again.read() == b"" and again.getheader("ETag") == etag
    server.publisher._view = _publisher(2, 201)._view
    conn.request("GET", "/api/jobs", headers={"If-None-Match": etag})
    fresh = conn.getresponse()
    assert fresh.status == 200 and len(json.loads(fresh.read())["items"]) == 201
    assert fresh.getheader("ETag") != etag
    conn.close()


def test_gzip_answer_is_the_same_document(server: WebServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/jobs")
    plain = conn.getresponse().read()
    conn.request("GET", "/jobs", headers={"Accept-Encoding": "gzip"})
    packed = conn.getresponse()
    assert packed.getheader("Content-Encoding") == "gzip"
    assert "Accept-Encoding" in (packed.getheader("Vary") or "")
    data = packed.read()
    assert gzip.decompress(data) == plain and len(data) < len(plain) / 3
    conn.request("HEAD", "/jobs")
    head = conn.getresponse()
    assert head.read() == b"" and int(head.getheader("Content-Length") or 0) == len(plain)
    conn.close()


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_read_only_and_malformed_requests(server: WebServer) -> None:
    refused = _raw(server.port, b"POST /api/jobs HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert refused.startswith(b"HTTP/1.1 405 ") and b"Allow: GET, HEAD" in refused
    broken = _raw(server.port, b"GET / HTTP/1.1\r\nno colon\r\n\r\n")
    assert broken.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in broken
    # the server answers the next connection as before
    assert _raw(server.port, b"GET /api/overview HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.1 200")


def test_builds_keep_to_their_share_of_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that takes 0.1 s waits 5 s (2 %) before the next one, not the 1 s minimum."""
    import scheduler.web.publish as publish_module

    now = [0.0]
    timer = [0.0]

    def build(session: Any, *, now: float, memo: Any) -> dict[str, Any]:
        timer[0] += 0.1
        return {"overview": {"pods_pending": 0, "pods_bound": 0}}

    monkeypatch.setattr(publish_module, "build_view", build)
    publisher = Publisher(clock=lambda: now[0], timer=lambda: timer[0])
    stats = type("Stats", (), {"seconds": 0.01})()
    built = []
    for second in range(12):
        now[0] = float(second)
        publisher.ask()
        publisher(None, stats)
        built.append(publisher.current().cycle)  # type: ignore[union-attr]
    assert sorted(set(built)) == [1, 6, 11]
    assert Publisher(always=True, timer=lambda: timer[0]).budget == 0.02
