"""Where the API server is and how to authenticate to it: kubeconfig files and the in-cluster
service account, read into one :class:`ClientConfig`.

The common credentials are read here: a server with its CA (file or data),
``insecure-skip-tls-verify``, ``tls-server-name`` and ``proxy-url``; a user with a client
certificate (file or data), a bearer ``token`` or ``tokenFile``, or a username and password; and
the pod's service account (its projected token is re-read once a minute, as it rotates). A user
that authenticates through an ``exec`` plugin or an ``auth-provider`` is handed to the official
client's loader, which runs those; the official package is imported only then, because importing
it costs almost half a second at every start (it pulls in requests, OAuth and pydantic).

Relative paths in a kubeconfig are relative to the file's folder, as kubectl reads them. Errors
name the file and the entry: ``kubeconfig /root/.kube/config: context "prod" not found``.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from scheduler.confyaml import load_yaml

__all__ = ["ClientConfig", "ConfigError", "load_client_config"]

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_REREAD_SECONDS = 60.0
"""How long a token read from a file is used before the file is read again (client-go re-reads
the in-cluster token each minute; the kubelet rotates it well before it expires)."""

Auth = Callable[[], Mapping[str, str]]
"""The headers that authenticate one request (cheap to call: it caches what it reads)."""


class ConfigError(ValueError):
    """A kubeconfig or in-cluster setting that cannot be used; the message says which."""


@dataclass(slots=True)
class ClientConfig:
    """Everything :class:`~scheduler.cluster.kube.client.KubeClient` needs to reach a server."""

    host: str
    verify_ssl: bool = True
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    tls_server_name: str = ""
    check_hostname: bool = True
    proxy: str = ""
    auth: Auth | None = None


def load_client_config(*, kubeconfig: str | None = None, master: str | None = None,
                       context: str | None = None,
                       environ: Mapping[str, str] | None = None) -> ClientConfig:
    """The configuration of the ``--kubeconfig`` / ``--master`` flags.

    A kubeconfig flag wins; without one the in-cluster service account is used when running in
    a pod, else ``$KUBECONFIG`` (its first file) or ``~/.kube/config`` if present. ``master``
    then overrides the server address (alone it means an unauthenticated endpoint such as a
    local proxy).
    """
    env = os.environ if environ is None else environ
    if kubeconfig:
        config = _from_kubeconfig(kubeconfig, context)
    elif env.get("KUBERNETES_SERVICE_HOST"):
        config = _in_cluster(env)
    elif master:
        config = ClientConfig(host="")
    else:
        default = (env.get("KUBECONFIG", "").split(os.pathsep)[0]
                   or os.path.expanduser("~/.kube/config"))
        if not os.path.exists(default):
            raise ConfigError("no --kubeconfig, --master or in-cluster service account; "
                              f"and {default} does not exist")
        config = _from_kubeconfig(default, context)
    if master:
        config.host = master if "://" in master else f"https://{master}"
    return config


# -- kubeconfig files --------------------------------------------------------------------------

def _from_kubeconfig(path: str, context_name: str | None) -> ClientConfig:
    where = f"kubeconfig {path}"
    try:
        with open(path, encoding="utf-8") as handle:
            document = load_yaml(handle.read())
    except OSError as error:
        raise ConfigError(f"{where}: cannot be read: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{where}: not YAML: {error}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{where}: not a kubeconfig (a mapping with contexts, clusters, users)")
    name = context_name or document.get("current-context") or ""
    if not name:
        raise ConfigError(f"{where}: no current-context, and no context was named")
    context = _named(document, "contexts", "context", name, where)
    cluster = _named(document, "clusters", "cluster", str(context.get("cluster") or ""), where)
    user_name = str(context.get("user") or "")
    user = _named(document, "users", "user", user_name, where) if user_name else {}
    if user.get("exec") or user.get("auth-provider"):
        return _through_official_loader(path, name)
    server = cluster.get("server")
    if not server:
        raise ConfigError(f'{where}: cluster "{context.get("cluster")}" has no server')
    base = os.path.dirname(os.path.abspath(path))
    cluster_where = f'{where}: cluster "{context.get("cluster")}"'
    user_where = f'{where}: user "{user_name}"'
    config = ClientConfig(
        host=str(server),
        verify_ssl=not bool(cluster.get("insecure-skip-tls-verify")),
        ca_file=_file_or_data(cluster, "certificate-authority", base, cluster_where),
        cert_file=_file_or_data(user, "client-certificate", base, user_where),
        key_file=_file_or_data(user, "client-key", base, user_where),
        tls_server_name=str(cluster.get("tls-server-name") or ""),
        proxy=str(cluster.get("proxy-url") or ""))
    if bool(config.cert_file) != bool(config.key_file):
        raise ConfigError(f"{user_where}: a client certificate needs both client-certificate "
                          "and client-key")
    config.auth = _user_auth(user, base, user_where)
    return config


def _named(document: Mapping[str, Any], section: str, field: str, name: str,
           where: str) -> dict[str, Any]:
    for entry in document.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(field)
            if not isinstance(body, dict):
                raise ConfigError(f'{where}: {field} "{name}" has no {field} settings')
            return body
    raise ConfigError(f'{where}: {field} "{name}" not found')


def _file_or_data(entry: Mapping[str, Any], key: str, base: str, where: str) -> str | None:
    """A file path for ``key`` (relative to ``base``), or a private temporary file holding the
    decoded ``key-data``."""
    data = entry.get(f"{key}-data")
    if data:
        try:
            raw = base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"{where}: {key}-data is not base64") from None
        return _private_file(raw)
    path = entry.get(key)
    if not path:
        return None
    full = os.path.join(base, os.path.expanduser(str(path)))
    if not os.path.exists(full):
        raise ConfigError(f"{where}: {key} {full} does not exist")
    return full


def _private_file(raw: bytes) -> str:
    handle = tempfile.NamedTemporaryFile(prefix="lahar-kubeconfig-", delete=False)  # noqa: SIM115
    with handle:
        os.chmod(handle.name, 0o600)
        handle.write(raw)
    atexit.register(_remove, handle.name)
    return handle.name


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _user_auth(user: Mapping[str, Any], base: str, where: str) -> Auth | None:
    if user.get("token"):
        header = {"authorization": f"Bearer {user['token']}"}
        return lambda: header
    if user.get("tokenFile"):
        path = os.path.join(base, os.path.expanduser(str(user["tokenFile"])))
        return TokenFile(path, where=f"{where}: tokenFile").headers
    if user.get("username") is not None and user.get("password") is not None:
        pair = f"{user['username']}:{user['password']}".encode()
        header = {"authorization": "Basic " + base64.b64encode(pair).decode()}
        return lambda: header
    return None


class TokenFile:
    """A bearer token read from a file, read again every :data:`TOKEN_REREAD_SECONDS` (a
    projected service-account token rotates); a failed re-read keeps the last token."""

    def __init__(self, path: str, *, where: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.where, self.clock = path, where, clock
        self._lock = threading.Lock()
        self._header = {"authorization": f"Bearer {self._read()}"}
        self._read_at = clock()

    def _read(self) -> str:
        try:
            with open(self.path, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as error:
            raise ConfigError(f"{self.where} {self.path}: {error.strerror or error}") from None
        if not token:
            raise ConfigError(f"{self.where} {self.path} is empty")
        return token

    def headers(self) -> Mapping[str, str]:
        now = self.clock()
        if now - self._read_at < TOKEN_REREAD_SECONDS:
            return self._header
        with self._lock:
            if now - self._read_at >= TOKEN_REREAD_SECONDS:
                self._read_at = now
                with contextlib.suppress(ConfigError):
                    self._header = {"authorization": f"Bearer {self._read()}"}
        return self._header


def _in_cluster(env: Mapping[str, str]) -> ClientConfig:
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    ca = os.path.join(SERVICE_ACCOUNT, "ca.crt")
    if not os.path.exists(ca):
        raise ConfigError(f"in-cluster service account: {ca} does not exist")
    token = TokenFile(os.path.join(SERVICE_ACCOUNT, "token"),
                      where="in-cluster service account: token")
    return ClientConfig(host=f"https://{host}:{port}", ca_file=ca, auth=token.headers)


# -- exec plugins and auth providers: the official loader --------------------------------------

def _through_official_loader(path: str, context: str) -> ClientConfig:
    from kubernetes import config as kube_config
    from kubernetes.client import Configuration

    configuration = Configuration()
    try:
        kube_config.load_kube_config(config_file=path, context=context,
                                     client_configuration=configuration, persist_config=False)
    except kube_config.ConfigException as error:
        raise ConfigError(f"kubeconfig {path}: {error}") from None
    return ClientConfig(
        host=str(configuration.host), verify_ssl=bool(configuration.verify_ssl),
        ca_file=configuration.ssl_ca_cert or None, cert_file=configuration.cert_file or None,
        key_file=configuration.key_file or None,
        tls_server_name=getattr(configuration, "tls_server_name", None) or "",
        check_hostname=configuration.assert_hostname is not False,
        proxy=configuration.proxy or "", auth=_OfficialAuth(configuration))


REFRESH_INTERVAL = 1.0
"""Seconds between two runs of the official loader's credential refresh, which re-runs the
whole user entry (an exec plugin's credential is cached by the plugin's own expiry)."""


class _OfficialAuth:
    """Headers from an official ``Configuration``, its refresh hook run at most once per
    :data:`REFRESH_INTERVAL` (the loader's hook installs itself again each time it runs)."""

    def __init__(self, configuration: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.configuration, self.clock = configuration, clock
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._header: dict[str, str] = {}

    def __call__(self) -> Mapping[str, str]:
        now = self.clock()
        with self._lock:
            if now - self._last >= REFRESH_INTERVAL:
                self._last = now
                value = self.configuration.get_api_key_with_prefix("BearerToken",
                                                                   alias="authorization")
                self._header = {"authorization": value} if value else {}
        return self._header
