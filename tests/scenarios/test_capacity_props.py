"""Invariants of the capacity plugin over random clusters and queue trees.

Flat: no queue ever holds more cpu than its real capability — its capability, capped by the
cluster less the other queues' guarantees (``buildQueueAttrs``). Hierarchical: no queue holds
more than its capability counting its whole subtree, no job runs in a queue with children,
nothing runs at all when a job sits in a queue with children (``buildHierarchicalQueueAttrs``),
and a queue whose parent does not exist holds nothing while the rest keeps its bounds.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.resource import parse_quantity
from tests.builders import make_node, make_pod, make_podgroup, make_queue, simulate
from tests.scenarios.test_capacity_guide import conf_text

Obj = dict[str, Any]
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _queue(name: str, spec: dict[str, Any]) -> Obj:
    obj = make_queue(name)
    obj["spec"].update(spec)
    return obj


def _cpu(value: Any) -> float:
    return float(parse_quantity(value))


@st.composite
def flat_clusters(draw: st.DrawFn) -> list[Obj]:
    objs: list[Obj] = [make_node(f"n{i}", cpu=draw(st.sampled_from(["2", "4", "8"])),
                                 memory="64Gi") for i in range(draw(st.integers(1, 3)))]
    for name in ("qa", "qb", "qc"):
        spec: dict[str, Any] = {}
        for key in ("deserved", "capability"):
            if draw(st.booleans()):
                spec[key] = {"cpu": str(draw(st.integers(1, 8)))}
        if draw(st.booleans()):
            spec["guarantee"] = {"resource": {"cpu": str(draw(st.integers(1, 3)))}}
        objs.append(_queue(name, spec))
        for j in range(draw(st.integers(0, 3))):
            size = draw(st.integers(1, 4))
            group = f"{name}-g{j}"
            objs.append(make_podgroup(group, min_member=draw(st.integers(1, size)), queue=name))
            objs += [make_pod(f"{group}-{t}", group=group, cpu=draw(st.sampled_from(["1", "2"])))
                     for t in range(size)]
    return objs


def _held(run: Any, objs: list[Obj]) -> dict[str, float]:
    queue_of = {g["metadata"]["name"]: g["spec"]["queue"] for g in objs if g["kind"] == "PodGroup"}
    held: dict[str, float] = defaultdict(float)
    for pod in run.cluster.objects.get("Pod", {}).values():
        if pod["spec"].get("nodeName"):
            group = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            held[queue_of[group]] += _cpu(pod["spec"]["containers"][0]["resources"]["requests"]
                                          ["cpu"])
    return held


@SETTINGS
@given(flat_clusters())
def test_no_queue_holds_more_than_its_real_capability(objs: list[Obj]) -> None:
    run = simulate(objs, conf=conf_text("guide"), max_cycles=10)
    total = sum(_cpu(o["status"]["allocatable"]["cpu"]) for o in objs if o["kind"] == "Node")
    queues = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "Queue"}

    def guarantee(spec: dict[str, Any]) -> float:
        return _cpu(spec.get("guarantee", {}).get("resource", {}).get("cpu", 0))

    guarantees = sum(guarantee(spec) for spec in queues.values())
    for name, cpu in _held(run, objs).items():
        spec = queues[name]
        real = max(total - guarantees, 0) + guarantee(spec)
        if "capability" in spec:
            real = min(real, _cpu(spec["capability"]["cpu"]))
        assert cpu <= real, (name, cpu, real)


@st.composite
def trees(draw: st.DrawFn) -> list[Obj]:
    objs: list[Obj] = [make_node(f"n{i}", cpu="4", memory="64Gi") for i in range(2)]
    names = ["a", "b", "c", "d", "e"]
    for i, name in enumerate(names):
        spec: dict[str, Any] = {}
        # parents come from earlier queues only (or a broken name now and then)
        parent = draw(st.sampled_from([None, *names[:i], *(["ghost"] if i == 4 else [])]))
        if parent is not None:
            spec["parent"] = parent
        if draw(st.booleans()):
            spec["capability"] = {"cpu": str(draw(st.integers(1, 6)))}
        if draw(st.booleans()):
            spec["deserved"] = {"cpu": str(draw(st.integers(1, 4)))}
        objs.append(_queue(name, spec))
        for t in range(draw(st.integers(0, 4))):
            objs.append(make_podgroup(f"{name}-{t}", queue=name))
            objs.append(make_pod(f"{name}-{t}-0", group=f"{name}-{t}", cpu="1"))
    return objs


@SETTINGS
@given(trees())
def test_hierarchy_bounds_every_subtree_and_only_leaves_run(objs: list[Obj]) -> None:
    run = simulate(objs, conf=conf_text("hierarchy"), max_cycles=10)
    specs = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "Queue"}
    held = _held(run, objs)
    parent = {name: spec.get("parent", "root") for name, spec in specs.items()}
    queued = {g["spec"]["queue"] for g in objs if g["kind"] == "PodGroup"}
    if any(q in parent.values() for q in queued):
        assert held == {}
        return
    # a queue whose parent does not exist (only "e" may name "ghost") is left out alone
    left_out = {name for name, up in parent.items() if up == "ghost"}
    assert not left_out & set(held)
    specs = {name: spec for name, spec in specs.items() if name not in left_out}
    subtree: dict[str, float] = defaultdict(float)
    for name, cpu in held.items():
        assert name not in parent.values(), f"{name} has children but ran pods"
        node = name
        while node != "root":
            subtree[node] += cpu
            node = parent[node]
    for name, spec in specs.items():
        if "capability" in spec:
            assert subtree[name] <= _cpu(spec["capability"]["cpu"]), name
