"""A private kube-apiserver + etcd for e2e cases that need server flags the shared one lacks.

The e2e suite's cluster (``KUBECONFIG``) is shared and started without feature gates. A case
that needs a gate (Kubernetes 1.28-1.30 keep a pod's ``spec.resourceClaims`` only with
``DynamicResourceAllocation`` on) starts its own control plane from the binaries of
``../shared/tools/realk8s`` (``REALK8S_HOME``, default ``~/.local/share/realk8s``), as its
``up.sh`` does but on free ports, with a data directory of its own and the flags it asks for,
and stops it afterwards. It reuses that setup's serving certificate, service-account keys and
admin token (read only). Where the binaries or ``/usr/bin/etcd`` are missing (CI) the caller is
told why, and skips.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.e2e.processes import free_port

ETCD = Path("/usr/bin/etcd")


def realk8s_home() -> Path:
    return Path(os.environ.get("REALK8S_HOME") or Path.home() / ".local/share/realk8s")


def missing() -> str:
    """Why a private control plane cannot be started here ("" when it can)."""
    home = realk8s_home()
    for path in (home / "bin/kube-apiserver", home / "pki/tokens.csv",
                 home / "pki/apiserver.crt", ETCD):
        if not path.exists():
            return f"no {path} (see ../shared/tools/realk8s/README.md)"
    return ""


def _ready(port: int, token: str) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(f"https://127.0.0.1:{port}/readyz",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as answer:
            return bool(answer.read() == b"ok")
    except OSError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def private_apiserver(workdir: Path, *, extra_flags: list[str], etcd_flags: Sequence[str] = (),
                      ports: tuple[int, int, int] | None = None,
                      timeout: float = 90.0) -> Iterator[str]:
    """Start etcd (with ``etcd_flags``) and kube-apiserver (with ``extra_flags``); yield a
    kubeconfig for them. ``ports``: etcd's client and peer ports and the API server's secure
    port (default: free ones)."""
    home = realk8s_home()
    pki = home / "pki"
    token = (pki / "tokens.csv").read_text().split(",")[0].strip()
    client, peer, secure = ports or (free_port(), free_port(), free_port())
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "etcd").mkdir(mode=0o700, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
    started: list[subprocess.Popen[bytes]] = []
    try:
        with open(workdir / "etcd.log", "wb") as log:
            started.append(subprocess.Popen([
                str(ETCD), "--name", "private", "--data-dir", str(workdir / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{client}",
                "--advertise-client-urls", f"http://127.0.0.1:{client}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"private=http://127.0.0.1:{peer}",
                "--initial-cluster-state", "new", "--logger", "zap", "--log-outputs", "stderr",
                "--log-level", "warn", *etcd_flags], stdout=log, stderr=log, env=env,
                start_new_session=True))
        with open(workdir / "kube-apiserver.log", "wb") as log:
            started.append(subprocess.Popen([
                str(home / "bin/kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{client}", "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
                f"--secure-port={secure}", f"--cert-dir={workdir / 'certs'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--allow-privileged=true", "--profiling=false", "--v=1", *extra_flags],
                stdout=log, stderr=log, start_new_session=True))
        deadline = time.monotonic() + timeout
        while not _ready(secure, token):
            for process in started:
                if process.poll() is not None:
                    raise RuntimeError(f"private control plane exited; see {workdir}/*.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"private kube-apiserver not ready in {timeout:.0f}s; "
                                   f"see {workdir}/kube-apiserver.log")
            time.sleep(0.3)
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: private\n  cluster:\n    server: https://127.0.0.1:{secure}\n"
            "    insecure-skip-tls-verify: true\n"
            f"users:\n- name: admin\n  user:\n    token: {token}\n"
            "contexts:\n- name: private\n  context: {cluster: private, user: admin}\n"
            "current-context: private\n")
        yield str(kubeconfig)
    finally:
        for process in reversed(started):
            _stop(process)
