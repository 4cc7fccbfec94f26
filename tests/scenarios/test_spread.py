"""Pod topology spread as kube-scheduler's PodTopologySpread plugin decides it inside Volcano's
predicates (DoNotSchedule) and nodeorder (ScheduleAnyway) plugins."""

from __future__ import annotations

import pytest

from tests.builders import PACKING_TIERS, make_podgroup, simulate
from tests.scenarios.affinity_helpers import (
    HOST,
    labelled_pod,
    spread,
    unavailable,
    zoned_node,
)

R_SPREAD = "node(s) didn't match pod topology spread constraints"
R_LABEL = R_SPREAD + " (missing required label)"
R_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def _existing(zones: dict[str, int], **labels: str) -> list[dict]:
    """``count`` running pods labelled ``labels`` on the first node of each zone."""
    labels = labels or {"app": "s"}
    return [
        labelled_pod(f"old-{zone}-{i}", labels=labels, node=f"{zone}1", scheduler="x", cpu="0")
        for zone, count in zones.items()
        for i in range(count)
    ]


def _gang(name: str, size: int, constraints: list[dict], **labels: str) -> list[dict]:
    labels = labels or {"app": "s"}
    return [make_podgroup(name, min_member=size)] + [
        labelled_pod(f"{name}-task-{i}", group=name, labels=labels, spread=constraints)
        for i in range(size)
    ]


def _zones_of(run: object, names: list[str]) -> list[str]:
    return sorted(run.node_of(n)[0] for n in names)  # type: ignore[attr-defined]


def test_gang_members_spread_evenly_across_zones() -> None:
    """PodTopologySpread.Filter: skew = pods in the node's domain + self − min over domains;
    a gang's own in-session placements count for its later members."""
    nodes = [zoned_node("a1", "a"), zoned_node("a2", "a"), zoned_node("b1", "b")]
    run = simulate([*nodes, *_gang("s", 4, [spread({"app": "s"})])])
    assert _zones_of(run, [f"s-task-{i}" for i in range(4)]) == ["a", "a", "b", "b"]


def test_existing_imbalance_forces_the_emptier_zone_and_names_the_reason() -> None:
    """PodTopologySpread.Filter: with zone a at 2 and b at 0 and maxSkew 1, only b qualifies;
    when b has no room the other nodes fail with ErrReasonConstraintsNotMatch."""
    nodes = [zoned_node("a1", "a"), zoned_node("a2", "a"), zoned_node("b1", "b")]
    pod = labelled_pod("p", labels={"app": "s"}, spread=[spread({"app": "s"})])
    run = simulate([*nodes, *_existing({"a": 2}), pod])
    assert run.node_of("p") == "b1"
    full_b = [zoned_node("a1", "a"), zoned_node("a2", "a"), zoned_node("b1", "b", cpu="0")]
    run = simulate([*full_b, *_existing({"a": 2}), pod])
    assert run.reason("p") == unavailable(3, (1, "Insufficient cpu"), (2, R_SPREAD))


def test_max_skew_two_tolerates_a_difference_of_two() -> None:
    """PodTopologySpread.Filter compares skew with c.MaxSkew."""
    nodes = [zoned_node("a1", "a"), zoned_node("b1", "b", cpu="0")]
    pod = labelled_pod("p", labels={"app": "s"}, spread=[spread({"app": "s"}, max_skew=2)])
    assert simulate([*nodes, *_existing({"a": 1}), pod]).node_of("p") == "a1"
    run = simulate([*nodes, *_existing({"a": 2}), pod])
    assert run.reason("p") == unavailable(2, (1, "Insufficient cpu"), (1, R_SPREAD))


def test_node_without_the_key_fails_with_missing_label() -> None:
    """PodTopologySpread.Filter: a node lacking the topology key is
    UnschedulableAndUnresolvable with ErrReasonNodeLabelNotMatch."""
    pod = labelled_pod("p", labels={"app": "s"}, spread=[spread({"app": "s"})])
    run = simulate([zoned_node("bare", None), pod])
    assert run.reason("p") == unavailable(1, (1, R_LABEL))


