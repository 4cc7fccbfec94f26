"""``lahar run`` accepts every flag of Volcano's scheduler, so a vc-scheduler Deployment runs
unchanged; the ones Lahar does not act on are named in a warning at start.

The flags are those of ``ServerOption.AddFlags`` (volcano-sh/volcano
cmd/scheduler/app/options/options.go), component-base's leader election and klog's
(``--feature-gates``, cmd/scheduler/main.go, Lahar acts on).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.cluster.kube.flags import add_run_arguments, normalize
from scheduler.cluster.kube.volcano_flags import not_acted_on

REPO = Path(__file__).resolve().parents[2]

VOLCANO_FLAGS = [
    "--master=https://x:6443", "--kubeconfig=/k", "--ca-cert-file=/ca", "--tls-cert-file=/c",
    "--tls-private-key-file=/k", "--lock-object-namespace=volcano-system",
    "--scheduler-name=volcano", "--scheduler-conf=/c.conf", "--schedule-period=1s",
    "--resync-period=0s", "--default-queue=default", "--listen-address=:8080",
    "--healthz-address=:11251", "--priority-class=true", "--kube-api-qps=2000",
    "--kube-api-burst=2000", "--minimum-feasible-nodes=100",
    "--minimum-percentage-nodes-to-find=5", "--percentage-nodes-to-find=0",
    "--plugins-dir=/plugins", "--csi-storage=false", "--enable-healthz=true",
    "--enable-metrics=true", "--enable-pprof", "--node-selector=role:train",
    "--cache-dumper=true", "--cache-dump-dir=/tmp", "--node-worker-threads=20",
    "--gate-removal-worker-num=5", "--ignored-provisioners=rancher.io/local-path",
    "--resource-sync-timeout=60s", "--disable-default-scheduler-config=false",
    "--scheduler-sharding-mode=none", "--scheduler-sharding-name=volcano",
    "--leader-elect=false",
    "--leader-elect-resource-lock=leases", "--leader-elect-resource-namespace=volcano-system",
    "-v=3", "--logtostderr", "--log-dir=/var/log",
]


def _parse(*flags: str) -> object:
    import argparse

    parser = argparse.ArgumentParser(exit_on_error=False)
    add_run_arguments(parser)
    return normalize(parser.parse_args(list(flags)))


def test_every_volcano_scheduler_flag_is_accepted_and_the_unused_ones_named() -> None:
    args = _parse(*VOLCANO_FLAGS)
    assert not_acted_on(args) == [  # type: ignore[arg-type]
        "--ca-cert-file=/ca", "--csi-storage=false", "--disable-default-scheduler-config=false",
        "--enable-pprof=true", "--gate-removal-worker-num=5", "--ignored-provisioners=rancher.io/local-path",
        "--leader-elect-resource-lock=leases", "--log-dir=/var/log",
        "--node-worker-threads=20", "--plugins-dir=/plugins", "--priority-class=true",
        "--resync-period=0s", "--tls-cert-file=/c", "--tls-private-key-file=/k",
    ]


def test_no_warning_without_them() -> None:
    assert not_acted_on(_parse("--schedule-period=2s")) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("flag", ["--version"])
def test_version_prints_and_quits(flag: str) -> None:
    result = subprocess.run([sys.executable, "-m", "scheduler", "run", flag], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and result.stdout.startswith("lahar ")
