"""One TLS context for the whole connection pool of a :class:`KubeClient`."""

from __future__ import annotations

import ssl

import certifi
from kubernetes.client import ApiClient, Configuration

from scheduler.cluster.kube.client import KubeClient

HOST = "example.invalid"


def _client(**settings: object) -> KubeClient:
    configuration = Configuration(host=f"https://{HOST}:6443")
    for key, value in settings.items():
        setattr(configuration, key, value)
    return KubeClient(ApiClient(configuration))


def test_every_pool_connection_uses_one_context_with_the_configured_trust() -> None:
    client = _client(ssl_ca_cert=certifi.where())
    manager = client.api_client.rest_client.pool_manager
    context = manager.connection_pool_kw["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.cert_store_stats()["x509_ca"] > 0  # the CA file, loaded once here
    assert manager.connection_pool_kw["ca_certs"] is None  # not again per connection
    pool = manager.connection_from_host(HOST, 6443, "https")
    assert pool.conn_kw["ssl_context"] is context  # handed to each new connection
    assert manager.connection_from_host(HOST, 6443, "https") is pool


def test_skipping_verification_loads_no_trust_store() -> None:
    context = _client(verify_ssl=False).api_client.rest_client.pool_manager \
        .connection_pool_kw["ssl_context"]
    assert context.verify_mode == ssl.CERT_NONE
    assert context.cert_store_stats()["x509_ca"] == 0


def test_without_a_ca_file_the_system_trust_store_is_loaded_once() -> None:
    context = _client().api_client.rest_client.pool_manager.connection_pool_kw["ssl_context"]
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.cert_store_stats()["x509_ca"] > 0 or not ssl.get_default_verify_paths().cafile