def test_pod_not_matching_its_own_selector_does_not_count_itself() -> None:
    """PodTopologySpread.Filter: selfMatchNum is 1 only when c.Selector matches the pod."""
    nodes = [zoned_node("a1", "a"), zoned_node("b1", "b", cpu="0")]
    pod = labelled_pod("p", labels={"app": "other"}, spread=[spread({"app": "s"})])
    assert simulate([*nodes, *_existing({"a": 1}), pod]).node_of("p") == "a1"


@pytest.mark.parametrize(
    ("min_domains", "placed"),
    [
        pytest.param(None, 4, id="unset-min-over-two-zones"),
        pytest.param(3, 2, id="three-domains-wanted-two-exist"),
    ],
)
def test_min_domains(min_domains: int | None, placed: int) -> None:
    """preFilterState.minMatchNum: while fewer than minDomains domains exist the global minimum
    is 0, so each zone takes at most maxSkew matching pods."""
    extra = {} if min_domains is None else {"minDomains": min_domains}
    nodes = [zoned_node("a1", "a"), zoned_node("b1", "b")]
    objs = [*nodes, make_podgroup("s", min_member=1)]
    objs += [
        labelled_pod(
            f"s-task-{i}", group="s", labels={"app": "s"}, spread=[spread({"app": "s"}, **extra)]
        )
        for i in range(4)
    ]
    run = simulate(objs)
    assert sum(run.node_of(f"s-task-{i}") is not None for i in range(4)) == placed


@pytest.mark.parametrize(
    ("policy", "node"),
    [
        pytest.param("Honor", "b1", id="honor-counts-only-selectable-zones"),
        pytest.param("Ignore", None, id="ignore-counts-the-empty-excluded-zone"),
    ],
)
def test_node_affinity_policy(policy: str, node: str | None) -> None:
    """topologySpreadConstraint.matchNodeInclusionPolicies: with nodeAffinityPolicy Honor only
    nodes passing the pod's nodeSelector/required affinity define the domains."""
    nodes = [
        zoned_node("a1", "a"),
        zoned_node("b1", "b"),
        zoned_node("c1", "c", labels={"pool": "other"}),
    ]
    for n in nodes[:2]:
        n["metadata"]["labels"]["pool"] = "main"
    pod = labelled_pod(
        "p",
        labels={"app": "s"},
        node_selector={"pool": "main"},
        spread=[spread({"app": "s"}, nodeAffinityPolicy=policy)],
    )
    run = simulate([*nodes, *_existing({"a": 2, "b": 1}), pod])
    assert run.node_of("p") == node
    if node is None:
        assert run.reason("p") == unavailable(3, (1, R_NODE_AFFINITY), (2, R_SPREAD))


@pytest.mark.parametrize(
    ("policy", "node"),
    [
        pytest.param("Ignore", None, id="ignore-default-counts-tainted-zone"),
        pytest.param("Honor", "b1", id="honor-drops-untolerated-tainted-nodes"),
    ],
)
def test_node_taints_policy(policy: str, node: str | None) -> None:
    """matchNodeInclusionPolicies: nodeTaintsPolicy Honor leaves out nodes with taints the pod
    does not tolerate; Ignore (the default) keeps them as empty domains."""
    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    nodes = [zoned_node("a1", "a"), zoned_node("b1", "b"), zoned_node("c1", "c", taints=[taint])]
    pod = labelled_pod(
        "p", labels={"app": "s"}, spread=[spread({"app": "s"}, nodeTaintsPolicy=policy)]
    )
    run = simulate([*nodes, *_existing({"a": 2, "b": 1}), pod])
    assert run.node_of("p") == node


def test_match_label_keys_counts_only_pods_with_the_same_values() -> None:
    """PodTopologySpread's matchLabelKeys: the pod's own values of those keys narrow the
    selector, so pods of an older revision do not count."""
    nodes = [zoned_node("a1", "a"), zoned_node("b1", "b", cpu="0")]
    old = _existing({"a": 2}, app="s", rev="1")
    keyed = spread({"app": "s"}, matchLabelKeys=["rev"])
    new = labelled_pod("p", labels={"app": "s", "rev": "2"}, spread=[keyed])
    assert simulate([*nodes, *old, new]).node_of("p") == "a1"
    plain = labelled_pod("p", labels={"app": "s", "rev": "2"}, spread=[spread({"app": "s"})])
    run = simulate([*nodes, *old, plain])
    assert run.reason("p") == unavailable(2, (1, "Insufficient cpu"), (1, R_SPREAD))


