"""``lahar simulate --hypernode-discovery``: HyperNodes derived from the manifests' node labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cluster.discovery import LABEL_SOURCE, SOURCE_LABEL
from scheduler.commands.cli import main
from tests.builders import make_hypernode, make_node

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        a2:
          - nodeLabel: volcano.sh/tor
          - nodeLabel: kubernetes.io/hostname
"""


def _write(tmp_path: Path, name: str, objects: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def _cluster(tmp_path: Path) -> str:
    nodes = [make_node(f"n{i}", labels={"volcano.sh/tor": f"t{i // 2}"}) for i in range(4)]
    stale = make_hypernode("hypernode-a2-tier1-stale", tier=1, nodes=["gone"])
    stale["metadata"]["labels"] = {SOURCE_LABEL: LABEL_SOURCE, "volcano.sh/tor": "t9"}
    hand = make_hypernode("rack", tier=2, nodes=["n0"])
    return _write(tmp_path, "cluster.yaml", [*nodes, stale, hand])


def _hypernodes(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    listed = json.loads(capsys.readouterr().out)
    return {o["metadata"]["name"]: o for o in listed["items"] if o["kind"] == "HyperNode"}


@pytest.mark.parametrize("form", ["text", "configmap"])
def test_simulate_derives_hypernodes_from_node_labels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str) -> None:
    """generateHyperNodeInfo (discovery/label/label.go:436) then reconcileTopology
    (hypernode_controller.go:190): one HyperNode per tor value, the stale discovered one
    removed, the hand-made one kept. The flag takes the conf text or the ConfigMap."""
    if form == "text":
        config = tmp_path / "volcano-controller.conf"
        config.write_text(CONFIG)
    else:
        config = ROOT / "conf" / "deploy" / "optional" / "hypernode-discovery.yaml"
    cluster = _cluster(tmp_path)
    assert main(["simulate", cluster, "--hypernode-discovery", str(config), "-o", "json"]) == 0
    hypernodes = _hypernodes(capsys)
    assert "rack" in hypernodes and "hypernode-a2-tier1-stale" not in hypernodes
    discovered = {o["metadata"]["labels"]["volcano.sh/tor"]: o for o in hypernodes.values()
                  if (o["metadata"].get("labels") or {}).get(SOURCE_LABEL) == LABEL_SOURCE}
    assert sorted(discovered) == ["t0", "t1"]
    members = [m["selector"]["exactMatch"]["name"]
               for m in discovered["t1"]["spec"]["members"]]
    assert members == ["n2", "n3"]


def test_simulate_without_the_flag_keeps_hypernodes_as_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", _cluster(tmp_path), "-o", "json"]) == 0
    assert sorted(_hypernodes(capsys)) == ["hypernode-a2-tier1-stale", "rack"]


def test_simulate_names_a_bad_discovery_config(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bad.conf"
    config.write_text("networkTopologyDiscovery: [{source: label, enabled: maybe}]\n")
    assert main(["simulate", _cluster(tmp_path), "--hypernode-discovery", str(config)]) == 2
    assert "networkTopologyDiscovery[0].enabled" in capsys.readouterr().err
