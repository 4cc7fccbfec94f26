"""The HTTP/1.1 transport under :class:`KubeClient`, against scripted raw-socket servers: body
framing, connection reuse, re-sending on a kept-alive connection the server closed, proxies,
and errors that name what went wrong."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from scheduler.cluster.kube.client import ApiError, KubeClient
from scheduler.cluster.kube.kubeconfig import ClientConfig
from scheduler.cluster.kube.retry import retry_after_seconds, status_of
from scheduler.cluster.kube.transport import Endpoint, ProtocolFault, Transport

Serve = Callable[[socket.socket, bytes], bool]
"""Handle one request (its head and body as read) on a connection; False closes it."""


class ScriptedServer:
    """Accepts connections and hands each request to ``serve``; records what it saw."""

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._open: set[socket.socket] = set()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self._open.add(conn)
            handler = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._threads.append(handler)
            handler.start()

    def _handle(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        with conn, reader:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + reader.read(length)
                self.requests.append(request)
                if not self.serve(conn, request):
                    return

    def close(self) -> None:
        """Stop accepting, hang up on every client and wait for the threads: a blocked
        ``accept`` or ``readline`` only returns once its socket is shut down."""
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self._threads[0].join(5)  # accepts no more
        self.listener.close()
        for conn in self._open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads[1:]:
            thread.join(5)


@pytest.fixture
def serve_with() -> Iterator[Callable[[Serve], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(serve: Serve) -> ScriptedServer:
        servers.append(ScriptedServer(serve))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def answer(body: bytes, *, status: str = "200 OK", extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def transport_for(server: ScriptedServer) -> Transport:
    return Transport(Endpoint.from_url(f"http://127.0.0.1:{server.port}"))


def test_content_length_bodies_reuse_one_connection(serve_with) -> None:
    server = serve_with(lambda conn, _: conn.sendall(answer(b'{"a":1}')) or True)
    transport = transport_for(server)
    for _ in range(3):
        response = transport.request("GET", "/api/v1/nodes", headers={"Accept": "x"},
                                     timeout=(1, 1))
        assert (response.status, response.data) == (200, b'{"a":1}')
        response.release_conn()
    assert server.connections == 1
    assert server.requests[0].startswith(b"GET /api/v1/nodes HTTP/1.1\r\nHost: 127.0.0.1:")


def test_a_request_body_is_sent_with_its_length(serve_with) -> None:
    server = serve_with(lambda conn, _: conn.sendall(answer(b"{}", status="201 Created")) or True)
    response = transport_for(server).request("POST", "/x", headers={}, body=b'{"k":"v"}',
                                             timeout=(1, 1))
    assert response.status == 201
    assert server.requests[0].endswith(b'Content-Length: 9\r\n\r\n{"k":"v"}')


def test_chunks_arrive_one_by_one_and_the_stream_ends_at_the_last(serve_with) -> None:
    release = threading.Event()

    def stream(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"6\r\nfirst\n\r\n")
        release.wait(5)
        conn.sendall(b"7;ext=1\r\nsecond\n\r\n0\r\nTrailer: x\r\n\r\n")
        return True

    server = serve_with(stream)
    transport = transport_for(server)
    response = transport.request("GET", "/watch", headers={}, timeout=(1, 5))
    chunks = response.stream()
    assert next(chunks) == b"first\n"  # before the server sent the rest
    release.set()
    assert list(chunks) == [b"second\n"]
    response.release_conn()
    again = transport.request("GET", "/watch", headers={}, timeout=(1, 5))
    assert again.read() == b"first\nsecond\n"
    assert server.connections == 1  # read to the end: kept alive


def test_connection_close_and_bodies_to_eof_are_not_reused(serve_with) -> None:
    def close_after(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        return False

    server = serve_with(close_after)
    transport = transport_for(server)
    for _ in range(2):
        response = transport.request("GET", "/", headers={}, timeout=(1, 1))
        assert response.data == b"all of it"
        response.release_conn()
    assert server.connections == 2


def test_a_kept_alive_connection_the_server_dropped_is_replaced_once(serve_with) -> None:
    """The second request lands on a connection whose server hung up without answering:
    it is sent again on a fresh connection, and the caller sees one answer."""
    def one_per_connection(conn: socket.socket, request: bytes) -> bool:
        if b"/second" in request and not hasattr(one_per_connection, "dropped"):
            one_per_connection.dropped = True  # type: ignore[attr-defined]
            return False  # read it, then hang up without a word
        conn.sendall(answer(b"ok"))
        return True

    server = serve_with(one_per_connection)
    transport = transport_for(server)
    first = transport.request("GET", "/first", headers={}, timeout=(1, 1))
    assert first.data == b"ok"
    first.release_conn()
    second = transport.request("GET", "/second", headers={}, timeout=(1, 1))
    assert second.data == b"ok"
    assert server.connections == 2
    assert sum(b"/second" in r for r in server.requests) == 2


def test_a_fresh_connection_that_ends_early_is_an_error_not_a_resend(serve_with) -> None:
    server = serve_with(lambda conn, _: False)
    with pytest.raises(ProtocolFault, match="closed the connection before answering"):
        transport_for(server).request("GET", "/", headers={}, timeout=(1, 1))
    assert len(server.requests) == 1
    assert status_of(ProtocolFault("x")) == 0  # the retry policy's transport failure


def test_garbage_and_short_bodies_are_protocol_faults(serve_with) -> None:
    garbage = serve_with(lambda conn, _: conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n") or False)
    with pytest.raises(ProtocolFault, match=r"not an HTTP/1\.x status line"):
        transport_for(garbage).request("GET", "/", headers={}, timeout=(1, 1))
    short = serve_with(
        lambda conn, _: conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc") or False)
    response = transport_for(short).request("GET", "/", headers={}, timeout=(1, 1))
    with pytest.raises(ProtocolFault, match="7 bytes early"):
        response.read()


def test_shutdown_unblocks_a_reader_in_another_thread(serve_with) -> None:
    server = serve_with(lambda conn, _: conn.sendall(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") or time.sleep(10) or False)
    response = transport_for(server).request("GET", "/watch", headers={}, timeout=(1, 30))
    errors: list[BaseException] = []

    def read() -> None:
        try:
            response.read()
        except Exception as error:  # what a blocked read sees when its socket is shut
            errors.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.1)
    started = time.monotonic()
    response.shutdown()
    reader.join(5)
    assert not reader.is_alive() and time.monotonic() - started < 2
    assert errors and isinstance(errors[0], OSError)


def test_an_http_proxy_gets_the_absolute_url(serve_with) -> None:
    proxy = serve_with(lambda conn, _: conn.sendall(answer(b"via proxy")) or True)
    endpoint = Endpoint.from_url("http://api.example.invalid:8080/prefix",
                                 proxy=f"http://user:p%40ss@127.0.0.1:{proxy.port}")
    response = Transport(endpoint).request("GET", "/api", headers={}, timeout=(1, 1))
    assert response.data == b"via proxy"
    head = proxy.requests[0]
    assert head.startswith(b"GET http://api.example.invalid:8080/prefix/api HTTP/1.1\r\n")
    assert endpoint.proxy_headers == (("Proxy-Authorization", "Basic dXNlcjpwQHNz"),)


def test_an_https_server_is_reached_through_a_connect_tunnel(serve_with) -> None:
    """The tunnel itself (TLS over it is the standard library's; here the far end speaks plain
    HTTP so that the tunnelled request can be read)."""
    def tunnel(conn: socket.socket, request: bytes) -> bool:
        if request.startswith(b"CONNECT "):
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            conn.sendall(answer(b"through"))
        return True

    proxy = serve_with(tunnel)
    endpoint = Endpoint(scheme="https", host="api.example.invalid", port=6443,
                        proxy_host="127.0.0.1", proxy_port=proxy.port)
    response = Transport(endpoint).request("GET", "/api", headers={}, timeout=(1, 1))
    assert response.data == b"through"
    assert proxy.requests[0].startswith(b"CONNECT api.example.invalid:6443 HTTP/1.1\r\n")
    assert proxy.requests[1].startswith(b"GET /api HTTP/1.1\r\nHost: api.example.invalid:6443")

    refusing = serve_with(lambda conn, _: conn.sendall(
        b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n") or False)
    refused = Endpoint(scheme="https", host="api.example.invalid", port=6443,
                       proxy_host="127.0.0.1", proxy_port=refusing.port)
    with pytest.raises(ProtocolFault, match=r"refused the tunnel: 'HTTP/1\.1 407"):
        Transport(refused).request("GET", "/api", headers={}, timeout=(1, 1))


def test_client_errors_carry_status_body_and_retry_after(serve_with) -> None:
    server = serve_with(lambda conn, _: conn.sendall(answer(
        b'{"kind":"Status","message":"slow down"}', status="429 Too Many Requests",
        extra="Retry-After: 2\r\n")) or True)
    client = KubeClient(ClientConfig(host=f"http://127.0.0.1:{server.port}"), qps=0)
    with pytest.raises(ApiError) as caught:
        client.request_json("PATCH", "/api/v1/nodes/n1", body={"metadata": {}},
                            content_type="application/merge-patch+json")
    assert caught.value.status == 429
    assert "slow down" in caught.value.body
    assert retry_after_seconds(caught.value) == 2.0
    request = server.requests[0]
    assert b"Content-Type: application/merge-patch+json\r\n" in request
    assert request.endswith(b'{"metadata":{}}')
    # the error's connection was read to its end and serves the next request
    with pytest.raises(ApiError):
        client.request_json("GET", "/api/v1/nodes/n1")
    assert server.connections == 1


def test_warm_connections_are_taken_by_the_burst_that_follows(serve_with) -> None:
    """``lahar run`` opens a few connections as the caches sync, so that the first cycle's
    binds do not each wait for a handshake (kube-scheduler's binds share one HTTP/2
    connection opened long before: client-go's transport, ``http2.ConfigureTransports``)."""
    server = serve_with(lambda conn, _: conn.sendall(answer(b"{}")) or True)
    transport = transport_for(server)
    assert transport.warm(3) == 3
    assert transport.warm(3) == 0  # three idle already: nothing more opened
    deadline = time.monotonic() + 5
    while server.connections < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.connections == 3
    taken = [transport.request("POST", "/bind", headers={}, body=b"{}", timeout=(1, 1))
             for _ in range(3)]
    assert [response.status for response in taken] == [200, 200, 200]
    assert server.connections == 3  # the three binds went out on the warm connections
    for response in taken:
        response.release_conn()


def test_warming_stops_at_the_first_failure() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    transport = Transport(Endpoint.from_url(f"http://127.0.0.1:{port}"))
    assert transport.warm(4, connect_timeout=1.0) == 0
