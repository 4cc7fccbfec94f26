"""Which rows hold pods whose terms bind later pods, carried from cycle to cycle.

Each cycle's answer of the pod index is checked against a walk over every pod, across pods
bound and deleted between cycles (which an index carried from cycle to cycle must follow).
"""

from __future__ import annotations

from typing import Any

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.framework.close import close_session
from scheduler.framework.podindex import pod_index
from tests.builders import conf_of, make_node, make_pod

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
    arguments: {predicate.PodAffinityEnable: true}
"""
ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}


def _walk(session: Any) -> bool:
    return any(task.spec.terms.carries_terms for node in session.node_list
               for task in node.tasks.values())


def _event(cache: Any, kind: str, pod: dict[str, Any]) -> None:
    pod["metadata"].setdefault("uid", f"uid-{pod['metadata']['name']}")
    cache.apply(kind, "Pod", pod)


def test_carriers_follow_pods_bound_and_deleted_between_cycles() -> None:
    nodes = [make_node(f"n{i}") for i in range(3)]
    _, cache, scheduler = build_simulation(
        [Manifest(f"t#{i}", o) for i, o in enumerate(nodes)], conf=conf_of(CONF))
    seen = []
    carrier = make_pod("carrier", node="n1", affinity=ANTI)
    plain = make_pod("plain", node="n2")
    steps = [lambda: None, lambda: _event(cache, "ADDED", carrier),
             lambda: _event(cache, "ADDED", plain), lambda: None,
             lambda: _event(cache, "DELETED", carrier), lambda: None]
    for step in steps:
        step()
        session = scheduler.open_session()
        seen.append((pod_index(session).carriers_present, _walk(session)))
        scheduler.cursor = session.cursor
        close_session(session)
    assert [present for present, _ in seen] == [walked for _, walked in seen]
    assert [present for present, _ in seen] == [False, True, True, True, False, False]
