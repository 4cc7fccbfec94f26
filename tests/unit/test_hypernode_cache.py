"""HyperNodes in the cache (applied one event at a time, carried in the snapshot), the PodGroup
networkTopology / subGroupPolicy fields, and ``kind: HyperNode`` manifests."""

from __future__ import annotations

import time
from typing import Any

import pytest

from scheduler.api.errors import ObjectError
from scheduler.api.podgroup import podgroup_from_object
from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.manifests import ManifestError, load_manifests
from tests.builders import IgnoredWrites, make_hypernode, make_node, make_podgroup


def _cache() -> SchedulerCache:
    cache = SchedulerCache(writer=IgnoredWrites(), clock=time.time)
    for i in range(4):
        cache.apply("ADDED", "Node", make_node(f"n{i}"))
    return cache


def test_hypernodes_applied_incrementally_reach_the_snapshot() -> None:
    cache = _cache()
    cache.apply("ADDED", "HyperNode", make_hypernode("s0", tier=1, nodes=["n0", "n1"]))
    cache.apply("ADDED", "HyperNode", make_hypernode("s1", tier=1, nodes=["n2"]))
    cache.apply("ADDED", "HyperNode", make_hypernode("top", tier=2, hypernodes=["s0", "s1"]))
    tree = cache.snapshot().hypernodes
    assert tree.nodes_of("top") == {"n0", "n1", "n2"}
    assert cache.snapshot().hypernodes is tree  # unchanged: the same tree is handed on

    cache.apply("MODIFIED", "HyperNode", make_hypernode("s1", tier=1, nodes=["n2", "n3"]))
    assert cache.snapshot().hypernodes.nodes_of("top") == {"n0", "n1", "n2", "n3"}

    cache.apply("DELETED", "HyperNode", make_hypernode("s0", tier=1))
    tree = cache.snapshot().hypernodes
    assert "s0" not in tree.info
    assert tree.nodes_of("top") == {"n2", "n3"}


def test_a_new_node_joins_a_regex_hypernode() -> None:
    cache = _cache()
    cache.apply("ADDED", "HyperNode", make_hypernode("s0", tier=1, regex="^n"))
    assert len(cache.snapshot().hypernodes.nodes_of("s0")) == 4
    cache.apply("ADDED", "Node", make_node("n9"))
    assert "n9" in cache.snapshot().hypernodes.nodes_of("s0")
    cache.apply("DELETED", "Node", make_node("n0"))
    assert "n0" not in cache.snapshot().hypernodes.nodes_of("s0")


def test_a_broken_hypernode_update_keeps_the_last_readable_one() -> None:
    cache = _cache()
    cache.apply("ADDED", "HyperNode", make_hypernode("s0", tier=1, nodes=["n0"]))
    broken = make_hypernode("s0", tier=1, nodes=["n1"])
    broken["spec"]["tier"] = "one"
    cache.apply("MODIFIED", "HyperNode", broken)
    assert cache.snapshot().hypernodes.nodes_of("s0") == {"n0"}
    assert "spec.tier" in cache.broken["HyperNode s0"]


def test_podgroup_network_topology_and_sub_groups_parsed() -> None:
    group = make_podgroup(
        "pg",
        network_topology={"mode": "soft", "highestTierName": "spine"},
        sub_group_policy=[
            {
                "name": "ps",
                "subGroupSize": 4,
                "minSubGroups": 2,
                "matchLabelKeys": ["role"],
                "labelSelector": {"matchLabels": {"app": "x"}},
                "networkTopology": {"highestTierAllowed": 1},
            }
        ],
    )
    parsed = podgroup_from_object(group)
    assert parsed.network_topology is not None
    assert parsed.network_topology.mode == "soft"
    assert parsed.network_topology.highest_tier_name == "spine"
    assert parsed.network_topology.highest_tier_allowed is None
    (policy,) = parsed.sub_groups
    assert (policy.name, policy.sub_group_size, policy.min_sub_groups) == ("ps", 4, 2)
    assert policy.match_label_keys == ("role",)
    assert policy.network_topology is not None and policy.network_topology.hard
    assert policy.network_topology.highest_tier_allowed == 1
    assert policy.label_selector is not None and policy.label_selector.matches({"app": "x"})
    assert podgroup_from_object(make_podgroup("plain")).network_topology is None


