"""HTTP/1.1 to the API server over kept-alive sockets: the transport under :class:`KubeClient`.

Every bind, event and status write is one small request, and the scheduler runs them by the
thousand. Through the official client's stack (``ApiClient.call_api`` → urllib3's pool manager
→ ``http.client``, whose header parser is the ``email`` package) a request costs 1.3–1.8 ms of
CPU in this process, most of it under the GIL that the scheduling loop also needs; written
straight onto a kept-alive socket it costs about 0.2 ms. So this module speaks the small part of
HTTP/1.1 the API server answers with — ``Content-Length`` bodies, chunked streams (watches),
``Connection: close`` — and nothing else: no redirects, no compression, no retries of its own
beyond re-sending once on a kept-alive connection the server had already closed (nothing of
the request was read there; every HTTP client does the same).

TLS comes from the client configuration (CA file, client certificate, ``insecure-skip-tls-verify``,
``tls-server-name``), built into one ``SSLContext`` per transport. An HTTP proxy in the
configuration (kubeconfig ``proxy-url``) is used as kubectl does: ``CONNECT`` for an ``https``
server, the absolute URL for an ``http`` one.

Transport failures raise ``OSError`` subclasses (refused, reset, timed out, TLS, or
:class:`ProtocolFault` for an answer that is not HTTP), which the retry policy counts as
status 0.
"""

from __future__ import annotations

import base64
import io
import select
import socket
import ssl
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import unquote, urlsplit

__all__ = ["Endpoint", "ProtocolFault", "Response", "Transport", "tls_context"]

IDLE_SECONDS = 50.0
"""A kept-alive connection idle longer than this is closed, not reused (the API server's Go
HTTP server closes idle ones after 90 s; reusing one it has just closed costs a re-send)."""

_MAX_LINE = 65_536
_MAX_HEADERS = 200


class Headers(dict[str, str]):
    """Response headers under lower-case names, looked up in any case (``Retry-After``)."""

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name.lower() if isinstance(name, str) else name)

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(name.lower(), default)


class ProtocolFault(ConnectionError):
    """The server's answer was not the HTTP/1.1 this transport understands, or it ended early."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where requests go and how: the server, its TLS, an optional proxy."""

    scheme: str
    host: str
    port: int
    base_path: str = ""
    tls: ssl.SSLContext | None = None
    server_hostname: str = ""
    proxy_host: str = ""
    proxy_port: int = 0
    proxy_headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_url(cls, url: str, *, tls: ssl.SSLContext | None = None, server_hostname: str = "",
                 proxy: str = "", proxy_headers: Mapping[str, str] | None = None) -> Endpoint:
        parts = urlsplit(url if "://" in url else f"https://{url}")
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {scheme!r} in server address {url!r}")
        host = parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        proxy_host, proxy_port = "", 0
        headers = dict(proxy_headers or {})
        if proxy:
            proxy_parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            proxy_host = proxy_parts.hostname or ""
            proxy_port = proxy_parts.port or 80
            if proxy_parts.username is not None:
                pair = f"{unquote(proxy_parts.username)}:{unquote(proxy_parts.password or '')}"
                headers.setdefault("Proxy-Authorization",
                                   "Basic " + base64.b64encode(pair.encode()).decode())
        return cls(scheme=scheme, host=host, port=port, base_path=parts.path.rstrip("/"),
                   tls=tls if scheme == "https" else None,
                   server_hostname=server_hostname or host,
                   proxy_host=proxy_host, proxy_port=proxy_port,
                   proxy_headers=tuple(headers.items()))

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def tls_context(*, verify: bool, ca_file: str | None = None, cert_file: str | None = None,
                key_file: str | None = None, check_hostname: bool = True) -> ssl.SSLContext:
    """The one context of a transport: the configured trust anchors (the system's when no CA
    is named), the client certificate, and HTTP/1.1 offered by ALPN."""
    if verify:
        context = ssl.create_default_context(cafile=ca_file or None)
        context.check_hostname = check_hostname
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        context.load_cert_chain(cert_file, key_file or None)
    context.set_alpn_protocols(["http/1.1"])
    return context


def _nothing_read(error: BaseException) -> bool:
    """Whether ``error`` shows the server never read the request: the send failed, or the
    connection ended before the first byte of an answer."""
    return isinstance(error, BrokenPipeError | ConnectionResetError) or bool(
        getattr(error, "nothing_read", False))


