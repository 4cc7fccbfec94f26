"""Inter-pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity plugin decides it
inside Volcano's predicates and nodeorder plugins."""

from __future__ import annotations

import pytest

from tests.builders import PACKING_TIERS, make_podgroup, simulate
from tests.scenarios.affinity_helpers import (
    ZONE,
    affinity,
    labelled_pod,
    term,
    unavailable,
    zoned_node,
)

R_AFFINITY = "node(s) didn't match pod affinity rules"
R_ANTI = "node(s) didn't match pod anti-affinity rules"
R_EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"


def _nodes() -> list[dict]:
    return [zoned_node("a1", "a"), zoned_node("a2", "a"), zoned_node("b1", "b")]


def _running(name: str, node: str, **labels: str) -> dict:
    return labelled_pod(name, labels=labels, node=node, scheduler="default-scheduler")


def test_required_affinity_follows_the_matching_pod_into_its_zone() -> None:
    """satisfyPodAffinity (interpodaffinity/filtering.go): a node qualifies when a pod matching
    the term sits in the node's domain of the term's topology key."""
    pod = labelled_pod("web", affinity=affinity(required=[term({"app": "db"}, ZONE)]))
    run = simulate([*_nodes(), _running("db", "b1", app="db"), pod])
    assert run.node_of("web") == "b1"
    full = [zoned_node("a1", "a"), zoned_node("b1", "b", cpu="1")]
    run = simulate([*full, _running("db", "b1", app="db"), pod])
    assert run.reason("web") == unavailable(2, (1, "Insufficient cpu"), (1, R_AFFINITY))


def test_required_affinity_needs_the_topology_key_on_the_node() -> None:
    """satisfyPodAffinity: "All topology labels must exist on the node" — a node without the
    key fails even when the matching pod runs on it."""
    nodes = [zoned_node("bare", None), zoned_node("a1", "a", cpu="1")]
    pod = labelled_pod("web", cpu="2", affinity=affinity(required=[term({"app": "db"}, ZONE)]))
    run = simulate([*nodes, _running("db", "bare", app="db"), pod])
    assert run.reason("web") == unavailable(2, (1, "Insufficient cpu"), (1, R_AFFINITY))


@pytest.mark.parametrize(
    ("existing", "zone"),
    [
        pytest.param(None, None, id="first-pod-anywhere-rest-follow"),
        pytest.param("b1", "b", id="an-existing-match-pins-the-group"),
    ],
)
def test_self_affinity_of_a_gang(existing: str | None, zone: str | None) -> None:
    """satisfyPodAffinity: with no pod anywhere matching all terms, a pod that matches its own
    terms may go to any node with the keys; its gang mates then follow it (in-session counts)."""
    aff = affinity(required=[term({"app": "ring"}, ZONE)])
    objs = [*_nodes(), make_podgroup("ring", min_member=3)]
    objs += [
        labelled_pod(f"ring-task-{i}", group="ring", cpu="1", labels={"app": "ring"}, affinity=aff)
        for i in range(3)
    ]
    if existing is not None:
        objs.append(_running("old", existing, app="ring"))
    run = simulate(objs)
    placed = {run.node_of(f"ring-task-{i}") for i in range(3)}
    zones = {n[0] for n in placed if n}
    assert None not in placed and len(zones) == 1
    if zone is not None:
        assert zones == {zone}


def test_pod_that_does_not_match_its_own_affinity_waits_for_a_match() -> None:
    """satisfyPodAffinity: the first-pod exception needs podMatchesAllAffinityTerms(pod)."""
    pod = labelled_pod(
        "web", labels={"app": "web"}, affinity=affinity(required=[term({"app": "db"}, ZONE)])
    )
    run = simulate([*_nodes(), pod])
    assert run.reason("web") == unavailable(3, (3, R_AFFINITY))


