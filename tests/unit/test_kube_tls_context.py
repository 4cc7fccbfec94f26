"""One TLS context for every connection of a :class:`KubeClient`, from its configuration."""

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


def _context(client: KubeClient) -> ssl.SSLContext:
    context = client.transport.endpoint.tls
    assert context is not None
    return context


def test_every_connection_uses_one_context_with_the_configured_trust() -> None:
    client = _client(ssl_ca_cert=certifi.where())
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


def test_tls_server_name_and_assert_hostname_are_honoured() -> None:
    client = _client(tls_server_name="kubernetes.default", assert_hostname=False)
    assert client.transport.endpoint.server_hostname == "kubernetes.default"
    assert not _context(client).check_hostname


def test_a_plain_http_server_gets_no_tls() -> None:
    client = KubeClient(ApiClient(Configuration(host="http://127.0.0.1:8080")))
    assert client.transport.endpoint.tls is None
    assert client.transport.endpoint.authority == "127.0.0.1:8080"


def test_the_credential_refresh_runs_at_most_once_a_second_even_as_it_reinstalls_itself() -> None:
    """The kubeconfig loader's hook re-reads the user entry and installs itself again each time
    it runs (``KubeConfigLoader._set_config``); it must still run once, not per request."""
    configuration = Configuration(host="https://example.invalid:6443")
    configuration.api_key = {"BearerToken": "token-0"}
    runs: list[str] = []

    def loader_hook(config: Configuration) -> None:
        runs.append(config.api_key.get("BearerToken", ""))
        config.api_key["BearerToken"] = f"token-{len(runs)}"
        config.refresh_api_key_hook = loader_hook  # type: ignore[assignment]

    configuration.refresh_api_key_hook = loader_hook  # type: ignore[assignment]
    client = KubeClient(ApiClient(configuration))
    for _ in range(50):
        headers: dict[str, str] = {}
        client.api_client.update_params_for_auth(headers, [], ["BearerToken"], "/", "GET", None)
    assert runs == ["token-0"]
    assert headers["authorization"] == "token-1"
    assert configuration.refresh_api_key_hook is not loader_hook  # wrapped again
