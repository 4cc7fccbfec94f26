"""The shipped network-topology sample: ``lahar simulate --conf conf/topology.conf
conf/samples/topology.yaml`` and ``lahar inspect topology`` on its output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.commands.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "conf" / "samples" / "topology.yaml"
CONF = ROOT / "conf" / "topology.conf"


def test_the_sample_keeps_hard_jobs_in_one_leaf_and_says_why_the_last_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """train-a (hard, tier 1) lands inside one leaf; train-b may use the spine; train-c (hard,
    tier 1) finds 8 cpu free in the cluster but 4 in each leaf, so it waits and its pods name
    the tier and the closest HyperNode."""
    assert main(["simulate", str(SAMPLE), "--conf", str(CONF), "-o", "json"]) == 0
    out = capsys.readouterr().out
    items = json.loads(out)["items"]
    node_of = {i["metadata"]["name"]: i["spec"].get("nodeName", "")
               for i in items if i["kind"] == "Pod"}
    racks_a = {node_of[f"train-a-{i}"].split("-")[0] for i in range(3)}
    assert len(racks_a) == 1 and "" not in racks_a, node_of
    assert all(node_of[f"train-b-{i}"] for i in range(3))
    pending = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "train-c-0")
    (condition,) = [c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert "no HyperNode of tier 1 or below has room" in condition["message"]
    assert "the closest, HyperNode leaf-" in condition["message"]

    result = tmp_path / "out.json"
    result.write_text(out)
    assert main(["inspect", "topology", str(result)]) == 0
    picture = capsys.readouterr().out
    assert "└── spine-0" in picture and "leaf-0" in picture and "leaf-1" in picture
    assert "Pending (no pod bound): default/train-c" in picture
