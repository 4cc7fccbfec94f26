"""``deviceshare.GPUExclusiveRules``: pods matching one rule never share a vGPU card.

Ported from Volcano's ``pkg/scheduler/plugins/deviceshare/gpuexclusive_test.go`` (cited per
test); the behaviour is ``gpuexclusive.go``'s ``exclusiveGPUDevices``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.commands.cli import main
from scheduler.devices.exclusive import matching_rules, parse_exclusive_rules
from scheduler.framework.arguments import parse_args
from tests.builders import simulate
from tests.devices.conftest import (
    card,
    device_session,
    deviceshare_conf,
    session_task,
    vgpu_node,
    vgpu_pod,
)

Obj = dict[str, Any]

TRAINING = {"app": "training", "team": "ml"}
INFERENCE = {"workload": "inference"}
RULES_CONF = [TRAINING, INFERENCE]
RULES, _ = parse_exclusive_rules(RULES_CONF)


def conf(policy: str = "binpack", rules: Any = RULES_CONF) -> str:
    return deviceshare_conf(VGPUEnable=True, SchedulePolicy=policy, ScheduleWeight=10,
                            GPUExclusiveRules=rules)


def labelled(pod: Obj, labels: dict[str, str] | None) -> Obj:
    if labels is not None:
        pod["metadata"]["labels"] = dict(labels)
    return pod


def pod(name: str, labels: dict[str, str] | None, *, number: int = 1) -> Obj:
    return labelled(vgpu_pod(name, number=number, memory=1000), labels)


def holder(name: str, labels: dict[str, str] | None, uuid: str) -> Obj:
    """A running pod holding one vGPU on ``uuid`` of node n1."""
    return labelled(vgpu_pod(name, memory=1000, node="n1", phase="Running", annotations={
        "volcano.sh/vgpu-node": "n1", "volcano.sh/vgpu-ids-new": f"{uuid},NVIDIA,1000,0:"}),
        labels)


def node(cards: int) -> Obj:
    return vgpu_node("n1", [card(f"GPU-{i}") for i in range(cards)])


def chosen(objs: list[Obj], name: str, *, policy: str = "binpack") -> list[str] | str:
    """The cards ``name`` gets on n1 in the first session, or the reason it gets none."""
    session, plugin = device_session(objs, conf=conf(policy))
    task = session_task(session, name)
    request = plugin.requests(task)[0][1]
    ledger = session.nodes["n1"].others["hamivgpu"]
    fit = ledger.filter_node(task, request)
    if fit.status is not None:
        return str(fit.status.reasons)
    text = ledger.allocate(task, request, now=0.0)["volcano.sh/vgpu-ids-new"]
    return [entry.split(",")[0] for entry in text.split(":") if entry.strip(";")]


# -- rule matching (gpuexclusive_test.go TestPodMatchesRule, :108-163) --------------------------
@pytest.mark.parametrize(("labels", "rule", "expected"), [
    pytest.param(TRAINING, 0, True, id="matches-rule-0"),
    pytest.param({**TRAINING, "env": "prod"}, 0, True, id="matches-rule-0-with-extra-labels"),
    pytest.param({"app": "training"}, 0, False, id="missing-one-label-of-rule-0"),
    pytest.param({"app": "training", "team": "data"}, 0, False, id="wrong-value-for-rule-0"),
    pytest.param(INFERENCE, 1, True, id="matches-rule-1"),
    pytest.param({}, 0, False, id="no-labels-match-nothing"),
])
def test_pod_matches_rule(labels: dict[str, str], rule: int, expected: bool) -> None:
    """gpuexclusive_test.go:108 TestPodMatchesRule (gpuexclusive.go:123 podMatchesRule)."""
    assert (rule in matching_rules(labels, RULES)) is expected


# -- matching rules (TestMatchingRules, :165-210) -----------------------------------------------
@pytest.mark.parametrize(("labels", "expected"), [
    pytest.param(TRAINING, {0}, id="rule-0-only"),
    pytest.param(INFERENCE, {1}, id="rule-1-only"),
    pytest.param({**TRAINING, **INFERENCE}, {0, 1}, id="both-rules"),
    pytest.param({"app": "serving"}, set(), id="no-rule"),
    pytest.param({}, set(), id="no-labels"),
])
def test_matching_rules(labels: dict[str, str], expected: set[int]) -> None:
    """gpuexclusive_test.go:165 TestMatchingRules (gpuexclusive.go:108 matchingRules)."""
    assert matching_rules(labels, RULES) == expected


# -- conf (TestLoadGPUExclusiveConfig :212-255, TestParseExclusiveRulesHandlesEdgeCases :502) --
def _rules_of(arguments: dict[str, Any]) -> tuple[Any, list[str]]:
    from plugins.deviceshare import DeviceShareArgs

    args, warnings = parse_args(DeviceShareArgs, {"deviceshare.VGPUEnable": True, **arguments})
    return args.exclusive_rules, warnings


def test_no_rules_by_default() -> None:
    """gpuexclusive_test.go:213 "defaults with no rules"."""
    assert _rules_of({}) == ((), [])


def test_rules_are_read_from_a_list_of_label_maps() -> None:
    """gpuexclusive_test.go:220 "rules from map[string]interface{}" (loadGPUExclusiveConfig,
    gpuexclusive.go:62)."""
    rules, warnings = _rules_of({"deviceshare.GPUExclusiveRules": RULES_CONF})
    assert rules == ((("app", "training"), ("team", "ml")), (("workload", "inference"),))
    assert warnings == []


def test_labels_that_are_not_strings_are_left_out_with_a_warning() -> None:
    """gpuexclusive_test.go:239 "rules from map[interface{}]interface{}": only string keys with
    string values count (gpuexclusive.go:78-92); we also name each label left out."""
    rules, warnings = _rules_of({"deviceshare.GPUExclusiveRules": [
        {"app": "training", 1: "x", "tier": 2}]})
    assert rules == ((("app", "training"),),)
    assert len(warnings) == 2 and all("GPUExclusiveRules" in w for w in warnings)


@pytest.mark.parametrize(("raw", "warned"), [
    pytest.param(None, False, id="nil-input"),
    pytest.param("not a slice", True, id="wrong-type"),
    pytest.param([], False, id="empty-slice"),
    pytest.param([{}], True, id="empty-map-skipped"),
])
def test_parse_edge_cases(raw: Any, warned: bool) -> None:
    """gpuexclusive_test.go:502 TestParseExclusiveRulesHandlesEdgeCases: no rule in any case;
    a value Volcano drops silently is named in a warning."""
    rules, warnings = parse_exclusive_rules(raw)
    assert rules == ()
    assert bool(warnings) is warned


def test_empty_rules_keep_the_positions_of_the_others() -> None:
    """gpuexclusive.go:94: an empty map is skipped, so the next rule takes its index."""
    rules, _ = parse_exclusive_rules([{}, INFERENCE])
    assert matching_rules(INFERENCE, rules) == {0}


# -- what a matching pod may use (:257-420) ----------------------------------------------------
def test_only_cards_of_the_same_rule_are_capped() -> None:
    """gpuexclusive_test.go:257 TestCapGPUsOnlyAffectsSpecifiedIndices: GPU-0 and GPU-1 hold
    rule-0 pods; a rule-0 pod asking for two vGPUs gets GPU-2 and GPU-3, for three none, and
    the capped cards keep their own counts (capGPUs/restoreGPUs, gpuexclusive.go:175-195)."""
    objs = [node(4), holder("a", TRAINING, "GPU-0"), holder("b", TRAINING, "GPU-1"),
            pod("two", TRAINING, number=2), pod("three", TRAINING, number=3)]
    assert sorted(chosen(objs, "two")) == ["GPU-2", "GPU-3"]
    reason = chosen(objs, "three")
    assert isinstance(reason, str) and "same exclusivity rule" in reason
    session, _ = device_session(objs, conf=conf())
    ledger = session.nodes["n1"].others["hamivgpu"]
    assert [c.used_num for c in ledger.cards] == [1, 1, 0, 0]
    assert [c.info.split for c in ledger.cards] == [10] * 4


def test_reserved_cards_are_those_of_the_same_rule_only() -> None:
    """gpuexclusive_test.go:293 TestReservedGPUsForPod: GPU-0 holds a rule-0 pod, GPU-1 a
    rule-1 pod. Binpack would fill the used cards first: a rule-0 pod skips GPU-0 only and
    takes GPU-1; a pod of no rule takes GPU-0 (reservedGPUsForPod, gpuexclusive.go:156)."""
    objs = [node(3), holder("pod-a", TRAINING, "GPU-0"), holder("pod-b", INFERENCE, "GPU-1"),
            pod("pod-c", TRAINING), pod("pod-e", {"app": "serving"})]
    assert chosen(objs, "pod-c") == ["GPU-1"]
    assert chosen(objs, "pod-e") == ["GPU-0"]


def test_a_pod_of_two_rules_avoids_the_cards_of_both() -> None:
    """gpuexclusive_test.go:328 TestPodMatchingMultipleRulesSeesUnionOfReservedGPUs."""
    objs = [node(3), holder("pod-a", TRAINING, "GPU-0"), holder("pod-b", INFERENCE, "GPU-1"),
            pod("pod-x", {**TRAINING, **INFERENCE}, number=1)]
    assert chosen(objs, "pod-x") == ["GPU-2"]


def test_a_pod_of_no_rule_reserves_nothing() -> None:
    """gpuexclusive_test.go:358 TestNonMatchingPodDoesNotReserve: a pod of no rule is
    tracked nowhere, so a rule pod may join its card."""
    objs = [node(1), holder("pod-x", {"app": "serving"}, "GPU-0"), pod("pod-c", TRAINING)]
    session, _ = device_session(objs, conf=conf())
    assert session.nodes["n1"].others["hamivgpu"].matched == {}
    assert chosen(objs, "pod-c") == ["GPU-0"]


def test_end_to_end_a_rule_pod_sees_three_cards_and_others_four() -> None:
    """gpuexclusive_test.go:375 TestEndToEndExclusive: GPU-0 (rule 0) and GPU-1 (rule 1) are
    used; a rule-0 pod can take three vGPUs but not four, an unrelated pod four."""
    objs = [node(4), holder("pod-a", TRAINING, "GPU-0"), holder("pod-b", INFERENCE, "GPU-1"),
            pod("three", TRAINING, number=3), pod("four", TRAINING, number=4),
            pod("other", {"app": "serving"}, number=4)]
    assert sorted(chosen(objs, "three")) == ["GPU-1", "GPU-2", "GPU-3"]
    assert isinstance(chosen(objs, "four"), str)
    assert sorted(chosen(objs, "other")) == ["GPU-0", "GPU-1", "GPU-2", "GPU-3"]


def test_bound_pods_are_tracked_from_their_annotations() -> None:
    """gpuexclusive_test.go:422 TestOnSessionOpenWrapsDevices (wrapGPUDevicesForExclusivity,
    gpuexclusive.go:426, sources 1 and 2): a bound rule-0 pod on GPU-0 reserves GPU-0 for
    rule 0 and nothing else."""
    objs = [node(2), holder("pod-a", TRAINING, "GPU-0")]
    session, _ = device_session(objs, conf=conf())
    ledger = session.nodes["n1"].others["hamivgpu"]
    assert [dict(c.exclusive) for c in ledger.cards] == [{0: 1}, {}]


# -- whole cycles ------------------------------------------------------------------------------
def test_pods_of_one_rule_take_separate_cards_within_a_cycle() -> None:
    """gpuexclusive.go:330-357: Allocate records the cards a rule pod got, so the next pod of
    the rule in the same cycle avoids them; without rules binpack stacks all three on one
    card."""
    objs = [node(3)] + [pod(f"t{i}", TRAINING) for i in range(4)]
    run = simulate(objs, conf=conf())
    cards = [run.pod(f"t{i}")["metadata"]["annotations"].get("volcano.sh/vgpu-ids-new", "")
             .split(",")[0] for i in range(4)]
    placed = [c for c in cards if c]
    assert sorted(placed) == ["GPU-0", "GPU-1", "GPU-2"]
    plain = simulate([node(3)] + [pod(f"t{i}", TRAINING) for i in range(4)],
                     conf=conf(rules=[]))
    assert {plain.pod(f"t{i}")["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"]
            .split(",")[0] for i in range(4)} == {"GPU-0"}


def test_a_rule_pod_leaving_frees_its_card() -> None:
    """SubResource/untrackPod (gpuexclusive.go:215-262, 270): once the holder is gone the
    card is open to the rule again."""
    objs = [node(1), holder("pod-a", TRAINING, "GPU-0"), pod("pod-c", TRAINING)]
    assert isinstance(chosen(objs, "pod-c"), str)
    session, plugin = device_session(objs, conf=conf())
    ledger = session.nodes["n1"].others["hamivgpu"]
    node_info = session.nodes["n1"]
    ledger.sub_task(next(t for t in node_info.tasks.values() if t.name == "pod-a"))
    assert [dict(c.exclusive) for c in ledger.cards] == [{}]
    task = session_task(session, "pod-c")
    assert ledger.filter_node(task, plugin.requests(task)[0][1]).status is None


def test_cli_simulate_applies_the_rules(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``lahar simulate`` with the rules in the conf: the second training pod waits on a
    one-card node while a serving pod shares the card."""
    conf_path = tmp_path / "vgpu.conf"
    conf_path.write_text(conf())
    objs = [node(1), pod("t0", TRAINING), pod("t1", TRAINING), pod("s0", {"app": "serving"})]
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(objs))
    assert main(["simulate", "--conf", str(conf_path), str(cluster), "-o", "yaml"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)["items"]
    bound = {p["metadata"]["name"] for p in out
             if p["kind"] == "Pod" and (p.get("spec") or {}).get("nodeName")}
    assert "s0" in bound and len(bound & {"t0", "t1"}) == 1
