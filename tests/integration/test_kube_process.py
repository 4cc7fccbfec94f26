"""``python -m scheduler run`` as a real process: conf hot reload on a ConfigMap-style symlink
swap, the SIGUSR1 cache dump, and a clean exit on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kube_helpers import make_node, wait_until

from scheduler.conf import DEFAULT_CONF
from tests.apiserver import ApiServerDouble

ROOT = Path(__file__).resolve().parents[2]


def publish(directory: Path, version: str, text: str) -> None:
    """What the kubelet does for a ConfigMap volume: new dir, then swap the ``..data`` link."""
    (directory / version).mkdir()
    (directory / version / "scheduler.conf").write_text(text)
    os.symlink(version, directory / "..data_tmp")
    os.replace(directory / "..data_tmp", directory / "..data")


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs SIGUSR1")
def test_process_reloads_conf_dumps_cache_and_exits_cleanly(apiserver: ApiServerDouble,
                                                            tmp_path: Path) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    confdir, dumps = tmp_path / "conf", tmp_path / "dumps"
    confdir.mkdir()
    dumps.mkdir()
    publish(confdir, "v1", DEFAULT_CONF)
    (confdir / "scheduler.conf").symlink_to("..data/scheduler.conf")
    log = tmp_path / "scheduler.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "scheduler", "run", "--master", apiserver.url,
             "--leader-elect=false", "--schedule-period=100ms", "--log-format=json",
             "--scheduler-conf", str(confdir / "scheduler.conf"), "--cache-dump-dir", str(dumps)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        wait_until(lambda: '"event": "scheduling"' in log.read_text(), timeout=30.0,
                   message="scheduling")
        publish(confdir, "v2", "actions: [broken")
        wait_until(lambda: "does not load; keeping the previous one" in log.read_text(),
                   timeout=10.0, message="broken conf refused")
        publish(confdir, "v3", DEFAULT_CONF.replace("backfill", "allocate").replace(
            '"enqueue, allocate, allocate"', '"enqueue, allocate"'))
        wait_until(lambda: "scheduler conf reloaded" in log.read_text(), timeout=10.0,
                   message="conf reloaded")
        process.send_signal(signal.SIGUSR1)
        wait_until(lambda: any(dumps.glob("*.json")), timeout=10.0, message="cache dump")
        (dump,) = dumps.glob("*.json")
        time.sleep(0.1)
        assert "n1" in json.loads(dump.read_text())["nodes"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0
        assert process.poll() == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