def test_anti_affinity_spreads_gang_members_one_per_node() -> None:
    """satisfyPodAntiAffinity: a node is refused while a pod matching a required anti-affinity
    term shares its hostname domain; gang members see each other's in-session placements."""
    anti = affinity(anti=[term({"app": "web"})])
    objs = [*_nodes(), make_podgroup("web", min_member=3)]
    objs += [
        labelled_pod(f"web-task-{i}", group="web", labels={"app": "web"}, affinity=anti)
        for i in range(4)
    ]
    run = simulate(objs)
    placed = [run.node_of(f"web-task-{i}") for i in range(3)]
    assert sorted(placed) == ["a1", "a2", "b1"]  # type: ignore[type-var]
    assert run.node_of("web-task-3") is None
    assert run.reason("web-task-3") == unavailable(3, (3, R_ANTI))


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("kubernetes.io/hostname", {"a2", "b1"}, id="hostname-blocks-the-node"),
        pytest.param(ZONE, {"b1"}, id="zone-blocks-the-whole-zone"),
    ],
)
def test_topology_key_sets_the_size_of_the_blocked_domain(key: str, expected: set) -> None:
    """satisfyPodAntiAffinity uses the node's value of term.TopologyKey: hostname blocks one
    node, a zone key every node of the zone."""
    pod = labelled_pod("web", affinity=affinity(anti=[term({"app": "db"}, key)]))
    for seed in range(6):
        run = simulate([*_nodes(), _running("db", "a1", app="db"), pod], seed=seed)
        assert run.node_of("web") in expected


def test_existing_pods_anti_affinity_is_symmetric() -> None:
    """satisfyExistingPodsAntiAffinity: a placed pod whose required anti-affinity selects the
    incoming pod keeps it out of its domain, though the incoming pod has no terms at all."""
    guard = labelled_pod(
        "guard",
        node="a1",
        scheduler="default-scheduler",
        affinity=affinity(anti=[term({"app": "web"}, ZONE)]),
    )
    web = labelled_pod("web", labels={"app": "web"})
    run = simulate([*_nodes(), guard, web])
    assert run.node_of("web") == "b1"
    run = simulate([zoned_node("a1", "a"), zoned_node("a2", "a"), guard, web])
    assert run.reason("web") == unavailable(2, (2, R_EXISTING))


def test_reasons_count_each_node_under_its_first_failure_in_kube_order() -> None:
    """InterPodAffinity.Filter checks affinity, then anti-affinity, then existing pods'
    anti-affinity; Volcano's FitErrors counts each node once under its first failure."""
    nodes = [
        zoned_node("small", "a", cpu="1"),
        zoned_node("db-node", "b"),
        zoned_node("guarded", "c"),
        zoned_node("bare", None),
    ]
    objs = [
        *nodes,
        labelled_pod("filler", node="small", scheduler="default-scheduler", cpu="1"),
        _running("db", "db-node", app="db"),
        labelled_pod(
            "guard",
            node="guarded",
            scheduler="default-scheduler",
            cpu="0",
            affinity=affinity(anti=[term({"app": "web"})]),
        ),
        _running("cache", "guarded", app="cache"),
        labelled_pod(
            "web",
            labels={"app": "web"},
            affinity=affinity(
                required=[term({"app": "cache"}, "kubernetes.io/hostname")],
                anti=[term({"app": "db"})],
            ),
        ),
    ]
    run = simulate(objs)
    assert run.reason("web") == unavailable(
        4, (1, "Insufficient cpu"), (2, R_AFFINITY), (1, R_EXISTING)
    )


@pytest.mark.parametrize(
    ("selector", "namespaces", "blocked"),
    [
        pytest.param(None, None, False, id="default-is-own-namespace"),
        pytest.param(None, ["team"], True, id="listed-namespace"),
        pytest.param({}, None, True, id="empty-namespace-selector-is-all"),
        pytest.param({"matchLabels": {"tier": "x"}}, None, False, id="selector-no-match"),
    ],
)
def test_term_namespaces(selector: dict | None, namespaces: list | None, blocked: bool) -> None:
    """AffinityTerm.Matches (framework/types.go): the term's namespaces (default the pod's own)
    or a namespaceSelector over namespace labels ({} selects every namespace)."""
    other = labelled_pod(
        "db", namespace="team", labels={"app": "db"}, node="a1", scheduler="default-scheduler"
    )
    t = term({"app": "db"}, ZONE, namespaces=namespaces, namespace_selector=selector)
    pod = labelled_pod("web", affinity=affinity(anti=[t]))
    run = simulate(
        [
            zoned_node("a1", "a"),
            zoned_node("b1", "b", cpu="1"),
            labelled_pod("fill", node="b1", scheduler="x", cpu="1"),
            other,
            pod,
        ]
    )
    if blocked:
        assert run.reason("web") == unavailable(2, (1, "Insufficient cpu"), (1, R_ANTI))
    else:
        assert run.node_of("web") == "a1"


