"""Exact normalised scores of InterPodAffinity, PodTopologySpread and ImageLocality, worked
out by hand from kube-scheduler's formulas."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.api.node import NodeInfo, node_from_object
from scheduler.api.task import task_from_pod
from scheduler.framework.imagelocality import ImageTable
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.podaffinity import affinity_scores
from scheduler.framework.podindex import PodIndex
from scheduler.framework.topologyspread import spread_scores
from tests.builders import make_node
from tests.scenarios.affinity_helpers import HOST, ZONE, affinity, labelled_pod, spread, term

MB = 1024 * 1024


def _cluster(placed: dict[str, list[dict[str, str]]]) -> tuple[NodeTable, PodIndex]:
    """Nodes n0, n1 in zone a and n2 in zone b with pods labelled as given."""
    nodes: list[NodeInfo] = []
    for i, zone in enumerate(("a", "a", "b")):
        name = f"n{i}"
        node = node_from_object(make_node(name, labels={HOST: name, ZONE: zone}))
        for j, labels in enumerate(placed.get(name, [])):
            pod = labelled_pod(f"{name}-{j}", labels=labels, node=name, scheduler="x")
            node.add_task(task_from_pod(pod))
        nodes.append(node)
    table = NodeTable(nodes)
    return table, PodIndex(table, namespace_labels={})


ALL = np.array([0, 1, 2], dtype=np.intp)


def test_spread_score_by_zone() -> None:
    """PodTopologySpread.Score: 2 matching pods in zone a, weight log(2 domains + 2):
    rounded raw 3, 3, 0; NormalizeScore 100 × (max + min − s) / max → 0, 0, 100."""
    table, index = _cluster({"n0": [{"app": "s"}, {"app": "s"}]})
    task = task_from_pod(
        labelled_pod("p", labels={"app": "s"}, spread=[spread({"app": "s"}, when="ScheduleAnyway")])
    )
    assert list(spread_scores(index, table, task, ALL)) == [0, 0, 100]


def test_spread_score_zone_and_hostname() -> None:
    """Adding hostname maxSkew 2 (weight log 5, per-node counts): raw 7, 4, 1 →
    100 × (8 − s) / 7 truncated → 14, 57, 100."""
    table, index = _cluster({"n0": [{"app": "s"}, {"app": "s"}]})
    constraints = [
        spread({"app": "s"}, when="ScheduleAnyway"),
        spread({"app": "s"}, HOST, max_skew=2, when="ScheduleAnyway"),
    ]
    task = task_from_pod(labelled_pod("p", labels={"app": "s"}, spread=constraints))
    assert list(spread_scores(index, table, task, ALL)) == [14, 57, 100]


def test_spread_score_ignores_candidates_without_the_key() -> None:
    """initPreScoreState puts nodes lacking a key in IgnoredNodes; they score 0."""
    table, index = _cluster({})
    task = task_from_pod(
        labelled_pod("p", spread=[spread({"app": "s"}, "rack", when="ScheduleAnyway")])
    )
    assert list(spread_scores(index, table, task, ALL)) == [0, 0, 0]


def test_affinity_score_min_max_normalised() -> None:
    """processExistingPod + NormalizeScore: db (weight 10, zone) counts 2 in a and 1 in b,
    cache anti (weight 5, hostname) on n1: raw 20, 15, 10 → 100, 50, 0."""
    table, index = _cluster(
        {"n0": [{"app": "db"}, {"app": "db"}], "n1": [{"app": "cache"}], "n2": [{"app": "db"}]}
    )
    aff = affinity(
        preferred=[(10, term({"app": "db"}, ZONE))],
        preferred_anti=[(5, term({"app": "cache"}))],
    )
    task = task_from_pod(labelled_pod("p", affinity=aff))
    table_scores = affinity_scores(index, table, task, ALL)
    assert list(table_scores) == [100, 50, 0]
    # normalised over the candidates given, as Volcano's batch node order passes them
    assert list(affinity_scores(index, table, task, np.array([1, 2], dtype=np.intp))) == [100, 0]


@pytest.mark.parametrize(
    ("images", "node_images", "expected"),
    [
        pytest.param(["nginx:1.25"], {"n1": [("nginx:1.25", 500)]}, [0, 23, 0], id="half-spread"),
        pytest.param(["nginx"], {"n1": [("nginx:latest", 500)]}, [0, 23, 0], id="latest-tag"),
        pytest.param(
            ["nginx:1.25"],
            {n: [("nginx:1.25", 500)] for n in ("n0", "n1", "n2")},
            [48, 48, 48],
            id="everywhere",
        ),
        pytest.param(["tiny:1"], {"n0": [("tiny:1", 10)]}, [0, 0, 0], id="below-threshold"),
    ],
)
def test_image_locality(images: list, node_images: dict, expected: list) -> None:
    """ImageLocality.Score: Σ size × nodes-with-image / all nodes, clamped to
    [23 MB, 1000 MB × containers], scaled to 0–100: 500 MB on 1 of 2 nodes is 250 MB →
    100 × 227 / 977 = 23; on every node 500 MB → 48; 10 MB is under the floor → 0."""
    count = 2 if len(node_images) == 1 and "n1" in node_images else 3
    nodes = []
    for i in range(count):
        obj = make_node(f"n{i}")
        obj["status"]["images"] = [
            {"names": [name], "sizeBytes": size * MB} for name, size in node_images.get(f"n{i}", [])
        ]
        nodes.append(node_from_object(obj))
    pod = labelled_pod("p")
    pod["spec"]["containers"] = [{"name": f"c{i}", "image": img} for i, img in enumerate(images)]
    scores = ImageTable(NodeTable(nodes)).scores(task_from_pod(pod), np.arange(count))
    assert list(scores) == expected[:count]


def test_image_locality_steers_a_pod_in_simulation() -> None:
    """Volcano's nodeorder adds ImageLocality × imagelocality.weight per node."""
    from tests.builders import PACKING_TIERS, simulate

    with_image = make_node("cached")
    with_image["status"]["images"] = [{"names": ["trainer:v2"], "sizeBytes": 900 * MB}]
    for seed in range(4):
        run = simulate(
            [make_node("plain"), with_image, labelled_pod("p", image="trainer:v2")],
            conf=PACKING_TIERS,
            seed=seed,
        )
        assert run.node_of("p") == "cached"
