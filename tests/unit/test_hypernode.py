"""HyperNode parsing and the tree built from HyperNodes (scheduler/api/hypernode.py)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.errors import ObjectError
from scheduler.api.hypernode import build_tree, hypernode_from_object
from tests.builders import make_hypernode

NODES = {f"node-{i}": {"rack": "a" if i < 2 else "b"} for i in range(4)}


def _tree(*objs: dict[str, Any], nodes: dict[str, dict[str, str]] | None = None) -> Any:
    return build_tree([hypernode_from_object(o) for o in objs], NODES if nodes is None else nodes)


def test_two_tier_tree_parent_children_and_nodes() -> None:
    """hyper_node_info_test.go:34 TestHyperNodesInfo_UpdateHyperNode_Normal: s0, s1 (tier 1)
    under s2 (tier 2); each HyperNode's real nodes are the union of its members'."""
    tree = _tree(
        make_hypernode("s2", tier=2, hypernodes=["s1", "s0"]),
        make_hypernode("s0", tier=1, nodes=["node-0", "node-1"]),
        make_hypernode("s1", tier=1, nodes=["node-2", "node-3"]),
    )
    assert tree.ready and not tree.warnings
    assert tree.info["s0"].parent == "s2" and tree.info["s1"].parent == "s2"
    assert tree.info["s2"].parent == ""
    assert tree.nodes_of("s0") == {"node-0", "node-1"}
    assert tree.nodes_of("s2") == set(NODES)
    assert tree.by_tier == {1: ["s0", "s1"], 2: ["s2"]}
    assert tree.tiers == [1, 2]
    assert tree.hypernode_of("node-3", 1) == "s1"
    assert tree.hypernode_of("node-3", 2) == "s2"
    assert tree.leaf_of("node-0") == "s0"
    assert tree.ancestors("s0") == ["s0", "s2"]
    assert tree.lca("s0", "s1") == "s2"
    assert tree.lca("s0", "s0") == "s0"
    assert tree.lca("", "s1") == "s1"
    assert [(d, hn.name) for d, hn in tree.walk()] == [(0, "s2"), (1, "s0"), (1, "s1")]


def test_regex_and_label_members() -> None:
    """member_selector.go GetMembers: a regex matches anywhere in the node name (Go's
    MatchString); a label selector with no requirement picks nothing."""
    tree = _tree(
        make_hypernode("by-regex", tier=1, regex="node-[01]$"),
        make_hypernode("by-label", tier=1, labels={"rack": "b"}),
    )
    assert tree.nodes_of("by-regex") == {"node-0", "node-1"}
    assert tree.nodes_of("by-label") == {"node-2", "node-3"}
    empty = make_hypernode("empty", tier=1, labels={})
    tree = _tree(empty)
    assert tree.nodes_of("empty") == frozenset()
    assert any("picks no node" in w for w in tree.warnings)


def test_two_parents_not_ready_and_named() -> None:
    """hyper_node_info.go addChild: a HyperNode that already has a parent cannot get
    another; Volcano's cache is then not ready, so constrained jobs wait."""
    tree = _tree(
        make_hypernode("s0", tier=1, nodes=["node-0"]),
        make_hypernode("a", tier=2, hypernodes=["s0"]),
        make_hypernode("b", tier=2, hypernodes=["s0"]),
    )
    assert not tree.ready
    assert tree.info["s0"].parent == "a"
    assert tree.nodes_of("b") == frozenset()
    assert any("s0" in w and "a" in w and "b" in w for w in tree.warnings)


def test_cycle_not_ready_and_broken() -> None:
    """hyper_node_info.go BuildHyperNodeCache: a cyclic dependency is an error and the
    cache is not ready."""
    tree = _tree(
        make_hypernode("x", tier=2, hypernodes=["y"], nodes=["node-0"]),
        make_hypernode("y", tier=3, hypernodes=["x"]),
    )
    assert not tree.ready
    assert any("cycle" in w and "x" in w and "y" in w for w in tree.warnings)
    assert list(tree.walk())  # the tree is still walkable


def test_missing_member_is_a_warning_only() -> None:
    """hyper_node_info.go BuildHyperNodeCache: a member HyperNode not in the cache is
    logged and skipped; the cache stays ready."""
    tree = _tree(
        make_hypernode("top", tier=2, hypernodes=["ghost"], nodes=["node-0"]),
        make_hypernode("s0", tier=1, nodes=["node-9"]),
    )
    assert tree.ready
    assert tree.nodes_of("top") == {"node-0"}
    assert any("ghost" in w for w in tree.warnings)
    assert any("node-9" in w for w in tree.warnings)


def test_node_in_two_hypernodes_of_a_tier_is_warned() -> None:
    tree = _tree(
        make_hypernode("s0", tier=1, nodes=["node-0", "node-1"]),
        make_hypernode("s1", tier=1, nodes=["node-1"]),
    )
    assert tree.ready
    assert tree.hypernode_of("node-1", 1) == "s0"
    assert any("node-1" in w and "s0" in w and "s1" in w for w in tree.warnings)


def test_tier_names() -> None:
    """hyper_node_info.go HyperNodeTierNameMap: tierName → tier, a conflict warned."""
    tree = _tree(
        make_hypernode("s0", tier=1, nodes=["node-0"], tier_name="leaf"),
        make_hypernode("s1", tier=2, nodes=["node-1"], tier_name="leaf"),
        make_hypernode("s2", tier=3, nodes=["node-2"], tier_name="spine"),
    )
    assert tree.tier_names == {"leaf": 1, "spine": 3}
    assert any("leaf" in w for w in tree.warnings)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda o: o["spec"].pop("tier"), "spec.tier"),
        (lambda o: o["spec"].__setitem__("tier", -1), "spec.tier"),
        (lambda o: o["spec"].__setitem__("members", []), "spec.members"),
        (lambda o: o["spec"]["members"][0].__setitem__("type", "Rack"), "spec.members[0].type"),
        (
            lambda o: o["spec"]["members"][0]["selector"].__setitem__(
                "regexMatch", {"pattern": "x"}
            ),
            "spec.members[0].selector",
        ),
        (
            lambda o: o["spec"]["members"][0].__setitem__(
                "selector", {"regexMatch": {"pattern": ""}}
            ),
            "spec.members[0].selector.regexMatch.pattern",
        ),
        (
            lambda o: o["spec"]["members"][0].__setitem__("selector", {"exactMatch": {}}),
            "spec.members[0].selector.exactMatch.name",
        ),
    ],
    ids=[
        "no-tier",
        "negative-tier",
        "no-members",
        "bad-type",
        "two-selectors",
        "empty-regex",
        "no-name",
    ],
)
def test_bad_input_names_object_and_field(mutate: Any, field: str) -> None:
    obj = make_hypernode("s0", tier=1, nodes=["node-0"])
    mutate(obj)
    with pytest.raises(ObjectError) as caught:
        hypernode_from_object(obj)
    assert caught.value.name == "s0"
    assert caught.value.field == field
