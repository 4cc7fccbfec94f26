"""The one HTTP seam between Lahar and the Kubernetes API server.

:class:`KubeClient` sends requests to the server a :class:`~.kubeconfig.ClientConfig` names,
through this project's :mod:`~scheduler.cluster.kube.transport`, and talks raw JSON both ways:

* Responses are never deserialized into generated models. Those are ~10x slower than
  ``json.loads`` and silently drop fields newer than the client, so every call returns the
  undecoded response for the caller to read or stream.
* Request bodies are plain dicts, sent as they are: the official client validates dict bodies
  through its models, rejecting or dropping unknown fields, which would corrupt a
  read-modify-write of a Node.
* The official client's transport (urllib3 under ``ApiClient.call_api``) costs 1.3–1.8 ms of
  CPU a request, several times this one's, and binds come by the thousand.

A non-2xx answer raises :class:`ApiError` with the status, the reason and the server's
``Status`` message. All requests pass one client-side token bucket (``--kube-api-qps`` /
``--kube-api-burst``), so binds, status writes and watches share the same budget, as in
client-go.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - a declared dependency; the standard decoder then
    _orjson = None  # type: ignore[assignment]

from scheduler.cluster.kube.kubeconfig import ClientConfig, load_client_config
from scheduler.cluster.kube.transport import Endpoint, Headers, Response, Transport, tls_context

__all__ = [
    "DEFAULT_TIMEOUT",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "USER_AGENT",
    "ApiError",
    "KubeClient",
    "QueryValue",
    "TokenBucket",
    "loads_json",
    "object_path",
]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

DEFAULT_TIMEOUT: tuple[float, float] = (5.0, 30.0)
"""(connect, read) seconds for ordinary requests; watches pass their own."""

_log = logging.getLogger(__name__)

Timeout = float | tuple[float, float] | None
QueryValue = str | int | bool | None


class TokenBucket:
    """Client-side rate limit: ``qps`` tokens per second, at most ``burst`` saved up.

    ``acquire`` reserves a token and sleeps until it is due, so concurrent callers are served in
    arrival order. A non-positive ``qps`` disables limiting.
    """

    __slots__ = ("_clock", "_last", "_lock", "_sleep", "_tokens", "burst", "qps")

    def __init__(self, *, qps: float, burst: int,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.qps = float(qps)
        self.burst = max(int(burst), 1)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take one token; return how many seconds the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def acquire(self) -> float:
        """Take one token, sleeping as long as needed; return the time slept."""
        delay = self.reserve()
        if delay > 0:
            self._sleep(delay)
        return delay


def object_path(prefix: str, plural: str, *, name: str = "", namespace: str = "",
                subresource: str = "") -> str:
    """``/api/v1`` or ``/apis/<group>/<version>`` + optional namespace, name and subresource."""
    parts = [prefix.rstrip("/")]
    if namespace:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
    return "/".join(parts)


class ApiError(Exception):
    """A non-2xx answer: its status, reason, body (the server's ``Status`` as text) and
    headers (looked up in any case)."""

    def __init__(self, status: int, reason: str = "", *, body: str = "",
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status, reason)
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = Headers((key.lower(), value) for key, value in (headers or {}).items())

    @property
    def message(self) -> str:
        """The ``message`` of the server's ``Status`` body, or ''."""
        try:
            decoded = json.loads(self.body)
        except ValueError:
            return ""
        return str(decoded.get("message") or "") if isinstance(decoded, dict) else ""

    def __str__(self) -> str:
        text = f"HTTP {self.status}"
        if self.reason:
            text += f" {self.reason}"
        message = self.message
        return f"{text}: {message}" if message else text


USER_AGENT = "lahar/0.1.0"

_UNVERIFIED_WARNED: set[str] = set()
"""Hosts whose unverified TLS was warned about already."""


class KubeClient:
    """Raw-JSON requests through the project's transport, behind a token bucket."""

    def __init__(self, config: ClientConfig, *, qps: float = 2000.0, burst: int = 2000,
                 max_idle: int = 64) -> None:
        self.config = config
        self.bucket = TokenBucket(qps=qps, burst=burst)
        self.user_agent = USER_AGENT
        self.transport = Transport(endpoint_of(config), max_idle=max_idle)
        if (not config.verify_ssl and config.host.startswith("https:")
                and config.host not in _UNVERIFIED_WARNED):
            _UNVERIFIED_WARNED.add(config.host)  # once per process, not per reconnect
            _log.warning("TLS certificate of %s is not verified (insecure-skip-tls-verify)",
                         config.host)

    @classmethod
    def from_flags(cls, *, kubeconfig: str | None = None, master: str | None = None,
                   context: str | None = None, qps: float = 2000.0,
                   burst: int = 2000) -> KubeClient:
        """Build a client from the command-line flags (see
        :func:`~scheduler.cluster.kube.kubeconfig.load_client_config`)."""
        config = load_client_config(kubeconfig=kubeconfig, master=master, context=context)
        return cls(config, qps=qps, burst=burst)

    @classmethod
    def for_host(cls, host: str, *, qps: float = 0.0, burst: int = 1) -> KubeClient:
        """An unauthenticated client for ``host`` (a local proxy, or a test double)."""
        return cls(ClientConfig(host=host), qps=qps, burst=burst)

    @property
    def host(self) -> str:
        return self.config.host

    def request(self, method: str, path: str, *,
                query: Mapping[str, QueryValue] | None = None, body: Any = None,
                content_type: str | None = None,
                timeout: Timeout = DEFAULT_TIMEOUT) -> Response:
        """Send one request; return the response with its body unread (stream it or ``read``
        it, then ``release_conn``).

        Raises :class:`ApiError` on a non-2xx answer and ``OSError`` subclasses when the
        server cannot be reached or answers garbage.
        """
        self.bucket.acquire()
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if self.config.auth is not None:
            headers.update(self.config.auth())
        payload: bytes | None = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            payload = (body if isinstance(body, bytes)
                       else body.encode() if isinstance(body, str)
                       else json.dumps(body, separators=(",", ":")).encode())
        params = [(key, _query_text(value)) for key, value in (query or {}).items()
                  if value is not None]
        target = path
        if params:
            target += "?" + urlencode(params, quote_via=quote)
        response = self.transport.request(method, target, headers=headers, body=payload,
                                          timeout=timeout)
        if not 200 <= response.status <= 299:
            try:
                text = response.data.decode("utf-8", errors="replace")
            finally:
                response.release_conn()
            raise ApiError(response.status, response.reason, body=text, headers=response.headers)
        return response

    def request_json(self, method: str, path: str, *,
                     query: Mapping[str, QueryValue] | None = None, body: Any = None,
                     content_type: str | None = None,
                     timeout: Timeout = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """:meth:`request` and decode the JSON answer (``{}`` for an empty body)."""
        response = self.request(method, path, query=query, body=body,
                                content_type=content_type, timeout=timeout)
        try:
            data = response.data
        finally:
            response.release_conn()
        if not data:
            return {}
        decoded = loads_json(data)
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    def close(self) -> None:
        self.transport.close()


def loads_json(data: bytes | str) -> Any:
    """Decode an answer of the API server: with orjson where it reads the text, about 40 %
    less CPU than ``json.loads`` on a page of pods (a restart decodes every object of the
    cluster), else with ``json.loads``. Both give the same dicts, lists, strings and numbers
    for what a Go server writes; what only the standard decoder accepts (NaN, a lone
    surrogate escape) and every error (raised as ``json.loads`` raises it) take the second
    path."""
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(data)


def endpoint_of(config: ClientConfig) -> Endpoint:
    """The server, TLS and proxy of ``config`` (a TLS context is built only for an ``https``
    server, so a plain-HTTP endpoint loads no trust store)."""
    tls = None
    if config.host.startswith("https:") or "://" not in config.host:
        tls = tls_context(verify=config.verify_ssl, ca_file=config.ca_file,
                          cert_file=config.cert_file, key_file=config.key_file,
                          check_hostname=config.check_hostname)
    return Endpoint.from_url(config.host, tls=tls, server_hostname=config.tls_server_name,
                             proxy=config.proxy)


def _query_text(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
