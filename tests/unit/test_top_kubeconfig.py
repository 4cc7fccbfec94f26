"""``lahar top`` against a kubeconfig: the cluster's objects, read through the API, shown as
the web view's overview and queue table (one session, no action: nothing is placed)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.commands import inspect
from scheduler.commands.cli import main
from scheduler.commands.top import CLUSTER_COLLECTIONS
from tests.builders import make_node, make_pod, make_podgroup, make_queue


def _cluster() -> list[dict[str, Any]]:
    return [make_node("n1", cpu="8", memory="32Gi"), make_node("n2", cpu="8", memory="32Gi"),
            make_queue("research", weight=3),
            make_podgroup("train", queue="research", min_member=2),
            make_pod("train-0", cpu="2", group="train", node="n1", phase="Running"),
            make_pod("train-1", cpu="2", group="train"),
            make_pod("loose", cpu="1")]


def test_top_reads_the_cluster_through_the_kubeconfig(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[tuple[Any, ...]] = []

    def listed(kubeconfig: str | None, context: str | None, collections: Any) -> Any:
        asked.append((kubeconfig, context, tuple(collections)))
        return _cluster()

    monkeypatch.setattr(inspect, "_from_cluster", listed)
    assert main(["top", "--once", "--kubeconfig", "/some/kubeconfig", "--context", "c1"]) == 0
    out = capsys.readouterr().out
    assert asked == [("/some/kubeconfig", "c1", CLUSTER_COLLECTIONS)]
    head = out.splitlines()[0].split()
    # two nodes, one pod on a node, two waiting: nothing was placed by reading
    assert head[:3] == ["nodes", "2", "(2"] and "bound 1" in out and "pending 2" in out
    research = next(line for line in out.splitlines() if line.startswith("research"))
    assert research.split()[1] == "3"  # its weight


def test_top_says_when_the_cluster_cannot_be_read(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def unreachable(*_: Any) -> Any:
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(inspect, "_from_cluster", unreachable)
    assert main(["top", "--once", "--kubeconfig", "/some/kubeconfig"]) == 1
    assert "error: cannot read the cluster: connection refused" in capsys.readouterr().err
