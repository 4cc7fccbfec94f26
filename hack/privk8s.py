"""A private control plane for the large benchmarks: etcd + kube-apiserver on their own ports.

    with private_server() as kubeconfig: ...

A benchmark of thousands of Nodes and a hundred thousand pods would load, and leave objects
in, an API server others use; this starts one of its own from the binaries of
``$REALK8S_HOME`` (default ``~/.local/share/realk8s``, as prepared by the realk8s
``setup.sh``), with the flags its ``up.sh`` uses, its certificates and token, etcd's data in a
temporary folder, and a kubeconfig pointing at it. Both processes are killed and the data
removed on exit. Ports: ``LAHAR_PRIVATE_ETCD_PORT`` (default 25379, peer port + 1) and
``LAHAR_PRIVATE_APISERVER_PORT`` (default 18443).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

HOME = Path(os.environ.get("REALK8S_HOME", Path.home() / ".local/share/realk8s"))
ETCD = shutil.which("etcd") or "/usr/bin/etcd"


def _ready(url: str, token: str = "") -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}
                                     if token else {})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as reply:
            body = reply.read()
            return reply.status == 200 and (body.strip() == b"ok" or b'"true"' in body)
    except OSError:
        return False


def _wait(url: str, process: subprocess.Popen[bytes], what: str, *, token: str = "",
          timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not _ready(url, token):
        if process.poll() is not None:
            raise SystemExit(f"private {what} exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"private {what} not ready in {timeout:.0f}s")
        time.sleep(0.3)


@contextlib.contextmanager
def private_server(*, etcd_port: int | None = None,
                   apiserver_port: int | None = None) -> Iterator[str]:
    """Start etcd and kube-apiserver; yield a kubeconfig path; stop both and drop the data."""
    etcd_port = etcd_port or int(os.environ.get("LAHAR_PRIVATE_ETCD_PORT", "25379"))
    port = apiserver_port or int(os.environ.get("LAHAR_PRIVATE_APISERVER_PORT", "18443"))
    pki = HOME / "pki"
    token = (pki / "tokens.csv").read_text().split(",", 1)[0].strip()
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="lahar-privk8s-") as work:
        workdir = Path(work)
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{etcd_port + 1}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        try:
            with open(workdir / "etcd.log", "wb") as log:
                processes.append(subprocess.Popen(
                    [ETCD, "--name", "private", "--data-dir", str(workdir / "etcd"),
                     "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                     "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                     "--initial-cluster", f"private={peer_url}", "--initial-cluster-state",
                     "new", "--quota-backend-bytes", str(8 << 30), "--log-level", "warn"],
                    stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
            _wait(f"{etcd_url}/health", processes[0], "etcd")
            with open(workdir / "apiserver.log", "wb") as log:
                processes.append(subprocess.Popen(
                    [str(HOME / "bin" / "kube-apiserver"), f"--etcd-servers={etcd_url}",
                     "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                     "--endpoint-reconciler-type=none", f"--secure-port={port}",
                     f"--cert-dir={workdir / 'certs'}",
                     f"--tls-cert-file={pki / 'apiserver.crt'}",
                     f"--tls-private-key-file={pki / 'apiserver.key'}",
                     f"--token-auth-file={pki / 'tokens.csv'}",
                     "--service-account-issuer=https://kubernetes.default.svc",
                     f"--service-account-key-file={pki / 'sa.pub'}",
                     f"--service-account-signing-key-file={pki / 'sa.key'}",
                     "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
                     "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                     "--allow-privileged=true", "--profiling=false", "--v=0"],
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            _wait(f"https://127.0.0.1:{port}/readyz", processes[1], "kube-apiserver",
                  token=token)
            kubeconfig = workdir / "kubeconfig"
            kubeconfig.write_text(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: private\n  cluster:\n"
                f"    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\n"
                f"users:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n"
                "- name: private\n  context: {cluster: private, user: admin}\n"
                "current-context: private\n")
            yield str(kubeconfig)
        finally:
            for process in reversed(processes):
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)