@pytest.mark.parametrize(
    ("expression", "blocked"),
    [
        pytest.param({"key": "tier", "operator": "In", "values": ["data"]}, True, id="in"),
        pytest.param({"key": "tier", "operator": "NotIn", "values": ["data"]}, False, id="not-in"),
        pytest.param({"key": "tier", "operator": "DoesNotExist"}, False, id="does-not-exist"),
    ],
)
def test_namespace_selector_reads_namespace_labels(expression: dict, blocked: bool) -> None:
    """InterPodAffinity.mergeAffinityTermNamespacesIfNotEmpty: a namespaceSelector picks the
    namespaces whose labels it matches (Namespace objects, here from manifests)."""
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team", "labels": {"tier": "data"}},
    }
    other = labelled_pod("db", namespace="team", labels={"app": "db"}, node="a1", scheduler="x")
    selector = {"matchExpressions": [expression]}
    pod = labelled_pod(
        "web", affinity=affinity(anti=[term({"app": "db"}, ZONE, namespace_selector=selector)])
    )
    run = simulate([zoned_node("a1", "a"), namespace, other, pod])
    assert (run.node_of("web") is None) == blocked


def test_terminating_pods_still_count_for_affinity() -> None:
    """getIncomingAffinityAntiAffinityCounts walks nodeInfo.Pods, terminating pods included."""
    going = labelled_pod("db", labels={"app": "db"}, node="a1", scheduler="x", deleting=True)
    pod = labelled_pod("web", affinity=affinity(anti=[term({"app": "db"})]))
    run = simulate([zoned_node("a1", "a"), going, pod])
    assert run.reason("web") == unavailable(1, (1, R_ANTI))


def test_predicate_switch_turns_the_filter_off() -> None:
    """Volcano's predicate.PodAffinityEnable=false leaves InterPodAffinity out of the filter."""
    conf = PACKING_TIERS.replace(
        "{name: predicates}", "{name: predicates, arguments: {predicate.PodAffinityEnable: false}}"
    )
    pod = labelled_pod("web", affinity=affinity(anti=[term({"app": "db"})]))
    run = simulate([zoned_node("a1", "a"), _running("db", "a1", app="db"), pod], conf=conf)
    assert run.node_of("web") == "a1"


@pytest.mark.parametrize(
    ("pod_affinity", "expected"),
    [
        pytest.param(affinity(preferred=[(10, term({"app": "db"}, ZONE))]), "a", id="preferred"),
        pytest.param(
            affinity(preferred_anti=[(10, term({"app": "db"}, ZONE))]), "b", id="preferred-anti"
        ),
        pytest.param(
            affinity(
                preferred=[(10, term({"app": "db"}, ZONE)), (30, term({"app": "cache"}, ZONE))]
            ),
            "b",
            id="heavier-weight-wins",
        ),
        pytest.param(
            affinity(
                preferred=[(30, term({"app": "db"}, ZONE))],
                preferred_anti=[(40, term({"app": "db"}, ZONE))],
            ),
            "b",
            id="anti-outweighs",
        ),
    ],
)
def test_preferred_terms_score_by_weight(pod_affinity: dict, expected: str) -> None:
    """InterPodAffinity.PreScore/processExistingPod: per domain, + weight for each placed pod
    matching a preferred term, − weight for preferred anti-affinity; NormalizeScore maps the
    range onto 0–100 and Volcano multiplies by podaffinity.weight."""
    objs = [
        *_nodes(),
        _running("db", "a1", app="db", cpu="0"),
        _running("cache", "b1", app="cache", cpu="0"),
        labelled_pod("web", affinity=pod_affinity),
    ]
    for seed in range(4):
        run = simulate(objs, conf=PACKING_TIERS, seed=seed)
        assert run.node_of("web")[0] == expected  # type: ignore[index]


def test_placed_pods_preferred_anti_affinity_repels_the_incoming_pod() -> None:
    """processExistingPod: a placed pod's preferred anti-affinity term that selects the
    incoming pod subtracts its weight in the placed pod's domain."""
    shy = labelled_pod(
        "shy",
        node="a1",
        scheduler="x",
        cpu="0",
        affinity=affinity(preferred_anti=[(50, term({"app": "web"}, ZONE))]),
    )
    for seed in range(4):
        run = simulate(
            [*_nodes(), shy, labelled_pod("web", labels={"app": "web"})],
            conf=PACKING_TIERS,
            seed=seed,
        )
        assert run.node_of("web") == "b1"
