"""``lahar run`` against the API server double with fine-grained devices: the Device object
arrives through the watch, the choice travels inside the Binding, and a restarted scheduler
rebuilds the ledger from the bound pod's annotation."""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler.cluster.kube.flags import normalize
from scheduler.cluster.kube.run import add_run_arguments, run_main
from tests.apiserver import ApiServerDouble
from tests.apiserver.store import DEFAULT_COLLECTIONS, DEVICES
from tests.builders import make_node
from tests.devices.finegrained_helpers import (
    ALLOCATED,
    device_object,
    fg_pod,
    finegrained_conf,
    gpu,
)


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    double = ApiServerDouble(collections=(*DEFAULT_COLLECTIONS, DEVICES))
    double.start()
    try:
        yield double
    finally:
        double.stop()


def wait_until(predicate: Callable[[], bool], *, timeout: float = 10.0, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.02)


def run(apiserver: ApiServerDouble, conf: Path) -> tuple[threading.Event, threading.Thread]:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = normalize(parser.parse_args([
        "--master", apiserver.url, "--leader-elect=false", "--schedule-period=50ms",
        "--scheduler-conf", str(conf)]))
    stop = threading.Event()
    runner = threading.Thread(target=lambda: run_main(args, stop=stop), daemon=True)
    runner.start()
    return stop, runner


def allocation(apiserver: ApiServerDouble, name: str) -> dict[str, object]:
    pod = apiserver.get("v1/pods", f"default/{name}") or {}
    text = (pod.get("metadata", {}).get("annotations") or {}).get(ALLOCATED)
    return json.loads(text) if text else {}


def test_run_places_fine_grained_pods_and_restarts_from_annotations(
        apiserver: ApiServerDouble, tmp_path: Path) -> None:
    conf = tmp_path / "finegrained.conf"
    conf.write_text(finegrained_conf())
    node = make_node("n1", cpu="8", extra={"nvidia.com/gpu": "2"})
    apiserver.create("v1/nodes", node)
    apiserver.create(DEVICES, device_object("n1", [gpu(0), gpu(1)]))
    apiserver.create("v1/pods", fg_pod("first", nvidia=1))
    stop, runner = run(apiserver, conf)
    try:
        wait_until(lambda: bool(allocation(apiserver, "first")), message="first bound")
    finally:
        stop.set()
        runner.join(10.0)
    first = allocation(apiserver, "first")["gpu"][0]  # type: ignore[index]
    assert first["id"] == f"GPU-{first['minor']:04d}"
    # A new scheduler process: the ledger comes back from the first pod's annotation.
    apiserver.create("v1/pods", fg_pod("second", nvidia=1))
    stop, runner = run(apiserver, conf)
    try:
        wait_until(lambda: bool(allocation(apiserver, "second")), message="second bound")
    finally:
        stop.set()
        runner.join(10.0)
    second = allocation(apiserver, "second")["gpu"][0]  # type: ignore[index]
    assert {first["minor"], second["minor"]} == {0, 1}
