"""The one HTTP seam between Lahar and the Kubernetes API server.

:class:`KubeClient` takes the official client's ``Configuration`` (its kubeconfig / in-cluster
loading, TLS settings and token refresh) and sends its requests through this project's
:mod:`~scheduler.cluster.kube.transport`, talking raw JSON in both directions:

* Responses are never deserialized into the generated models. Those are ~10x slower than
  ``json.loads`` and silently drop fields newer than the client, so every call returns the
  undecoded response for the caller to read or stream.
* Request bodies are plain dicts. The generated methods validate dict bodies through the pydantic
  models, rejecting or dropping unknown fields, which would corrupt a read-modify-write of a Node.
* The official client's own transport (urllib3 under ``ApiClient.call_api``) costs 1.3–1.8 ms of
  CPU a request, several times the transport's, and binds come by the thousand.

All requests pass one client-side token bucket (``--kube-api-qps`` / ``--kube-api-burst``), so
binds, status writes and watches share the same budget, as in client-go.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.kube.transport import Endpoint, Response, Transport, tls_context

__all__ = [
    "DEFAULT_TIMEOUT",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "KubeClient",
    "QueryValue",
    "TokenBucket",
    "build_configuration",
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


def build_configuration(*, kubeconfig: str | None = None, master: str | None = None,
                        context: str | None = None) -> Configuration:
    """Client configuration from the ``--kubeconfig`` / ``--master`` flags.

    A kubeconfig flag wins; without one the in-cluster service account is used when running in a
    pod, else ``$KUBECONFIG`` or ``~/.kube/config`` if present. ``master`` then overrides the
    server address (alone it means an unauthenticated endpoint such as a local proxy). Never touches
    the client's global default configuration.
    """
    configuration = Configuration()
    if kubeconfig:
        kube_config.load_kube_config(config_file=kubeconfig, context=context,
                                     client_configuration=configuration, persist_config=False)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        kube_config.load_incluster_config(client_configuration=configuration)
    elif not master:
        default = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or os.path.expanduser(
            "~/.kube/config")
        if not os.path.exists(default):
            raise kube_config.ConfigException(
                "no --kubeconfig, --master or in-cluster service account; "
                f"and {default} does not exist")
        kube_config.load_kube_config(config_file=default, context=context,
                                     client_configuration=configuration, persist_config=False)
    if master:
        configuration.host = master if "://" in master else f"https://{master}"
    if not configuration.verify_ssl and configuration.host.startswith("https:"):
        # Said once, naming the server (urllib3 would say it on every request).
        _log.warning("TLS certificate of %s is not verified (insecure-skip-tls-verify)",
                     configuration.host)
    # Watches hold one connection each for minutes; binds run from a worker pool.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 64)
    configuration.keep_alive = True
    return configuration


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


class KubeClient:
    """Raw-JSON requests through the official client's transport, behind a token bucket."""

    def __init__(self, api_client: ApiClient, *, qps: float = 2000.0, burst: int = 2000) -> None:
        self.api_client = api_client
        self.bucket = TokenBucket(qps=qps, burst=burst)
        configuration = api_client.configuration
        self.transport = Transport(endpoint_of(configuration),
                                   max_idle=int(configuration.connection_pool_maxsize or 64))
        if configuration.refresh_api_key_hook is not None:
            configuration.refresh_api_key_hook = _AtMostEvery(
                REFRESH_INTERVAL, configuration.refresh_api_key_hook)

    @classmethod
    def from_flags(cls, *, kubeconfig: str | None = None, master: str | None = None,
                   context: str | None = None, qps: float = 2000.0,
                   burst: int = 2000) -> KubeClient:
        """Build a client from the command-line flags (see :func:`build_configuration`)."""
        configuration = build_configuration(kubeconfig=kubeconfig, master=master, context=context)
        return cls(ApiClient(configuration), qps=qps, burst=burst)

    @classmethod
    def for_host(cls, host: str, *, qps: float = 0.0, burst: int = 1) -> KubeClient:
        """An unauthenticated client for ``host`` (a local proxy, or a test double)."""
        configuration = Configuration(host=host)
        configuration.connection_pool_maxsize = 64
        return cls(ApiClient(configuration), qps=qps, burst=burst)

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def request(self, method: str, path: str, *,
                query: Mapping[str, QueryValue] | None = None, body: Any = None,
                content_type: str | None = None,
                timeout: Timeout = DEFAULT_TIMEOUT) -> Response:
        """Send one request; return the response with its body unread (stream it or ``read``
        it, then ``release_conn``).

        Raises ``ApiException`` (typed subclasses for 404/409/5xx …) on a non-2xx answer and
        ``OSError`` subclasses when the server cannot be reached or answers garbage.
        """
        self.bucket.acquire()
        api = self.api_client
        headers = {**api.default_headers, "Accept": "application/json"}
        payload: bytes | None = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            payload = (body if isinstance(body, bytes)
                       else body.encode() if isinstance(body, str)
                       else json.dumps(body, separators=(",", ":")).encode())
        params = [(key, _query_text(value)) for key, value in (query or {}).items()
                  if value is not None]
        api.update_params_for_auth(headers, params, ["BearerToken"], path, method, body)
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
            raise ApiException.from_response(http_resp=response, body=text, data=None)
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
        decoded = json.loads(data)
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    def close(self) -> None:
        self.transport.close()
        self.api_client.close()


REFRESH_INTERVAL = 1.0
"""Seconds between two runs of the kubeconfig loader's credential refresh. The official client
runs it before every request (re-reading the whole user entry, even for a static token: a
twentieth of a bind's CPU); an exec plugin's or a projected token's expiry is seconds away at
the least, so once a second is as fresh."""


class _AtMostEvery:
    """A credential refresh hook run at most once per ``seconds``. The loader's hook installs
    itself again each time it runs; it is wrapped again then."""

    def __init__(self, seconds: float, hook: Callable[[Configuration], None]) -> None:
        self.seconds, self.hook = seconds, hook
        self._lock = threading.Lock()
        self._last = float("-inf")

    def __call__(self, configuration: Configuration) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last < self.seconds:
                return
            self._last = now
        self.hook(configuration)
        installed = configuration.refresh_api_key_hook
        if installed is not self:
            if installed is not None:
                self.hook = installed
            configuration.refresh_api_key_hook = self  # type: ignore[assignment]  # typed None upstream


def endpoint_of(configuration: Configuration) -> Endpoint:
    """The server, TLS and proxy of a client configuration, as the official client reads them:
    the CA file, client certificate and ``verify_ssl`` from the kubeconfig (a TLS context is
    built only for an ``https`` server, so a plain-HTTP endpoint loads no trust store)."""
    host = str(configuration.host)
    tls = None
    if host.startswith("https:") or "://" not in host:
        tls = tls_context(verify=bool(configuration.verify_ssl),
                          ca_file=configuration.ssl_ca_cert or None,
                          cert_file=configuration.cert_file or None,
                          key_file=configuration.key_file or None,
                          check_hostname=configuration.assert_hostname is not False)
    return Endpoint.from_url(host, tls=tls,
                             server_hostname=getattr(configuration, "tls_server_name", None) or "",
                             proxy=configuration.proxy or "",
                             proxy_headers=configuration.proxy_headers or None)


def _query_text(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
