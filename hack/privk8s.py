"""A private control plane for the large benchmarks: etcd + kube-apiserver on their own ports.

    with private_server() as kubeconfig: ...

A benchmark of thousands of Nodes and a hundred thousand pods would load, and leave objects
in, an API server others use; this starts one of its own with the e2e suite's
:func:`tests.e2e.privateapi.private_apiserver` (the binaries, certificates and token of
``$REALK8S_HOME``, as the realk8s ``setup.sh`` prepared them), etcd's data in a temporary
folder with an 8 GiB backend quota, and yields a kubeconfig pointing at it. Both processes are
stopped and the data removed on exit. Ports: ``LAHAR_PRIVATE_ETCD_PORT`` (default 25379, peer
port + 1) and ``LAHAR_PRIVATE_APISERVER_PORT`` (default 18443); if one is taken (another
run's private server), it refuses to start, since that server would answer in place of its own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.privateapi import missing, private_apiserver


def in_use(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def private_server(*, etcd_port: int | None = None,
                   apiserver_port: int | None = None) -> Iterator[str]:
    """Start etcd and kube-apiserver; yield a kubeconfig path; stop both and drop the data."""
    why = missing()
    if why:
        raise SystemExit(f"no private control plane: {why}")
    etcd_port = etcd_port or int(os.environ.get("LAHAR_PRIVATE_ETCD_PORT", "25379"))
    port = apiserver_port or int(os.environ.get("LAHAR_PRIVATE_APISERVER_PORT", "18443"))
    busy = [p for p in (etcd_port, etcd_port + 1, port) if in_use(p)]
    if busy:  # another run's control plane: it would answer in place of ours
        raise SystemExit(f"no private control plane: port(s) {busy} in use (another private "
                         "server?); set LAHAR_PRIVATE_ETCD_PORT and LAHAR_PRIVATE_APISERVER_PORT")
    with tempfile.TemporaryDirectory(prefix="lahar-privk8s-") as work, private_apiserver(
            Path(work), extra_flags=["--v=0"], etcd_flags=["--quota-backend-bytes", str(8 << 30)],
            ports=(etcd_port, etcd_port + 1, port)) as kubeconfig:
        yield kubeconfig
