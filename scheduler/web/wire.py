"""The web view's HTTP/1.1 wire: a lean request reader and response writer.

The web view shares the scheduler's process, so every request it answers takes CPU from the
loop. :class:`http.server.BaseHTTPRequestHandler` parses each request's headers through the
``email`` package and writes each response header separately: about 0.3–0.6 ms of CPU per
request, which fifty browser tabs polling twice a second turn into several per cent of a
scheduling burst. The view answers only ``GET`` and ``HEAD`` without a body and reads four
headers (``Connection``, ``Accept-Encoding``, ``If-None-Match``, ``X-Fragment``), so it reads
requests itself, within fixed bounds, and writes each response with one preformatted head.

Bounds: a request line or header line of at most :data:`MAX_LINE` bytes (414 / 431 past it),
at most :data:`MAX_HEADERS` headers (431), ``HTTP/1.x`` only (505). A request that announces a
body is answered and the connection closed, since the body is never read. Keep-alive follows
RFC 9112: on by default for HTTP/1.1, only on ``Connection: keep-alive`` for HTTP/1.0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from typing import Protocol

__all__ = ["MAX_HEADERS", "MAX_LINE", "BadRequest", "Request", "accepts_gzip", "etag_matches",
           "read_request", "response_head"]

MAX_LINE = 8192
"""Bytes a request line or header line may take."""
MAX_HEADERS = 100
"""Headers a request may carry."""


class Lines(Protocol):
    """A buffered connection's reading side."""

    def readline(self, size: int = -1, /) -> bytes: ...


@dataclass(slots=True)
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]
    """Lower-cased names; a repeated header's values joined with ``", "``."""
    keep_alive: bool


class BadRequest(Exception):
    """A request the wire refuses, with the status to answer (the connection is closed)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _line(rfile: Lines, too_long: int) -> bytes:
    line = rfile.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise BadRequest(too_long, f"line longer than {MAX_LINE} bytes")
    return line


def read_request(rfile: Lines) -> Request | None:
    """The next request on a connection, or None when the peer closed it between requests."""
    line = _line(rfile, 414)
    if line in (b"\r\n", b"\n"):  # RFC 9112 §2.2: one stray empty line before a request
        line = _line(rfile, 414)
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3:
        raise BadRequest(400, f"malformed request line {line[:80]!r}")
    method, target, version = parts
    if not version.startswith("HTTP/1.") or version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(505, f"version {version[:20]!r} is not served")
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        raw = _line(rfile, 431)
        if raw in (b"\r\n", b"\n"):
            break
        if not raw:
            raise BadRequest(400, "connection closed inside the headers")
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(400, f"malformed header line {raw[:80]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    else:
        raise BadRequest(431, f"more than {MAX_HEADERS} headers")
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    keep = "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens
    if "transfer-encoding" in headers or headers.get("content-length", "0").strip() != "0":
        keep = False  # a body we do not read: answer, then close
    return Request(method=method, target=target, version=version, headers=headers,
                   keep_alive=keep)


def accepts_gzip(request: Request) -> bool:
    """Whether ``Accept-Encoding`` takes gzip (``q=0`` refuses it)."""
    for item in request.headers.get("accept-encoding", "").split(","):
        coding, _, params = item.partition(";")
        if coding.strip().lower() in ("gzip", "x-gzip"):
            q = params.strip().lower()
            return not (q.startswith("q=") and _q(q[2:]) == 0.0)
    return False


def _q(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 1.0


def etag_matches(request: Request, etag: str) -> bool:
    """``If-None-Match`` holds ``etag`` (weak comparison, RFC 9110 §13.1.2) or ``*``."""
    value = request.headers.get("if-none-match")
    if not value:
        return False
    plain = etag.removeprefix("W/")
    return any(tag == "*" or tag.removeprefix("W/") == plain
               for tag in (t.strip() for t in value.split(",")))


_date = (0, "")


def _http_date() -> str:
    global _date
    second = int(time.time())
    if _date[0] != second:
        _date = (second, formatdate(second, usegmt=True))
    return _date[1]


def response_head(status: int, headers: Iterable[tuple[str, str]], *, length: int | None,
                  keep_alive: bool) -> bytes:
    """The status line and headers of a response whose body has ``length`` bytes (None: no
    ``Content-Length``, as a ``304`` has none)."""
    reason = HTTPStatus(status).phrase
    lines = [f"HTTP/1.1 {status} {reason}", "Server: lahar-web", f"Date: {_http_date()}",
             *(f"{k}: {v}" for k, v in headers)]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if not keep_alive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
