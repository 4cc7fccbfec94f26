"""The network-topology-aware plugin's own cases, ported one test per Go case from Volcano's
``pkg/scheduler/plugins/network-topology-aware/network_topology_aware_test.go`` (ed72c7c)."""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
import pytest

from plugins.network_topology_aware import NetworkTopologyAware, NetworkTopologyAwareArgs
from scheduler.api.resource import Resource
from scheduler.cache.cache import SchedulerCache
from scheduler.framework.arguments import parse_args
from scheduler.framework.hypernodes import CLUSTER_TOP
from scheduler.framework.session import PluginEntry, Session
from tests.builders import make_hypernode, make_node, make_pod, make_podgroup, make_queue

Obj = dict[str, Any]


class _Writes:
    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def open_session(objects: list[Obj], arguments: dict[str, Any] | None = None) -> Session:
    cache = SchedulerCache(writer=_Writes(), clock=time.time)
    for obj in [make_queue("q1"), *objects]:
        cache.apply("ADDED", obj["kind"], obj)
    args, _ = parse_args(NetworkTopologyAwareArgs, arguments)
    session = Session(
        cache.snapshot(),
        tiers=[[PluginEntry(NetworkTopologyAware(args))]],
        sink=_Writes(),
        clock=lambda: 0.0,
        rng=random.Random(0),
    )
    session.open()
    return session


def plugin_of(session: Session) -> NetworkTopologyAware:
    plugin = session.tiers[0][0].plugin
    assert isinstance(plugin, NetworkTopologyAware)
    return plugin


def three_tier() -> list[Obj]:
    """s3..s6 at tier 1 (two nodes each), s1 {s3, s4} and s2 {s5, s6} at tier 2, s0 at 3."""
    objs = [make_hypernode(f"s{i}", tier=1, nodes=[f"s{i}-n1", f"s{i}-n2"]) for i in (3, 4, 5, 6)]
    return [
        *objs,
        make_hypernode("s1", tier=2, hypernodes=["s3", "s4"]),
        make_hypernode("s2", tier=2, hypernodes=["s5", "s6"]),
        make_hypernode("s0", tier=3, hypernodes=["s1", "s2"]),
    ]


def shaped_nodes(foo: bool = False) -> list[Obj]:
    """s3: 2 cpu 4G, s4: 4 cpu 4G, s5: 2 cpu 8G, s6: 4 cpu 8G (foo 8, 8, 16, 16)."""
    shapes = {
        "s3": ("2", "4G", "8"),
        "s4": ("4", "4G", "8"),
        "s5": ("2", "8G", "16"),
        "s6": ("4", "8G", "16"),
    }
    return [
        make_node(
            f"{s}-n{j}",
            cpu=cpu,
            memory=mem,
            pods="10",
            extra={"example.com/foo": f} if foo else None,
        )
        for s, (cpu, mem, f) in shapes.items()
        for j in (1, 2)
    ]


def node_scores(session: Session, pod: str) -> dict[str, float]:
    task = next(t for job in session.jobs.values() for t in job.tasks.values() if t.name == pod)
    rows = np.arange(len(session.table), dtype=np.intp)
    scores = plugin_of(session).score_nodes(task, session.table, rows)
    return {session.table.names[i]: float(s) for i, s in enumerate(scores)}


EPS = 0.1
"""The Go tests' tolerance on scores (their expectations are rounded to one decimal)."""


# -- TestNew ---------------------------------------------------------------------------------


def test_new_without_arguments() -> None:
    """network_topology_aware_test.go:52 "build plugin with no arguments"."""
    args, warnings = parse_args(NetworkTopologyAwareArgs, {})
    assert (args.weight, args.weights, args.normal_pod_enable, args.normal_pod_fading) == (
        1,
        {"cpu": 1, "memory": 1},
        True,
        0.8,
    )
    assert args.evict_max_hypernodes == 8 and not warnings


def test_new_with_valid_arguments() -> None:
    """network_topology_aware_test.go:70 "build plugin with customized valid arguments": a
    weight given for a resource not listed is not read (listed ones default to 1)."""
    args, warnings = parse_args(
        NetworkTopologyAwareArgs,
        {
            "weight": 2,
            "hypernode.binpack.cpu": 3,
            "hypernode.binpack.memory": 4,
            "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpuxxx": 5,
            "hypernode.binpack.resources.example.com/foo": 6,
            "hypernode.binpack.normal-pod.enable": False,
            "hypernode.binpack.normal-pod.fading": 0,
        },
    )
    assert args.weight == 2
    assert args.weights == {"nvidia.com/gpu": 1, "example.com/foo": 6, "cpu": 3, "memory": 4}
    assert not args.normal_pod_enable and args.normal_pod_fading == 0
    assert any("gpuxxx" in w and "not listed" in w for w in warnings)


