"""``lahar run`` as a subprocess of the suite, with its own conf, name and ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.e2e.kube import ROOT, short_id

PERIOD = os.environ.get("LAHAR_E2E_SCHEDULE_PERIOD", "200ms")
LEASE = ("--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
         "--leader-elect-retry-period=500ms")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SchedulerProcess:
    """One ``python -m scheduler run`` process; logs go to a file in ``workdir``."""

    def __init__(self, *, kubeconfig: str, name: str, workdir: Path, conf: str,
                 node_selector: dict[str, str] | None = None, leader_elect: bool = False,
                 lease_namespace: str = "", lease_name: str = "",
                 extra_args: tuple[str, ...] = ()) -> None:
        self.name = name
        self.lease = (lease_namespace, lease_name or name)
        """The Lease campaigned for (namespace, name) when ``leader_elect``."""
        self.port = free_port()
        tag = f"{name}-{short_id()}"
        conf_path = workdir / f"{tag}.conf"
        conf_path.write_text(conf)
        self.log_path = workdir / f"{tag}.log"
        argv = [sys.executable, "-m", "scheduler", "run", "--kubeconfig", kubeconfig,
                "--scheduler-name", name, "--scheduler-conf", str(conf_path),
                "--schedule-period", PERIOD, "--enable-healthz",
                f"--healthz-address=127.0.0.1:{self.port}", "--enable-metrics",
                f"--listen-address=127.0.0.1:{self.port}", "--log-format=json",
                f"--cache-dump-dir={workdir}"]
        for key, value in (node_selector or {}).items():
            argv += ["--node-selector", f"{key}:{value}"]
        if leader_elect:
            argv += ["--leader-elect=true", "--leader-elect-resource-namespace", lease_namespace,
                     "--leader-elect-resource-name", lease_name or name, *LEASE]
        else:
            argv.append("--leader-elect=false")
        argv += extra_args
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])))
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT)

    def _get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}",
                                        timeout=2) as reply:
                return int(reply.status), reply.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), ""
        except OSError:
            return 0, ""

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_serving(self, *, ready: bool = True, timeout: float = 60.0) -> None:
        """Until ``/readyz`` (or only ``/healthz``) answers 200."""
        path = "/readyz" if ready else "/healthz"
        deadline = time.monotonic() + timeout
        while self._get(path)[0] != 200:
            if not self.alive():
                raise AssertionError(f"scheduler {self.name} exited with "
                                     f"{self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"scheduler {self.name} not serving {path}:\n"
                                     f"{self.log_tail()}")
            time.sleep(0.1)

    def cycles(self) -> float:
        """How many scheduling cycles this process ran (0 for a standby)."""
        status, body = self._get("/metrics")
        if status != 200:
            return 0.0
        for line in body.splitlines():
            if line.startswith("volcano_e2e_scheduling_latency_milliseconds_count"):
                return float(line.split()[-1])
        return 0.0

    def terminate(self, timeout: float = 20.0) -> int:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()
        return int(self.process.returncode)

    def kill(self) -> None:
        """SIGKILL: no lease release, no clean-up, like a node dying."""
        if self.alive():
            self.process.kill()
            self.process.wait(10)
