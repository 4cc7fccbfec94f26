"""Builders and waiting helpers shared by the adapter's contract tests."""

from __future__ import annotations

import argparse
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any


def make_node(name: str, *, labels: dict[str, str] | None = None, cpu: str = "8",
              **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
                   "capacity": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }
    node.update(extra)
    return node


def make_pod(name: str, *, namespace: str = "default", node: str = "",
             scheduler: str = "volcano", group: str = "") -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": spec, "status": {"phase": "Pending"}}


class Recorder:
    """A reflector handler that remembers ``(event_type, name)`` pairs and can wait for more."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.objects: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    def __call__(self, event_type: str, obj: dict[str, Any]) -> None:
        with self._cond:
            self.events.append((event_type, obj["metadata"]["name"]))
            self.objects.append(obj)
            self._cond.notify_all()

    def wait_for(self, count: int, timeout: float = 3.0) -> list[tuple[str, str]]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.events) >= count, timeout):
                raise AssertionError(f"expected {count} events, got {self.events}")
            return list(self.events)

    def clear(self) -> None:
        with self._cond:
            self.events.clear()
            self.objects.clear()


def wait_until(predicate: Callable[[], bool], *, timeout: float = 3.0,
               message: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.01)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_status(url: str) -> int:
    """HTTP status of a GET, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def parse_run_args(*argv: str) -> argparse.Namespace:
    from scheduler.cluster.kube.flags import normalize
    from scheduler.cluster.kube.run import add_run_arguments

    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return normalize(parser.parse_args(list(argv)))


class RunningScheduler:
    """``run_main`` in a thread, with its health/metrics port; stop it with :meth:`stop`."""

    def __init__(self, *argv: str) -> None:
        from scheduler.cluster.kube.run import run_main

        self.port = free_port()
        args = parse_run_args(*argv, "--enable-healthz", f"--healthz-address=127.0.0.1:{self.port}",
                              "--enable-metrics", f"--listen-address=127.0.0.1:{self.port}",
                              "--log-format=json")
        self.stopped = threading.Event()
        self.outcome: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.outcome.append(run_main(args, stop=self.stopped)), daemon=True)
        self.thread.start()

    def status(self, path: str) -> int:
        return http_status(f"http://127.0.0.1:{self.port}{path}")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as reply:
            return str(reply.read().decode())

    def wait_exit(self, timeout: float = 10.0) -> int:
        self.thread.join(timeout)
        assert self.outcome, "run_main did not return"
        return self.outcome[0]

    def stop(self) -> int:
        """Stop and wait: a stop may spend up to 10 s flushing binds and status writes (the
        documented bound without leader election), so the wait allows for that and more."""
        self.stopped.set()
        return self.wait_exit(timeout=30.0)


def record_cycles(monkeypatch: Any, *, cycle: float = 0.0) -> list[tuple[float, float]]:
    """Patch ``Scheduler.run_once`` to append each cycle's (start, end) monotonic times to the
    list returned, each cycle made to last at least ``cycle`` seconds."""
    from scheduler.loop import Scheduler

    spans: list[tuple[float, float]] = []
    run_once = Scheduler.run_once

    def timed(self: Scheduler) -> Any:
        started = time.monotonic()
        try:
            return run_once(self)
        finally:
            time.sleep(max(0.0, started + cycle - time.monotonic()))
            spans.append((started, time.monotonic()))

    monkeypatch.setattr(Scheduler, "run_once", timed)
    return spans
