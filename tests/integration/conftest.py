"""Fixtures for the adapter's contract tests: an API server double on 127.0.0.1 and builders."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kube_helpers import RunningScheduler

from scheduler.cluster.kube.client import KubeClient
from tests.apiserver import ApiServerDouble


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    double = ApiServerDouble()
    double.start()
    try:
        yield double
    finally:
        double.stop()


@pytest.fixture
def client(apiserver: ApiServerDouble) -> Iterator[KubeClient]:
    kube = KubeClient.for_host(apiserver.url)
    try:
        yield kube
    finally:
        kube.close()


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    try:
        yield event
    finally:
        event.set()


@pytest.fixture
def scheduler_runs() -> Iterator[list[RunningScheduler]]:
    """``lahar run`` processes a test started (append them); stopped at the end."""
    runs: list[RunningScheduler] = []
    yield runs
    for run in runs:
        run.stopped.set()
        run.thread.join(10.0)
