"""One TLS context for every connection of a :class:`KubeClient`, from its configuration."""

from __future__ import annotations

import ssl

import certifi

from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.kubeconfig import ClientConfig

HOST = "example.invalid"


def _client(**settings: object) -> KubeClient:
    return KubeClient(ClientConfig(host=f"https://{HOST}:6443", **settings))  # type: ignore[arg-type]


def _context(client: KubeClient) -> ssl.SSLContext:
    context = client.transport.endpoint.tls
    assert context is not None
    return context


def test_every_connection_uses_one_context_with_the_configured_trust() -> None:
    client = _client(ca_file=certifi.where())
    context = _context(client)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # the CA file, loaded once here
    assert client.transport.endpoint.server_hostname == HOST


def test_skipping_verification_loads_no_trust_store() -> None:
    context = _context(_client(verify_ssl=False))
    assert context.verify_mode == ssl.CERT_NONE
    assert not context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0


def test_without_a_ca_file_the_system_trust_store_is_loaded_once() -> None:
    context = _context(_client())
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.cert_store_stats()["x509_ca"] > 0 or not ssl.get_default_verify_paths().cafile


def test_tls_server_name_and_a_hostname_check_turned_off_are_honoured() -> None:
    client = _client(tls_server_name="kubernetes.default", check_hostname=False)
    assert client.transport.endpoint.server_hostname == "kubernetes.default"
    assert not _context(client).check_hostname


def test_a_plain_http_server_gets_no_tls() -> None:
    client = KubeClient(ClientConfig(host="http://127.0.0.1:8080"))
    assert client.transport.endpoint.tls is None
    assert client.transport.endpoint.authority == "127.0.0.1:8080"
