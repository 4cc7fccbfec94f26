"""Handing loaded manifests to the embedded cluster without copying them (``lahar simulate``):
only documents whose maps and lists are their own may be taken as they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.cluster.manifests import load_manifests, parse_documents
from scheduler.cluster.sim import SimCluster
from scheduler.cluster.yamlload import load_all_marked
from scheduler.commands.cli import main

PODS_WITH_ANCHOR = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "1", memory: 1Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "1", memory: 1Gi, pods: "10"}}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a}
  spec: &spec
    schedulerName: volcano
    containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: b}
  spec: *spec
"""


@pytest.mark.parametrize(
    ("text", "shares"),
    [
        ("a: {b: [1, 2]}\n", False),
        ("a: &x {b: 1}\nc: *x\n", True),
        ("a: &x {b: 1}\nc: {<<: *x, d: 2}\n", True),
        ("a: !!set {b}\n", True),
        ("a: &x hello\nc: *x\n", False),  # a shared string cannot be changed in place
    ],
    ids=["plain", "alias", "merge-key", "explicit-tag", "scalar-alias"],
)
def test_documents_are_marked_when_they_may_share(text: str, shares: bool) -> None:
    [(_, marked)] = list(load_all_marked(text))
    assert marked is shares


def test_the_mark_is_per_document() -> None:
    marks = [m for _, m in load_all_marked("a: &x {b: 1}\nc: *x\n---\na: {b: 1}\n")]
    assert marks == [True, False]


def test_taking_stores_private_objects_and_copies_shared_ones() -> None:
    manifests = parse_documents(PODS_WITH_ANCHOR, source="f")
    assert [m.private for m in manifests] == [True, True, False, False]
    cluster = SimCluster()
    cluster.load(manifests, take=True)
    assert cluster.objects["Node"]["n1"] is manifests[0].obj
    assert cluster.objects["Pod"]["default/a"] is not manifests[2].obj
    kept = SimCluster()
    kept.load(manifests)
    assert kept.objects["Node"]["n1"] is not manifests[0].obj


def test_cli_binds_anchored_pods_one_by_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(PODS_WITH_ANCHOR)
    assert main(["simulate", str(path), "-o", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    nodes = sorted(i["spec"]["nodeName"] for i in items if i["kind"] == "Pod")
    assert nodes == ["n1", "n2"]
    manifests, _ = load_manifests([path])
    assert all("nodeName" not in (m.obj.get("spec") or {}) for m in manifests)
