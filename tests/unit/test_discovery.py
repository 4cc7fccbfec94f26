"""Label discovery (scheduler/cluster/discovery.py): config, desired HyperNodes, reconcile."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cluster.discovery import (
    LABEL_SOURCE,
    SOURCE_LABEL,
    DiscoveryConfig,
    DiscoveryConfigError,
    apply_plan,
    desired_hypernodes,
    parse_discovery_config,
    plan_reconcile,
)
from tests.builders import make_node

A3 = """
networkTopologyDiscovery:
  - source: ufm
    enabled: true
    config: {endpoint: https://ufm:8080}
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        topologyA3:
          - nodeLabel: volcano.sh/hypercluster
          - nodeLabel: volcano.sh/hypernode
          - nodeLabel: kubernetes.io/hostname
"""


def _config() -> DiscoveryConfig:
    return parse_discovery_config(A3, source="cm")


def _eight_nodes() -> list[dict[str, Any]]:
    """The cluster of Volcano's user guide: s0..s3 of two nodes each, s4 = s0+s1, s5 = s2+s3."""
    return [make_node(f"node{i}", labels={"kubernetes.io/hostname": f"node{i}",
                                          "volcano.sh/hypernode": f"s{i // 2}",
                                          "volcano.sh/hypercluster": f"s{4 + i // 4}"})
            for i in range(8)]


def _members(hypernode: dict[str, Any]) -> list[str]:
    return [m["selector"]["exactMatch"]["name"] for m in hypernode["spec"]["members"]]


def test_config_reads_the_label_source_and_warns_about_the_rest() -> None:
    """parseCfg (discovery/label/label.go:231): keys reversed, the hostname level dropped;
    GetDiscoveryConfig (api/types.go:67): only enabled entries count."""
    config = _config()
    assert config.enabled
    assert config.topology_types == (
        ("topologyA3", ("volcano.sh/hypernode", "volcano.sh/hypercluster")),)
    assert [w for w in config.warnings if "'ufm' is not supported" in w]


@pytest.mark.parametrize(("text", "enabled", "types", "warning"), [
    ("networkTopologyDiscovery: [{source: label, enabled: false}]", False, (), None),
    ("", False, (), None),
    ("networkTopologyDiscovery:\n - source: label\n   enabled: true\n   config:\n"
     "     networkTopologyTypes:\n       averyveryverylongtypename: [{nodeLabel: a}, "
     "{nodeLabel: h}]\n", True, (), "longer than 20"),
    ("networkTopologyDiscovery:\n - source: label\n   enabled: true\n   config:\n"
     "     networkTopologyTypes:\n       t: [{nodeLabel: a}, {nodeLabel: a}]\n", True, (),
     "appears twice"),
], ids=["disabled", "empty", "long-type-name", "duplicate-label"])
def test_config_skips_what_volcano_skips(text: str, enabled: bool, types: tuple[Any, ...],
                                          warning: str | None) -> None:
    """label.go:244 (type name over 20 characters) and checkLabels label.go:264 (a label
    twice): the type is skipped, the rest of the config stands."""
    config = parse_discovery_config(text, source="cm")
    assert (config.enabled, config.topology_types) == (enabled, types)
    assert (warning is None) == (not config.warnings)
    if warning:
        assert warning in config.warnings[0]


def test_config_warns_about_fields_it_does_not_know() -> None:
    text = ("networkTopologyDiscovery:\n - {source: label, enabled: true, interval: 5m, "
            "intervall: 5m, config: {networkTopologyTypes: {}, nodeLabels: []}}\n"
            " - {source: label, enabled: true}\n")
    warnings = parse_discovery_config(text, source="cm").warnings
    assert any("unknown field(s) intervall ignored" in w for w in warnings)
    assert any("unknown field(s) nodeLabels ignored" in w for w in warnings)
    assert any("networkTopologyDiscovery[1]: a second enabled" in w for w in warnings)
    assert not any("interval," in w or "field(s) interval " in w for w in warnings)


@pytest.mark.parametrize(("text", "field"), [
    ("networkTopologyDiscovery: 3", "networkTopologyDiscovery must be a list"),
    ("networkTopologyDiscovery: [{source: label, enabled: yes-please}]",
     "networkTopologyDiscovery[0].enabled"),
    ("networkTopologyDiscovery: [{source: label, enabled: true, config: {"
     "networkTopologyTypes: {t: [{nodeLabel: [1]}]}}}]",
     "networkTopologyTypes.t[0].nodeLabel"),
    ("[: not yaml", "not YAML"),
], ids=["not-a-list", "enabled-not-bool", "label-not-a-string", "not-yaml"])
def test_config_errors_name_the_field(text: str, field: str) -> None:
    with pytest.raises(DiscoveryConfigError, match=r"^cm: .*" + field.replace("[", r"\[")
                       .replace("]", r"\]")):
        parse_discovery_config(text, source="cm")


def test_user_guide_cluster_gives_the_guides_tree() -> None:
    """generateHyperNodeInfo / buildHyperNodes (label.go:436, 333) on the user guide's
    example: four tier-1 HyperNodes of two nodes, two tier-2 ones of two HyperNodes, each
    labelled with the source and its key=value, tier name = the label key."""
    desired = desired_hypernodes(_eight_nodes(), _config())
    by_label = {(h["spec"]["tier"], h["metadata"]["labels"].get("volcano.sh/hypernode")
                 or h["metadata"]["labels"]["volcano.sh/hypercluster"]): h for h in desired}
    assert sorted(by_label) == [(1, "s0"), (1, "s1"), (1, "s2"), (1, "s3"), (2, "s4"),
                                (2, "s5")]
    assert _members(by_label[(1, "s1")]) == ["node2", "node3"]
    assert {m["type"] for m in by_label[(1, "s1")]["spec"]["members"]} == {"Node"}
    assert _members(by_label[(2, "s4")]) == sorted(
        [by_label[(1, "s0")]["metadata"]["name"], by_label[(1, "s1")]["metadata"]["name"]])
    assert by_label[(2, "s4")]["spec"]["members"][0]["type"] == "HyperNode"
    s4 = by_label[(2, "s4")]
    assert s4["spec"]["tierName"] == "volcano.sh/hypercluster"
    assert s4["metadata"]["labels"] == {SOURCE_LABEL: LABEL_SOURCE,
                                        "volcano.sh/hypercluster": "s4"}
    assert s4["metadata"]["name"].startswith("hypernode-topologya3-tier2-")
    assert len(s4["metadata"]["name"]) == len("hypernode-topologya3-tier2-") + 5


def test_a_node_missing_a_middle_label_stops_its_chain() -> None:
    """label.go:455: the walk up stops at the first label the node lacks."""
    nodes = [make_node("a", labels={"volcano.sh/hypercluster": "c"}),
             make_node("b", labels={"volcano.sh/hypernode": "h", "volcano.sh/hypercluster": "c"})]
    desired = desired_hypernodes(nodes, _config())
    tiers = {h["spec"]["tier"]: h for h in desired}
    assert sorted(tiers) == [1, 2] and len(desired) == 2  # node a is in nothing
    assert _members(tiers[1]) == ["b"]
    assert _members(tiers[2]) == [tiers[1]["metadata"]["name"]]


def test_existing_owned_names_are_kept() -> None:
    """buildHyperNodeName (label.go:500): an owned HyperNode labelled key=value with the
    type's tier prefix keeps its name."""
    existing = {"hypernode-topologya3-tier1-kept1": {
        "metadata": {"name": "hypernode-topologya3-tier1-kept1",
                     "labels": {SOURCE_LABEL: LABEL_SOURCE, "volcano.sh/hypernode": "s0"}},
        "spec": {"tier": 1, "members": []}}}
    desired = desired_hypernodes(_eight_nodes(), _config(), existing=existing)
    names = [h["metadata"]["name"] for h in desired]
    assert "hypernode-topologya3-tier1-kept1" in names
    plan = plan_reconcile(desired, existing)
    assert [u["metadata"]["name"] for u in plan.update] == ["hypernode-topologya3-tier1-kept1"]
    assert len(plan.create) == 5 and plan.delete == ()


def test_reconcile_never_touches_hypernodes_it_did_not_make() -> None:
    """reconcileTopology (hypernode_controller.go:190) lists only source=label HyperNodes:
    a hand-made one is neither updated nor deleted, and a name clash is reported."""
    desired = desired_hypernodes(_eight_nodes(), _config())
    clash = desired[0]["metadata"]["name"]
    hand_made: dict[str, dict[str, Any]] = {
        "rack-a": {"metadata": {"name": "rack-a", "labels": {}}, "spec": {"tier": 1}},
        clash: {"metadata": {"name": clash}, "spec": {"tier": 3}},
        "old-discovered": {"metadata": {"name": "old-discovered",
                                        "labels": {SOURCE_LABEL: LABEL_SOURCE}},
                           "spec": {"tier": 1}},
        "other-source": {"metadata": {"name": "other-source",
                                      "labels": {SOURCE_LABEL: "ufm"}}, "spec": {"tier": 1}},
    }
    plan = plan_reconcile(desired, hand_made)
    assert plan.delete == ("old-discovered",)
    assert all(u["metadata"]["name"] != clash for u in plan.update)
    assert clash not in [c["metadata"]["name"] for c in plan.create]
    assert plan.conflicts and clash in plan.conflicts[0]


def test_update_merges_labels_and_keeps_the_resource_version() -> None:
    """UpdateHyperNode (utils/utils.go:42): spec replaced, labels and annotations merged."""
    desired = desired_hypernodes(_eight_nodes()[:2], _config())
    tier1 = next(h for h in desired if h["spec"]["tier"] == 1)
    name = tier1["metadata"]["name"]
    current = {"metadata": {"name": name, "resourceVersion": "42",
                            "labels": {SOURCE_LABEL: LABEL_SOURCE, "team": "x",
                                       "volcano.sh/hypernode": "s0"}},
               "spec": {"tier": 1, "members": [{"type": "Node",
                                                "selector": {"exactMatch": {"name": "gone"}}}]}}
    plan = plan_reconcile(desired, {name: current})
    (updated,) = plan.update
    assert updated["metadata"]["resourceVersion"] == "42"
    assert updated["metadata"]["labels"]["team"] == "x"
    assert _members(updated) == ["node0", "node1"]


LABEL_KEYS = ("volcano.sh/hypernode", "volcano.sh/hypercluster")


@st.composite
def _clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    nodes = []
    for index in range(draw(st.integers(0, 8))):
        labels = {key: draw(st.sampled_from(["a", "b", "c"]))
                  for key in LABEL_KEYS if draw(st.booleans())}
        nodes.append(make_node(f"n{index}", labels=labels))
    existing: dict[str, dict[str, Any]] = {}
    for index in range(draw(st.integers(0, 4))):
        owned = draw(st.booleans())
        labels = {SOURCE_LABEL: LABEL_SOURCE} if owned else {}
        if draw(st.booleans()):
            labels["volcano.sh/hypernode"] = draw(st.sampled_from(["a", "b"]))
        name = (f"hypernode-topologya3-tier1-{index}" if draw(st.booleans())
                else f"hand-{index}")
        existing[name] = {"metadata": {"name": name, "labels": labels},
                          "spec": {"tier": draw(st.integers(1, 3)), "members": []}}
    return nodes, existing


@settings(max_examples=150, deadline=None)
@given(_clusters())
def test_reconcile_is_idempotent_and_leaves_others_alone(
        cluster: tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]) -> None:
    """Applying a plan and planning again gives an empty plan; HyperNodes without the
    source=label mark come out of every plan unchanged."""
    nodes, existing = cluster
    config = _config()
    plan = plan_reconcile(desired_hypernodes(nodes, config, existing=existing), existing)
    after = apply_plan(existing, plan)
    again = plan_reconcile(desired_hypernodes(nodes, config, existing=after), after)
    assert again.empty, again
    for name, obj in existing.items():
        if (obj["metadata"].get("labels") or {}).get(SOURCE_LABEL) != LABEL_SOURCE:
            assert after[name] == obj
    owned_after = {n for n, o in after.items()
                   if (o["metadata"].get("labels") or {}).get(SOURCE_LABEL) == LABEL_SOURCE}
    desired_names = {h["metadata"]["name"]
                     for h in desired_hypernodes(nodes, config, existing=after)}
    assert owned_after == desired_names - {n for n in existing if n not in owned_after}