def test_new_with_invalid_arguments() -> None:
    """network_topology_aware_test.go:99 "build plugin with customized invalid arguments":
    negative weights and fading fall back to the defaults, an unreadable bool keeps true."""
    args, warnings = parse_args(
        NetworkTopologyAwareArgs,
        {
            "weight": -1,
            "hypernode.binpack.cpu": -1,
            "hypernode.binpack.memory": -1,
            "hypernode.binpack.resources": "nvidia.com/gpuxxx, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpu": -1,
            "hypernode.binpack.resources.example.com/foo": -1,
            "hypernode.binpack.normal-pod.enable": "a",
            "hypernode.binpack.normal-pod.fading": -1,
        },
    )
    assert args.weight == 1
    assert args.weights == {"nvidia.com/gpuxxx": 1, "example.com/foo": 1, "cpu": 1, "memory": 1}
    assert args.normal_pod_enable and args.normal_pod_fading == 0.8
    assert len(warnings) >= 6  # every replaced value is named


def test_reverse_and_cap_eviction_gradients() -> None:
    """network_topology_aware_test.go:154 TestReverseAndCapEvictionGradients: widest first,
    at most max-hypernodes in all, the last ones of a gradient kept."""
    args, _ = parse_args(NetworkTopologyAwareArgs, {"hypernode.gradient.evict.max-hypernodes": 3})
    plugin = NetworkTopologyAware(args)
    assert plugin._widest_first([["a", "b"], ["c", "d"]]) == [["c", "d"], ["b"]]


# -- TestBatchNodeOrderFn (pods without a constraint) ----------------------------------------


def _normal_pod_objects(*, foo: bool = False, running: bool = False) -> list[Obj]:
    extra = {"example.com/foo": "8"} if foo else None
    pods = [make_pod("p1", cpu="2", memory="4G", group="pg1", limits=extra and {**extra})]
    if running:
        pods += [
            make_pod(
                f"p{i}",
                cpu="2",
                memory="4G",
                group="pg1",
                node=f"s3-n{i - 1}",
                limits=extra and {**extra},
            )
            for i in (2, 3)
        ]
    for pod in pods:
        if foo:
            pod["spec"]["containers"][0]["resources"]["requests"]["example.com/foo"] = "8"
    return [
        *shaped_nodes(foo),
        *three_tier(),
        make_podgroup("pg1", queue="q1", phase="Inqueue"),
        *pods,
    ]


CUSTOM = {
    "weight": 10,
    "hypernode.binpack.cpu": 1,
    "hypernode.binpack.memory": 4,
    "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
    "hypernode.binpack.resources.nvidia.com/gpu": 2,
    "hypernode.binpack.resources.example.com/foo": 3,
    "hypernode.binpack.normal-pod.enable": True,
    "hypernode.binpack.normal-pod.fading": 0,
}


def test_normal_pod_scores_off() -> None:
    """network_topology_aware_test.go:2040: with normal-pod binpacking off, no node scores."""
    session = open_session(_normal_pod_objects(), {"hypernode.binpack.normal-pod.enable": False})
    assert set(node_scores(session, "p1").values()) == {0.0}


def test_normal_pod_scores_default_arguments() -> None:
    """network_topology_aware_test.go:2170: tier-weighted (0.8^(tier-1)) HyperNode binpack,
    the cluster-top tier included."""
    session = open_session(_normal_pod_objects())
    assert node_scores(session, "p1") == pytest.approx(
        {
            "s3-n1": 25.8,
            "s3-n2": 25.8,
            "s4-n1": 21.6,
            "s4-n2": 21.6,
            "s5-n1": 19.9,
            "s5-n2": 19.9,
            "s6-n1": 15.7,
            "s6-n2": 15.7,
        },
        abs=EPS,
    )


def test_normal_pod_scores_custom_arguments() -> None:
    """network_topology_aware_test.go:2308: fading 0 keeps tier 1 only; weights per resource."""
    session = open_session(_normal_pod_objects(foo=True), CUSTOM)
    assert node_scores(session, "p1") == pytest.approx(
        {
            "s3-n1": 500.0,
            "s3-n2": 500.0,
            "s4-n1": 468.8,
            "s4-n2": 468.8,
            "s5-n1": 281.3,
            "s5-n2": 281.3,
            "s6-n1": 250.0,
            "s6-n2": 250.0,
        },
        abs=EPS,
    )


