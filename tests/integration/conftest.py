"""Fixtures for the adapter's contract tests: an API server double on 127.0.0.1 and builders."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

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
