"""Builders and waiting helpers shared by the adapter's contract tests."""

from __future__ import annotations

import threading
import time
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