def test_normal_pod_scores_non_empty_nodes() -> None:
    """network_topology_aware_test.go:2455: a HyperNode the pod would overflow scores 0."""
    session = open_session(_normal_pod_objects(foo=True, running=True), CUSTOM)
    scores = node_scores(session, "p1")
    assert scores["s3-n1"] == scores["s3-n2"] == 0.0
    assert [scores["s4-n1"], scores["s5-n1"], scores["s6-n1"]] == pytest.approx(
        [468.8, 281.3, 250.0], abs=EPS
    )


# -- TestHyperNodeOrderFn --------------------------------------------------------------------


def test_hypernode_scores_default_arguments() -> None:
    """network_topology_aware_test.go:2796 (the job's two 4-cpu pods; Lahar scores the job's
    tasks, which here are the sub-group's): the binpack of the job's requests per HyperNode,
    0 where they overflow."""
    objs = [
        *shaped_nodes(),
        *three_tier(),
        make_podgroup(
            "pg1",
            queue="q1",
            min_member=2,
            phase="Inqueue",
            network_topology={"mode": "hard", "highestTierAllowed": 2},
        ),
    ]
    objs += [make_pod(f"p{i}", cpu="4", memory="4G", group="pg1") for i in (1, 2)]
    session = open_session(objs)
    job = next(iter(session.jobs.values()))
    names = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", CLUSTER_TOP]
    scores = {k: round(v, 1) for k, v in plugin_of(session).score_hypernodes(job, names).items()}
    assert scores == {
        "s0": 25.0,
        "s1": 58.3,
        "s2": 45.8,
        "s3": 0.0,
        "s4": 100.0,
        "s5": 0.0,
        "s6": 75.0,
        CLUSTER_TOP: 25.0,
    }


# -- TestHyperNodeGradientPreFiltering -------------------------------------------------------

G = 1024**3


@pytest.mark.parametrize(
    ("line", "purpose", "minimum", "idle", "future", "selected"),
    [
        (3431, "allocate", (20, 40), (30, 60), (35, 70), True),
        (3450, "allocate", (20, 40), (30, 60), (15, 30), True),
        (3469, "allocate", (20, 40), (15, 30), (35, 70), True),
        (3488, "allocate", (20, 40), (15, 30), (15, 30), False),
        (3584, "evict", (20, 40), (15, 30), (15, 30), True),
        (3603, "evict", (50, 100), (15, 30), (15, 30), False),
    ],
    ids=[
        "idle-and-future",
        "idle-only",
        "future-only",
        "neither",
        "evict-allocatable",
        "evict-too-small",
    ],
)
def test_gradient_pre_filtering(
    line: int,
    purpose: str,
    minimum: tuple[int, int],
    idle: tuple[int, int],
    future: tuple[int, int],
    selected: bool,
) -> None:
    """network_topology_aware_test.go (line in the id's case, TestHyperNodeGradientPreFiltering):
    100 tier-1 HyperNodes of 10 nodes (4 cpu, 8Gi) under one tier-2 HyperNode; the first
    tier-1 HyperNode's idle and future idle are set; it is a candidate when the job's
    minResources fit either (for eviction: its allocatable)."""
    nodes = [make_node(f"node-{i}", cpu="4", memory="8Gi") for i in range(1000)]
    hypernodes = [
        make_hypernode(f"hn-1-{i}", tier=1, nodes=[f"node-{i * 10 + j}" for j in range(10)])
        for i in range(100)
    ]
    hypernodes.append(
        make_hypernode("hn-2-0", tier=2, hypernodes=[f"hn-1-{i}" for i in range(100)])
    )
    group = make_podgroup(
        "pg1",
        queue="q1",
        phase="Inqueue",
        min_resources={"cpu": str(minimum[0]), "memory": f"{minimum[1]}Gi"},
        network_topology={"mode": "hard", "highestTierAllowed": 2},
    )
    # Volcano's test builds the plugin with no eviction cap; here the cap is above the count.
    session = open_session(
        [*nodes, *hypernodes, group, make_pod("p1", group="pg1")],
        {"hypernode.gradient.evict.max-hypernodes": 1000},
    )
    plugin = plugin_of(session)
    row = plugin._index["hn-1-0"]
    plugin._idle[row] = session.table.vector(Resource(idle[0] * 1000.0, idle[1] * G))
    plugin._future[row] = session.table.vector(Resource(future[0] * 1000.0, future[1] * G))
    job = next(iter(session.jobs.values()))
    gradients = plugin.hypernode_gradients(job, "hn-2-0", purpose)
    found = any("hn-1-0" in gradient for gradient in gradients)
    assert found is selected, line
    tiers = [session.hypernodes.tier(g[0]) for g in gradients if g]
    assert tiers == sorted(tiers, reverse=purpose == "evict")