@pytest.mark.parametrize(
    ("topology", "field"),
    [
        ({"highestTierAllowed": 1, "highestTierName": "x"}, "spec.networkTopology.highestTierName"),
        ({"mode": "strict"}, "spec.networkTopology.mode"),
        ({"highestTierAllowed": -1}, "spec.networkTopology.highestTierAllowed"),
    ],
    ids=["both-tier-fields", "bad-mode", "negative-tier"],
)
def test_bad_network_topology_names_object_and_field(topology: Any, field: str) -> None:
    with pytest.raises(ObjectError) as caught:
        podgroup_from_object(make_podgroup("pg", network_topology=topology))
    assert caught.value.name == "pg" and caught.value.field == field


def test_bad_sub_group_names_the_field() -> None:
    group = make_podgroup("pg", sub_group_policy=[{"name": "a", "subGroupSize": 0}])
    with pytest.raises(ObjectError) as caught:
        podgroup_from_object(group)
    assert caught.value.field == "spec.subGroupPolicy[0].subGroupSize"


def test_hypernode_manifests_are_read(tmp_path: Any) -> None:
    path = tmp_path / "topo.yaml"
    path.write_text(
        "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: s0}\n"
        "spec:\n  tier: 1\n  members:\n  - type: Node\n    selector: {exactMatch: {name: n0}}\n"
    )
    manifests, warnings = load_manifests([str(path)])
    assert [m.kind for m in manifests] == ["HyperNode"] and not warnings
    path.write_text(
        "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: s0}\n"
        "spec: {tier: 1, members: []}\n"
    )
    with pytest.raises(ManifestError, match=r"HyperNode s0: field spec\.members"):
        load_manifests([str(path)])


def test_sub_groups_are_warned_about_once() -> None:
    """subGroupPolicy is read but its partitions are not placed on their own: said once."""
    from structlog.testing import capture_logs

    cache = _cache()
    group = make_podgroup("pg", sub_group_policy=[{"name": "workers", "subGroupSize": 2}])
    with capture_logs() as logs:
        cache.apply("ADDED", "PodGroup", group)
        cache.apply("MODIFIED", "PodGroup", group)
    warned = [e for e in logs if "subGroupPolicy" in e["event"]]
    assert len(warned) == 1 and warned[0]["sub_groups"] == ["workers"]


def test_node_events_rebuild_the_tree_only_when_a_member_may_pick_otherwise() -> None:
    cache = _cache()
    cache.apply("ADDED", "HyperNode", make_hypernode("s0", tier=1, nodes=["n0", "n9"]))
    tree = cache.snapshot().hypernodes
    cache.apply("MODIFIED", "Node", make_node("n1", labels={"rack": "x"}))
    cache.apply("ADDED", "Node", make_node("n5"))
    assert cache.snapshot().hypernodes is tree  # no member names n1 or n5
    cache.apply("ADDED", "Node", make_node("n9"))
    assert cache.snapshot().hypernodes.nodes_of("s0") == {"n0", "n9"}
    cache.apply("ADDED", "HyperNode", make_hypernode("r", tier=1, labels={"rack": "x"}))
    assert cache.snapshot().hypernodes.nodes_of("r") == {"n1"}
    cache.apply("MODIFIED", "Node", make_node("n2", labels={"rack": "x"}))
    assert cache.snapshot().hypernodes.nodes_of("r") == {"n1", "n2"}


def test_a_hard_constraint_without_a_tier_is_warned_about() -> None:
    from structlog.testing import capture_logs

    cache = _cache()
    with capture_logs() as logs:
        cache.apply("ADDED", "PodGroup", make_podgroup("pg", network_topology={"mode": "hard"}))
        cache.apply(
            "ADDED",
            "PodGroup",
            make_podgroup("ok", network_topology={"mode": "hard", "highestTierAllowed": 1}),
        )
    warned = [e for e in logs if "names no tier" in e["event"]]
    assert [e["podgroup"] for e in warned] == ["default/pg"]