class _Connection:
    __slots__ = ("idle_since", "reader", "reused", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = cast(io.BufferedReader, sock.makefile("rb", buffering=65_536))
        self.idle_since = 0.0
        self.reused = False

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()


def _quiet(conn: _Connection) -> bool:
    """An idle connection with something to read has been closed by the server (or carries
    stray bytes): either way it cannot take a request."""
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


class Response:
    """An answer whose body is read on demand: the members of urllib3's response that the
    client's callers use (``status``, ``reason``, ``headers``, ``data``, ``read``, ``stream``,
    ``drain_conn``, ``release_conn``, ``shutdown``)."""

    __slots__ = ("_chunk_left", "_conn", "_data", "_done", "_keep", "_left", "_transport",
                 "headers", "reason", "status")

    def __init__(self, *, transport: Transport, conn: _Connection, status: int, reason: str,
                 headers: Headers, length: int | None, chunked: bool, keep: bool) -> None:
        self._transport = transport
        self._conn: _Connection | None = conn
        self.status = status
        self.reason = reason
        self.headers = headers
        self._keep = keep
        self._data: bytes | None = None
        # Body framing: ``_left`` bytes of a Content-Length body, or chunked
        # (``_chunk_left`` = -1 before the first size line), or to EOF (both None / -2).
        self._left = length
        self._chunk_left = -1 if chunked else -2
        self._done = length == 0

    # -- urllib3-shaped surface ---------------------------------------------------------------

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = self.read()
        return self._data

    def read(self) -> bytes:
        """The rest of the body."""
        return b"".join(self.stream())

    def stream(self, amt: int | None = None, decode_content: bool = True) -> Iterator[bytes]:
        """The body as it arrives: each chunk of a chunked answer, else blocks of the body."""
        del amt, decode_content  # no compression is asked for; chunks come as sent
        while not self._done:
            block = self._next_block()
            if block:
                yield block

    def drain_conn(self) -> None:
        for _ in self.stream():
            pass

    def release_conn(self) -> None:
        """Give the connection back for reuse when the body was read to its end, else close it."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._done and self._keep:
            self._transport.give_back(conn)
        else:
            conn.close()

    def shutdown(self) -> None:
        """Shut the socket from another thread so that a blocked read returns at once."""
        conn = self._conn
        if conn is not None:
            # socket.socket's own shutdown: an SSLSocket's would drop its TLS state under the
            # thread still reading from it.
            socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)

    # -- body framing -------------------------------------------------------------------------

    def _next_block(self) -> bytes:
        conn = self._conn
        if conn is None:
            raise ProtocolFault("the response's connection was already released")
        reader = conn.reader
        if self._chunk_left == -2:  # Content-Length, or until the server closes
            if self._left is None:
                block = reader.read1(65_536)
                if not block:
                    self._done = True
                return block
            block = reader.read1(min(self._left, 65_536))
            if not block:
                raise ProtocolFault(f"the body ended {self._left} bytes early")
            self._left -= len(block)
            self._done = self._left == 0
            return block
        size_line = reader.readline(_MAX_LINE)
        if not size_line:
            raise ProtocolFault("the chunked body ended without its last chunk")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolFault(f"bad chunk size line {size_line[:40]!r}") from None
        if size == 0:
            while reader.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            self._done = True
            return b""
        block = reader.read(size)
        if len(block) < size:
            raise ProtocolFault("a chunk ended early")
        reader.readline(_MAX_LINE)  # the CRLF after the chunk
        return block


class Transport:
    """Kept-alive HTTP/1.1 connections to one :class:`Endpoint`, shared by every thread."""

    def __init__(self, endpoint: Endpoint, *, max_idle: int = 64) -> None:
        self.endpoint = endpoint
        self.max_idle = max_idle
        self._idle: deque[_Connection] = deque()
        self._closed = False

    def request(self, method: str, target: str, *, headers: Mapping[str, str],
                body: bytes | None = None,
                timeout: tuple[float, float] | float | None = None) -> Response:
        """Send ``method target`` and read the status line and headers; the body is left to
        the returned :class:`Response` (read it, then ``release_conn``)."""
        endpoint = self.endpoint
        path = endpoint.base_path + target
        if endpoint.proxy_host and endpoint.scheme == "http":
            path = f"http://{endpoint.authority}{path}"
        lines = [f"{method} {path} HTTP/1.1\r\nHost: {endpoint.authority}\r\n"]
        for name, value in headers.items():
            lines.append(f"{name}: {value}\r\n")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}\r\n")
        lines.append("\r\n")
        payload = "".join(lines).encode("latin-1") + (body or b"")
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        for _ in range(2):
            conn = self._take(connect)
            try:
                conn.sock.settimeout(read)
                conn.sock.sendall(payload)
                return self._answer(conn, method)
            except (ProtocolFault, ConnectionResetError, BrokenPipeError) as error:
                conn.close()
                # A kept-alive connection the server closed just now: it read nothing of
                # this request, which goes once more on a new connection.
                if not (conn.reused and _nothing_read(error)):
                    raise
            except BaseException:
                conn.close()
                raise
        raise ProtocolFault("the server closed two connections in a row before answering")

    def give_back(self, conn: _Connection) -> None:
        if self._closed or len(self._idle) >= self.max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        conn.reused = True
        self._idle.append(conn)

    def warm(self, count: int, *, connect_timeout: float | None = 5.0) -> int:
        """Open connections until ``count`` are idle (at most :attr:`max_idle`), for a burst
        about to come (the first cycle's binds): each would otherwise start with its own TLS
        handshake while the burst waits. Returns how many were opened; stops at the first
        failure (the requests that follow open their own and report it)."""
        opened = 0
        while not self._closed and len(self._idle) < min(count, self.max_idle):
            try:
                conn = self._open(connect_timeout)
            except OSError:  # a ProtocolFault and a TLS error are OSErrors too
                break
            self.give_back(conn)
            opened += 1
        return opened

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.pop().close()
            except IndexError:
                return

    # -- connections --------------------------------------------------------------------------

    def _take(self, connect_timeout: float | None) -> _Connection:
        # deque.pop and append are atomic: no lock for threads to queue on (a lock held by a
        # thread that loses the GIL stalls every other bind behind it).
        now = time.monotonic()
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return self._open(connect_timeout)
            if now - conn.idle_since <= IDLE_SECONDS and _quiet(conn):
                return conn
            conn.close()

    def _open(self, connect_timeout: float | None) -> _Connection:
        endpoint = self.endpoint
        if endpoint.proxy_host:
            sock = socket.create_connection((endpoint.proxy_host, endpoint.proxy_port),
                                            timeout=connect_timeout)
            if endpoint.scheme == "https":
                self._tunnel(sock)
        else:
            sock = socket.create_connection((endpoint.host, endpoint.port),
                                            timeout=connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if endpoint.tls is not None:
            try:
                sock = endpoint.tls.wrap_socket(sock, server_hostname=endpoint.server_hostname)
            except BaseException:
                sock.close()
                raise
        return _Connection(sock)

    def _tunnel(self, sock: socket.socket) -> None:
        endpoint = self.endpoint
        extra = "".join(f"{name}: {value}\r\n" for name, value in endpoint.proxy_headers)
        request = (f"CONNECT {endpoint.host}:{endpoint.port} HTTP/1.1\r\n"
                   f"Host: {endpoint.host}:{endpoint.port}\r\n{extra}\r\n")
        try:
            sock.sendall(request.encode("latin-1"))
            reader = sock.makefile("rb", buffering=0)
            status_line = reader.readline(_MAX_LINE)
            while reader.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                pass
            reader.close()
        except BaseException:
            sock.close()
            raise
        parts = status_line.split(None, 2)
        if len(parts) < 2 or parts[1] != b"200":
            sock.close()
            raise ProtocolFault(f"proxy {endpoint.proxy_host}:{endpoint.proxy_port} refused "
                                f"the tunnel: {status_line.strip().decode('latin-1')!r}")

    def _answer(self, conn: _Connection, method: str) -> Response:
        reader = conn.reader
        status_line = reader.readline(_MAX_LINE)
        if not status_line:
            fault = ProtocolFault("the server closed the connection before answering")
            fault.nothing_read = True  # type: ignore[attr-defined]
            raise fault
        parts = status_line.rstrip(b"\r\n").split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ProtocolFault(f"not an HTTP/1.x status line: {status_line[:60]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise ProtocolFault(f"bad status in {status_line[:60]!r}") from None
        headers = Headers()
        for _ in range(_MAX_HEADERS):
            line = reader.readline(_MAX_LINE)
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise ProtocolFault("the headers ended early")
            name, _, value = line.decode("latin-1").partition(":")
            key = name.strip().lower()
            value = value.strip()
            before = dict.get(headers, key)
            dict.__setitem__(headers, key, value if before is None else f"{before}, {value}")
        else:
            raise ProtocolFault(f"more than {_MAX_HEADERS} header lines")
        keep = (parts[0] != b"HTTP/1.0"
                and "close" not in (headers.get("connection") or "").lower())
        chunked = "chunked" in (headers.get("transfer-encoding") or "").lower()
        length: int | None = None
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            length = 0
        elif not chunked:
            raw = headers.get("content-length")
            if raw is None:
                keep = False  # the body runs to the end of the connection
            else:
                try:
                    length = int(raw)
                except ValueError:
                    raise ProtocolFault(f"bad Content-Length {raw!r}") from None
        reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
        return Response(transport=self, conn=conn, status=status, reason=reason,
                        headers=headers, length=length, chunked=chunked, keep=keep)
