"""Inputs that must not abort a topology run: the tier weights of
``hypernode.binpack.normal-pod.fading`` and HyperNode member selectors."""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from plugins import network_topology_aware
from tests.builders import make_hypernode, make_node, make_pod, make_podgroup, make_queue, simulate

Obj = dict[str, Any]

FADING_ZERO = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - {name: gang}
  - {name: predicates}
  - {name: network-topology-aware, arguments: {hypernode.binpack.normal-pod.fading: 0}}
"""


def test_fading_zero_with_a_tier_0_hypernode_warns_and_places() -> None:
    """network_topology_aware.go:486-513 (batchNodeOrderFnForNormalPods): the weight of tier t
    is ``math.Pow(fading, t-1)``; with fading 0 and a tier-0 HyperNode it is +Inf and Volcano's
    scores turn NaN. Python's ``0.0 ** -1`` raised ZeroDivisionError and aborted the run;
    Lahar warns once, naming the argument, and scores normal pods without HyperNode binpack."""
    network_topology_aware._WARNED.clear()
    objs: list[Obj] = [
        make_queue("q1"),
        make_node("n1", cpu="4", memory="8Gi"),
        make_node("n2", cpu="4", memory="8Gi"),
        make_hypernode("h0", tier=0, nodes=["n1"]),
        make_hypernode("h1", tier=1, nodes=["n2"]),
        make_podgroup("pg1", min_member=1),
        make_pod("p1", cpu="1", group="pg1"),
    ]
    with capture_logs() as logs:
        run = simulate(objs, conf=FADING_ZERO, max_cycles=2)
    assert run.node_of("p1") in {"n1", "n2"}
    warned = [e for e in logs if "normal-pod.fading" in e["event"]]
    assert len(warned) == 1 and warned[0]["log_level"] == "warning"


def test_fading_zero_from_tier_1_is_volcanos_tier_1_only_binpack() -> None:
    """network_topology_aware.go:231 and :489: fading 0 with tiers from 1 weighs tier 1 alone
    (``math.Pow(0, 0) = 1``), no warning: the pod goes to the fuller tier-1 HyperNode."""
    network_topology_aware._WARNED.clear()
    objs: list[Obj] = [
        make_queue("q1"),
        make_node("n1", cpu="4", memory="8Gi"),
        make_node("n2", cpu="4", memory="8Gi"),
        make_hypernode("h1", tier=1, nodes=["n1"]),
        make_hypernode("h2", tier=1, nodes=["n2"]),
        make_hypernode("top", tier=2, hypernodes=["h1", "h2"]),
        make_pod("busy", cpu="2", node="n2"),
        make_podgroup("pg1", min_member=1),
        make_pod("p1", cpu="1", group="pg1"),
    ]
    with capture_logs() as logs:
        run = simulate(objs, conf=FADING_ZERO, max_cycles=2)
    assert run.node_of("p1") == "n2"
    assert not [e for e in logs if "normal-pod.fading" in e["event"]]
