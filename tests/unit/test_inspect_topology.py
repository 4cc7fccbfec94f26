"""``lahar inspect topology``: the HyperNode tree with usage and jobs, as a picture and JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.commands.cli import main
from scheduler.commands.inspect_topology import (
    TreeOptions,
    inspect_topology,
    render_topology,
    topology_json,
)
from tests.builders import make_hypernode, make_node, make_pod, make_podgroup


def _cluster() -> list[dict[str, Any]]:
    """spine (tier 2) = leaf-a (n1, n2) + leaf-b (n3, n4); n5 in no HyperNode."""
    objects: list[dict[str, Any]] = [make_node(f"n{i}", cpu="8") for i in range(1, 6)]
    objects += [make_hypernode("leaf-a", tier=1, nodes=["n1", "n2"], tier_name="leaf"),
                make_hypernode("leaf-b", tier=1, nodes=["n3", "n4"], tier_name="leaf"),
                make_hypernode("spine", tier=2, hypernodes=["leaf-a", "leaf-b"],
                               tier_name="spine")]
    objects += [make_podgroup("inside", min_member=2,
                              network_topology={"mode": "hard", "highestTierAllowed": 1}),
                make_pod("inside-0", cpu="2", group="inside", node="n1"),
                make_pod("inside-1", cpu="2", group="inside", node="n2")]
    objects += [make_podgroup("wide", min_member=2,
                              network_topology={"mode": "hard", "highestTierName": "leaf"}),
                make_pod("wide-0", cpu="1", group="wide", node="n2"),
                make_pod("wide-1", cpu="1", group="wide", node="n3")]
    objects += [make_podgroup("loose", min_member=2),
                make_pod("loose-0", cpu="1", group="loose", node="n4"),
                make_pod("loose-1", cpu="1", group="loose", node="n5")]
    objects += [make_podgroup("waiting", min_member=1,
                              network_topology={"mode": "soft"}),
                make_pod("waiting-0", cpu="100", group="waiting"),
                make_pod("done", cpu="4", node="n3", phase="Succeeded")]
    return objects


def test_usage_sums_over_each_domain_and_jobs_sit_at_their_lowest_common_hypernode() -> None:
    """A HyperNode's numbers are its nodes' (through its children, Volcano's
    HyperNodeInfo nodes set); a job is shown at the lowest common ancestor of its pods'
    HyperNodes (GetLCAHyperNode, pkg/scheduler/api/hyper_node_info.go), or at the cluster."""
    report = inspect_topology(_cluster())
    assert report.hypernodes["leaf-a"].used.milli_cpu == 5000  # inside 2+2, wide 1
    assert report.hypernodes["leaf-a"].allocatable.milli_cpu == 16000
    assert report.hypernodes["spine"].used.milli_cpu == 7000  # the Succeeded pod is free
    places = {job.name: place for place, jobs in report.jobs_at.items() for job in jobs}
    assert places == {"default/inside": "leaf-a", "default/wide": "spine",
                      "default/loose": ""}
    wide = report.jobs_at["spine"][0]
    assert wide.over and wide.constraint == "hard, tier <= leaf"
    assert not report.jobs_at["leaf-a"][0].over
    assert [job.name for job in report.pending] == ["default/waiting"]
    assert report.outside == ["n5"]


def test_the_picture_is_a_tree_with_collapsed_leaves() -> None:
    report = inspect_topology(_cluster())
    text = render_topology(report, TreeOptions(nodes=1))
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["HYPERNODE", "/", "NODE"]
    assert lines[1].startswith("cluster ")
    assert lines[2].startswith("└── spine ") or lines[2].startswith("├── spine ")
    assert any(line.startswith("│   ├── leaf-a ") for line in lines)
    assert any("│   │   ├── n1 " in line for line in lines)
    assert any("… 1 more node (" in line for line in lines)
    assert "default/wide (2 pods, hard, tier <= leaf EXCEEDED)" in text
    assert "2/16" in next(line for line in lines if " leaf-b " in line)  # wide-1, loose-0
    assert "Pending (no pod bound): default/waiting (1 pending, soft)" in text
    everything = render_topology(report, TreeOptions(nodes=-1))
    assert "more node" not in everything and " n2 " in everything
    hidden = render_topology(report, TreeOptions(nodes=0))
    assert " n1 " not in hidden and " leaf-a " in hidden


def test_subtree_only() -> None:
    text = render_topology(inspect_topology(_cluster()), TreeOptions(root="leaf-b"))
    lines = text.splitlines()
    assert lines[1].startswith("leaf-b ")
    assert "spine" not in text and "cluster" not in text
    assert lines[-1].startswith("└── n4 ")


def test_two_hundred_nodes_stay_readable() -> None:
    """240 nodes under 15 leaves under 3 spines: one line per HyperNode plus at most four per
    leaf by default, never one per node."""
    objects: list[dict[str, Any]] = [make_node(f"node-{i:03d}") for i in range(240)]
    for leaf in range(15):
        objects.append(make_hypernode(f"leaf-{leaf:02d}", tier=1, nodes=[
            f"node-{i:03d}" for i in range(leaf * 16, leaf * 16 + 16)]))
    for spine in range(3):
        objects.append(make_hypernode(f"spine-{spine}", tier=2, hypernodes=[
            f"leaf-{leaf:02d}" for leaf in range(spine * 5, spine * 5 + 5)]))
    lines = render_topology(inspect_topology(objects)).splitlines()
    assert len(lines) == 2 + 3 + 15 * (1 + 3 + 1)
    assert max(len(line) for line in lines) < 200


def test_bad_hypernode_is_a_warning_and_the_rest_is_shown() -> None:
    broken = make_hypernode("broken", tier=1, nodes=["n1"])
    broken["spec"]["tier"] = "one"
    report = inspect_topology([*_cluster(), broken])
    assert any("broken" in w and "spec.tier" in w for w in report.warnings)
    assert "broken" not in report.tree.info and "spine" in report.tree.info


def _write(tmp_path: Path, objects: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "topology", _write(tmp_path, _cluster()), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == topology_json(inspect_topology(_cluster()))
    (spine,) = data["hypernodes"]
    # nodeCount as Volcano's HyperNode controller writes it (hypernode_handler.go:121
    # actualNodeCnt): the spine's two member names; the nodes under it are nodesUnder.
    assert (spine["name"], spine["tier"], spine["nodeCount"], spine["nodesUnder"]) == (
        "spine", 2, 2, 4)
    assert [c["name"] for c in spine["children"]] == ["leaf-a", "leaf-b"]
    assert spine["children"][0]["nodes"] == ["n1", "n2"]
    assert spine["used"]["cpu"] == "7" and spine["allocatable"]["cpu"] == "32"
    assert spine["jobs"] == [{"name": "default/wide", "boundPods": 2, "pendingPods": 0,
                              "constraint": "hard, tier <= leaf", "exceedsConstraint": True}]
    assert data["nodesInNoHyperNode"] == ["n5"]


def test_cli_reads_simulate_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The documented path: ``lahar simulate -o json`` then ``lahar inspect topology``."""
    objects = [make_node("n1", cpu="4"), make_node("n2", cpu="4"),
               make_hypernode("leaf", tier=1, nodes=["n1", "n2"]),
               make_podgroup("job", min_member=2), make_pod("job-0", group="job"),
               make_pod("job-1", group="job")]
    assert main(["simulate", _write(tmp_path, objects), "-o", "json"]) == 0
    out = tmp_path / "after.json"
    out.write_text(capsys.readouterr().out)
    assert main(["inspect", "topology", str(out)]) == 0
    text = capsys.readouterr().out
    leaf = next(line for line in text.splitlines() if line.startswith("└── leaf "))
    assert "2/8" in leaf and "default/job (2 pods)" in leaf


def test_cli_subtree_that_does_not_exist(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "topology", _write(tmp_path, _cluster()),
                 "--hypernode", "nope"]) == 0
    assert "No HyperNode named nope." in capsys.readouterr().out


def test_a_job_sits_where_the_scheduler_sees_it() -> None:
    """session.go:364 recoverAllocatedHyperNode: of the HyperNodes holding every pod's node,
    the lowest tier. n2 is listed in leaves a and b; pods on n2 and n3 sit in b (the leaf of
    n2 taken by name order, a, and b have no common ancestor: the cluster, before)."""
    objects: list[dict[str, Any]] = [make_node(f"n{i}", cpu="8") for i in range(1, 4)]
    objects += [make_hypernode("a", tier=1, nodes=["n1", "n2"]),
                make_hypernode("b", tier=1, nodes=["n2", "n3"]),
                make_podgroup("job", min_member=2,
                              network_topology={"mode": "hard", "highestTierAllowed": 1}),
                make_pod("job-0", cpu="1", group="job", node="n2"),
                make_pod("job-1", cpu="1", group="job", node="n3")]
    report = inspect_topology(objects)
    (job,) = report.jobs_at["b"]
    assert job.name == "default/job" and not job.over
