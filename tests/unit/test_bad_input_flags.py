"""Negative or zero flag values where they make no sense are refused by the flag's own check,
naming the flag (also when written ``--flag -1s``, which argparse alone reads as a missing
value); an empty seed range says so; the TLS warning comes once, not per reconnect.

Peers: Volcano's scheduler validates its options (cmd/scheduler/app/options/options.go
``CheckOptionOrDie``: a period, QPS and burst above 0); client-go logs the insecure TLS
choice once per client config.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.kubeconfig import ClientConfig
from scheduler.commands.replay import parse_seeds

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = "conf/samples/topology.yaml"


@pytest.mark.parametrize(("args", "message"), [
    (("run", "--schedule-period", "-1s"),
     "lahar run: error: argument --schedule-period: must be above 0, got '-1s'"),
    (("run", "--schedule-period", "0"),
     "lahar run: error: argument --schedule-period: must be above 0, got '0'"),
    (("run", "--resource-sync-timeout", "-1s"),
     "lahar run: error: argument --resource-sync-timeout: must not be negative, got '-1s'"),
    (("run", "--kube-api-qps", "-5"),
     "lahar run: error: argument --kube-api-qps: must be above 0, got '-5'"),
    (("run", "--kube-api-burst", "0"),
     "lahar run: error: argument --kube-api-burst: must be at least 1, got 0"),
    (("inspect", "topology", TOPOLOGY, "--nodes", "-5"),
     "lahar inspect topology: error: argument --nodes: must be 0 or more, got -5"),
    (("inspect", "topology", TOPOLOGY, "--jobs", "-1"),
     "lahar inspect topology: error: argument --jobs: must be 0 or more, got -1"),
    (("replay", "--jobs", "0"), "lahar replay: error: argument --jobs: must be at least 1, got 0"),
    (("replay", "--jobs", "-3"),
     "lahar replay: error: argument --jobs: must be at least 1, got -3"),
], ids=lambda value: " ".join(value) if isinstance(value, tuple) else "")
def test_nonsense_numbers_are_refused_naming_the_flag(args: tuple[str, ...], message: str) -> None:
    result = subprocess.run([sys.executable, "-m", "scheduler", *args], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == message


def test_a_reversed_seed_range_is_named() -> None:
    with pytest.raises(ValueError, match=r"^--seeds: range '51-42' is empty .*write 42-51"):
        parse_seeds("51-42")
    assert parse_seeds("42-44,7") == [42, 43, 44, 7]


def test_the_unverified_tls_warning_is_given_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="scheduler.cluster.kube.client")
    config = ClientConfig(host="https://once.invalid:6443", verify_ssl=False)
    for _ in range(3):  # what lahar run's reconnect loop does
        KubeClient(config).close()
    assert sum("not verified" in r.getMessage() for r in caplog.records) == 1


def test_resource_sync_timeout_bounds_the_default_queue_retries() -> None:
    """The wait before the first cycle, the default queue's creation included, ends by
    --resource-sync-timeout (Volcano: options.go ``ResourceSyncTimeout``), not after 60
    one-second retries."""
    import threading
    import time

    from scheduler.cluster.kube.run import _ensure_default_queue

    class Unwritable:
        def ensure_queue(self, name: str) -> bool:
            raise ConnectionRefusedError("API server https://x: refused")

    started = time.monotonic()
    _ensure_default_queue(Unwritable(), "default", threading.Event(),  # type: ignore[arg-type]
                          deadline=started + 0.3)
    assert time.monotonic() - started < 2.0