def test_terminating_pods_do_not_count_for_spread() -> None:
    """countPodsMatchSelector skips pods with a deletionTimestamp."""
    nodes = [zoned_node("a1", "a"), zoned_node("b1", "b", cpu="0")]
    going = [
        labelled_pod(
            f"old-{i}", labels={"app": "s"}, node="a1", scheduler="x", cpu="0", deleting=True
        )
        for i in range(2)
    ]
    pod = labelled_pod("p", labels={"app": "s"}, spread=[spread({"app": "s"})])
    assert simulate([*nodes, *going, pod]).node_of("p") == "a1"


def test_spread_counts_only_the_pods_namespace() -> None:
    """countPodsMatchSelector compares the pod's namespace."""
    nodes = [zoned_node("a1", "a"), zoned_node("b1", "b", cpu="0")]
    elsewhere = [
        labelled_pod(
            f"o-{i}", namespace="team", labels={"app": "s"}, node="a1", scheduler="x", cpu="0"
        )
        for i in range(2)
    ]
    pod = labelled_pod("p", labels={"app": "s"}, spread=[spread({"app": "s"})])
    assert simulate([*nodes, *elsewhere, pod]).node_of("p") == "a1"


def test_schedule_anyway_prefers_the_emptier_domain() -> None:
    """PodTopologySpread.Score/NormalizeScore: fewer matching pods in the domain, higher
    score; the pod is never refused for it."""
    nodes = [zoned_node("a1", "a"), zoned_node("a2", "a"), zoned_node("b1", "b")]
    soft = [spread({"app": "s"}, when="ScheduleAnyway")]
    for seed in range(4):
        run = simulate(
            [*nodes, *_existing({"a": 1}), labelled_pod("p", labels={"app": "s"}, spread=soft)],
            conf=PACKING_TIERS,
            seed=seed,
        )
        assert run.node_of("p") == "b1"
    full = [zoned_node("a1", "a"), zoned_node("b1", "b", cpu="0")]
    run = simulate(
        [*full, *_existing({"a": 3}), labelled_pod("p", labels={"app": "s"}, spread=soft)],
        conf=PACKING_TIERS,
    )
    assert run.node_of("p") == "a1"


def test_schedule_anyway_by_hostname_spreads_a_gang() -> None:
    """PodTopologySpread.Score counts hostname domains from the node itself."""
    nodes = [zoned_node(f"n{i}", "a") for i in range(3)]
    run = simulate(
        [*nodes, *_gang("s", 3, [spread({"app": "s"}, HOST, when="ScheduleAnyway")])],
        conf=PACKING_TIERS,
    )
    assert sorted(run.node_of(f"s-task-{i}") for i in range(3)) == ["n0", "n1", "n2"]


@pytest.mark.parametrize(
    ("constraint", "field"),
    [
        pytest.param({"maxSkew": 0}, "maxSkew", id="max-skew"),
        pytest.param({"whenUnsatisfiable": "Maybe"}, "whenUnsatisfiable", id="when"),
        pytest.param(
            {"minDomains": 2, "whenUnsatisfiable": "ScheduleAnyway"},
            "minDomains",
            id="min-domains-soft",
        ),
        pytest.param({"nodeTaintsPolicy": "Sometimes"}, "nodeTaintsPolicy", id="policy"),
        pytest.param({"topologyKey": ""}, "topologyKey", id="key"),
    ],
)
def test_invalid_constraint_is_an_error_naming_the_field(constraint: dict, field: str) -> None:
    """The API server's validation of topologySpreadConstraints, applied to manifests."""
    from scheduler.api.errors import ObjectError
    from scheduler.api.task import task_from_pod

    c = {**spread({"app": "s"}), **constraint}
    with pytest.raises(ObjectError) as info:
        task_from_pod(labelled_pod("p", spread=[c]))
    assert f"spec.topologySpreadConstraints[0].{field}" in str(info.value)
    assert "Pod default/p" in str(info.value)
