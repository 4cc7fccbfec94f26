"""Reading kubeconfig files and the in-cluster service account into a ClientConfig; exec
plugins through the official loader; errors that name the file and the entry."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cluster.kube import kubeconfig
from scheduler.cluster.kube.kubeconfig import ConfigError, TokenFile, load_client_config


def write_kubeconfig(folder: Path, *, cluster: dict[str, Any], user: dict[str, Any],
                     current: str = "ctx") -> str:
    path = folder / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "contexts": [{"name": "ctx", "context": {"cluster": "c1", "user": "u1"}},
                     {"name": "other", "context": {"cluster": "c1", "user": "u1"}}],
        "clusters": [{"name": "c1", "cluster": cluster}],
        "users": [{"name": "u1", "user": user}]}))
    return str(path)


def test_a_token_user_on_a_verified_server(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("CA")
    path = write_kubeconfig(tmp_path, cluster={"server": "https://10.0.0.1:6443",
                                               "certificate-authority": "ca.crt",
                                               "tls-server-name": "kubernetes",
                                               "proxy-url": "http://proxy:3128"},
                            user={"token": "abc"})
    config = load_client_config(kubeconfig=path)
    assert config.host == "https://10.0.0.1:6443"
    assert config.verify_ssl and config.ca_file == str(tmp_path / "ca.crt")  # relative to it
    assert (config.tls_server_name, config.proxy) == ("kubernetes", "http://proxy:3128")
    assert config.auth is not None and config.auth() == {"authorization": "Bearer abc"}


def test_certificate_data_lands_in_private_files_and_insecure_is_read(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path, cluster={"server": "https://api:6443",
                                               "insecure-skip-tls-verify": True},
                            user={"client-certificate-data": base64.b64encode(b"CERT").decode(),
                                  "client-key-data": base64.b64encode(b"KEY").decode()})
    config = load_client_config(kubeconfig=path)
    assert not config.verify_ssl and config.ca_file is None
    assert config.cert_file and config.key_file
    assert Path(config.cert_file).read_bytes() == b"CERT"
    assert Path(config.key_file).read_bytes() == b"KEY"
    assert stat.S_IMODE(os.stat(config.key_file).st_mode) == 0o600
    assert config.auth is None


def test_basic_auth_and_the_master_flag_override(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path, cluster={"server": "https://api:6443"},
                            user={"username": "admin", "password": "s3cret"})
    config = load_client_config(kubeconfig=path, master="10.1.1.1:8443")
    assert config.host == "https://10.1.1.1:8443"
    expected = "Basic " + base64.b64encode(b"admin:s3cret").decode()
    assert config.auth is not None and config.auth() == {"authorization": expected}


def test_a_token_file_is_read_again_once_a_minute(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    now = [100.0]
    source = TokenFile(str(token), where="test", clock=lambda: now[0])
    assert source.headers() == {"authorization": "Bearer one"}
    token.write_text("two")
    now[0] += 30
    assert source.headers() == {"authorization": "Bearer one"}
    now[0] += 31
    assert source.headers() == {"authorization": "Bearer two"}
    token.unlink()  # a failed re-read keeps the last token
    now[0] += 61
    assert source.headers() == {"authorization": "Bearer two"}


def test_the_in_cluster_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ca.crt").write_text("CA")
    (tmp_path / "token").write_text("sa-token")
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", str(tmp_path))
    config = load_client_config(environ={"KUBERNETES_SERVICE_HOST": "fd00::1",
                                         "KUBERNETES_SERVICE_PORT": "443"})
    assert config.host == "https://[fd00::1]:443"
    assert config.ca_file == str(tmp_path / "ca.crt")
    assert config.auth is not None and config.auth() == {"authorization": "Bearer sa-token"}


@pytest.mark.parametrize(("change", "message"), [
    ({"current-context": "missing"}, 'context "missing" not found'),
    ({"clusters": [{"name": "c1", "cluster": {}}]}, 'cluster "c1" has no server'),
    ({"users": [{"name": "u1", "user": {"client-certificate-data": "%%%"}}]},
     'user "u1": client-certificate-data is not base64'),
    ({"clusters": [{"name": "c1", "cluster": {"server": "https://a",
                                               "certificate-authority": "nope.crt"}}]},
     "certificate-authority .*nope.crt does not exist"),
], ids=["no-context", "no-server", "bad-data", "missing-file"])
def test_errors_name_the_file_and_the_entry(tmp_path: Path, change: dict[str, Any],
                                            message: str) -> None:
    path = write_kubeconfig(tmp_path, cluster={"server": "https://api"}, user={"token": "t"})
    document = yaml.safe_load(Path(path).read_text())
    document.update(change)
    Path(path).write_text(yaml.safe_dump(document))
    with pytest.raises(ConfigError, match=f"kubeconfig {path}: .*{message}"):
        load_client_config(kubeconfig=path)


def test_unreadable_files_and_nothing_to_use(tmp_path: Path) -> None:
    (tmp_path / "config").write_text("{not yaml")
    with pytest.raises(ConfigError, match="not YAML"):
        load_client_config(kubeconfig=str(tmp_path / "config"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_client_config(environ={"KUBECONFIG": str(tmp_path / "absent")})


def test_an_exec_plugin_goes_through_the_official_loader(tmp_path: Path) -> None:
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1",
                  "kind": "ExecCredential", "status": {"token": "from-plugin"}}
    path = write_kubeconfig(tmp_path, cluster={"server": "https://api:6443"}, user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
        "args": ["-c", f"print({json.dumps(json.dumps(credential))})"]}})
    config = load_client_config(kubeconfig=path)
    assert config.host == "https://api:6443"
    assert config.auth is not None and config.auth() == {"authorization": "Bearer from-plugin"}


def test_a_token_user_never_imports_the_official_client(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path, cluster={"server": "https://api:6443"},
                            user={"token": "t"})
    code = ("import sys; from scheduler.cluster.kube.client import KubeClient; "
            f"KubeClient.from_flags(kubeconfig={path!r}); "
            "print('kubernetes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"


def test_the_official_refresh_runs_at_most_once_a_second() -> None:
    """The official loader's hook re-reads the whole user entry on every call (for an exec
    plugin, at least a cache lookup and a date parse); once a second is as fresh."""
    class Configuration:
        runs = 0

        def get_api_key_with_prefix(self, identifier: str, alias: str | None = None) -> str:
            self.runs += 1
            return f"Bearer token-{self.runs}"

    configuration = Configuration()
    now = [10.0]
    auth = kubeconfig._OfficialAuth(configuration, clock=lambda: now[0])
    assert [auth() for _ in range(50)][-1] == {"authorization": "Bearer token-1"}
    now[0] += 1.0
    assert auth() == {"authorization": "Bearer token-2"}
    assert configuration.runs == 2