# -- TestNetworkTopologyAwareNodeScore_Hard --------------------------------------------------


def _two_level(*, s0_members: tuple[str, ...] = ("s1", "s2")) -> list[Obj]:
    objs = [make_hypernode(f"s{i}", tier=1, nodes=[f"s{i}-n1", f"s{i}-n2"]) for i in (3, 4, 5, 6)]
    return [
        *objs,
        make_hypernode("s1", tier=2, hypernodes=["s3", "s4"]),
        make_hypernode("s2", tier=2, hypernodes=["s5", "s6"]),
        make_hypernode("s0", tier=3, hypernodes=list(s0_members)),
    ]


def _flat(*, top: bool) -> list[Obj]:
    objs = [make_hypernode(f"s{i}", tier=1, nodes=[f"s{i}-n1", f"s{i}-n2"]) for i in (1, 2)]
    return [*objs, make_hypernode("s0", tier=2, hypernodes=["s1", "s2"])] if top else objs


@pytest.mark.parametrize(
    ("line", "hypernodes", "allocated", "running", "weight", "expected"),
    [
        (181, _two_level(), "", [], 1, {"s3-n1": 0.0, "s4-n1": 0.0, "s5-n1": 0.0}),
        (
            324,
            _two_level(s0_members=("s1",)),
            "s3",
            ["s3-n1", "s3-n2"],
            1,
            {"s5-n1": 0.0, "s6-n1": 0.0},
        ),
        (
            460,
            _two_level(),
            "s3",
            ["s3-n1", "s3-n2"],
            1,
            {"s3-n1": 100.0, "s4-n1": 66.6, "s5-n1": 33.3},
        ),
        (605, _flat(top=True), "s1", ["s1-n1"], 1, {"s1-n1": 100.0, "s2-n1": 50.0}),
        (688, _flat(top=False), "s1", ["s1-n1"], 1, {"s1-n1": 100.0, "s2-n1": 0.0}),
        (
            758,
            _two_level(),
            "s3",
            ["s3-n1", "s3-n2"],
            2,
            {"s3-n1": 200.0, "s4-n1": 133.3, "s5-n1": 66.6},
        ),
        (
            903,
            _two_level(),
            "s1",
            ["s3-n1", "s3-n2", "s4-n1"],
            1,
            {"s3-n1": 116.6, "s4-n1": 91.6, "s5-n1": 33.3},
        ),
    ],
    ids=[
        "first-scheduling",
        "empty-lca",
        "lca-tier",
        "two-tiers",
        "one-tier",
        "weight-2",
        "task-number",
    ],
)
@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_node_score(
    mode: str,
    line: int,
    hypernodes: list[Obj],
    allocated: str,
    running: list[str],
    weight: int,
    expected: dict[str, float],
) -> None:
    """network_topology_aware_test.go TestNetworkTopologyAwareNodeScore_Hard (case line in
    the id) and TestNetworkTopologyAwareNodeScore_Soft (the same case 921 lines further): a
    constrained job's pending pod scored on the given nodes, the job spanning ``allocated`` so
    far (Volcano's ``task.JobAllocatedHyperNode``)."""
    names = sorted(
        {
            m["selector"]["exactMatch"]["name"]
            for h in hypernodes
            for m in h["spec"]["members"]
            if m["type"] == "Node"
        }
    )
    objs: list[Obj] = [make_node(n, cpu="2", memory="4Gi", pods="10") for n in names]
    objs += hypernodes
    objs.append(
        make_podgroup(
            "pg1",
            queue="q1",
            phase="Inqueue",
            network_topology={"mode": mode, "highestTierAllowed": 0},
        )
    )
    objs += [
        make_pod(f"p{i}", cpu="2", memory="4G", group="pg1", node=node)
        for i, node in enumerate(running, start=1)
    ]
    objs.append(make_pod("pending", cpu="2", memory="4G", group="pg1"))
    session = open_session(objs, {"weight": weight})
    job = next(iter(session.jobs.values()))
    session.hypernodes.trying[job.uid] = allocated
    task = next(t for t in job.tasks.values() if t.name == "pending")
    rows = np.array([session.table.index[n] for n in expected], dtype=np.intp)
    scores = plugin_of(session).score_nodes(task, session.table, rows)
    assert dict(zip(expected, scores.tolist(), strict=True)) == pytest.approx(expected, abs=EPS)
