"""``lahar simulate`` on the affinity sample: spread and anti-affinity from plain manifests."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from scheduler.commands.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "conf" / "samples" / "affinity.yaml"


@pytest.fixture(autouse=True)
def _keep_log_config() -> Iterator[None]:
    """``main`` points structlog at the captured stderr; later tests must not write there."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.mark.parametrize("seed", [0, 5])
def test_affinity_sample(seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    """PodTopologySpread.Filter spreads the gang two per zone; InterPodAffinity's
    satisfyPodAntiAffinity keeps one parameter server per node and names why the seventh
    waits."""
    assert main(["simulate", str(SAMPLE), "-o", "json", "--seed", str(seed)]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    zone_of = {
        i["metadata"]["name"]: i["metadata"]["labels"]["topology.kubernetes.io/zone"]
        for i in items
        if i["kind"] == "Node"
    }
    pods = {i["metadata"]["name"]: i for i in items if i["kind"] == "Pod"}
    workers = [pods[f"train-worker-{n}"]["spec"]["nodeName"] for n in range(6)]
    assert Counter(zone_of[node] for node in workers) == {"east": 2, "west": 2, "north": 2}
    servers = [pods[f"ps-{n}"]["spec"].get("nodeName") for n in range(7)]
    placed = [s for s in servers if s]
    assert len(placed) == 6 and len(set(placed)) == 6
    waiting = next(
        p
        for p in pods.values()
        if p["metadata"]["name"].startswith("ps-") and not p["spec"].get("nodeName")
    )
    condition = next(c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["message"] == (
        "0/6 nodes are unavailable: 6 node(s) didn't match pod anti-affinity rules."
    )
