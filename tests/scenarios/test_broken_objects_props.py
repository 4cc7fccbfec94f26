"""No broken object changes what happens to the others.

A small valid cluster (nodes, a queue tree under the capacity plugin with ``enableHierarchy``,
PodGroups in its leaf queues, pods) is scheduled alone and again with broken objects mixed in:
queues whose ``spec.parent`` forms a cycle or names a queue that does not exist (with child
queues and jobs of their own), PodGroups of queues that do not exist, Koordinator ``Device``
objects of nodes that do not exist, and pods of PodGroups that cannot be read or were deleted.
With the same seed, every valid pod lands where it landed alone; no pod of a broken object is
placed, and each of them is told why, naming what is broken.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import SimCluster
from scheduler.cluster.simulation import build_simulation
from scheduler.conf import parse_conf
from tests.builders import Obj, make_node, make_pod, make_podgroup, make_queue

ROOT = Path(__file__).resolve().parents[2]
CONF = parse_conf(
    (ROOT / "conf" / "capacity-hierarchy.conf").read_text()
    .replace(", reclaim", "")
    + "  - name: deviceshare\n"
      "    arguments: {deviceshare.FineGrainedDeviceEnable: true}\n")
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BROKEN_KINDS = ("self-cycle", "cycle", "missing-parent", "missing-queue", "device",
                "bad-podgroup", "deleted-podgroup")


def _queue(name: str, *, parent: str | None = None, **spec: Any) -> Obj:
    queue = make_queue(name)
    queue["spec"].update(spec)
    if parent is not None:
        queue["spec"]["parent"] = parent
    return queue


def _job(name: str, *, queue: str, size: int, min_member: int, cpu: str,
         min_resources: bool = False) -> list[Obj]:
    group = make_podgroup(name, queue=queue, min_member=min_member,
                          min_resources={"cpu": str(int(cpu) * min_member)}
                          if min_resources else None)
    return [group, *(make_pod(f"{name}-{i}", group=name, cpu=cpu) for i in range(size))]


@st.composite
def valid_clusters(draw: st.DrawFn) -> list[Obj]:
    objs: list[Obj] = [make_node(f"n{i}", cpu=draw(st.sampled_from(["2", "4", "8"])),
                                 memory="64Gi") for i in range(draw(st.integers(1, 3)))]
    names = ["qa", "qb", "qc", "qd"][:draw(st.integers(0, 4))]
    parents: dict[str, str | None] = {}
    for i, name in enumerate(names):
        parents[name] = draw(st.sampled_from([None, *names[:i]]))
        spec: dict[str, Any] = {}
        if draw(st.booleans()):
            spec["capability"] = {"cpu": str(draw(st.integers(1, 8)))}
        if draw(st.booleans()):
            spec["deserved"] = {"cpu": str(draw(st.integers(1, 4)))}
        objs.append(_queue(name, parent=parents[name], **spec))
    leaves = ["default", *(n for n in names if n not in parents.values())]
    for j in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 3))
        objs += _job(f"job{j}", queue=draw(st.sampled_from(leaves)), size=size,
                     min_member=draw(st.integers(1, size)),
                     cpu=draw(st.sampled_from(["1", "2"])), min_resources=draw(st.booleans()))
    return objs


def _device(node: str) -> Obj:
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
            "metadata": {"name": node},
            "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True,
                                  "resources": {"koordinator.sh/gpu-core": "100"}}]}}


def _broken_jobs(prefix: str, queue: str, draw: st.DrawFn) -> list[Obj]:
    size = draw(st.integers(1, 2))
    return _job(prefix, queue=queue, size=size, min_member=size, cpu="1",
                min_resources=draw(st.booleans()))


@st.composite
def broken_objects(draw: st.DrawFn) -> tuple[list[Obj], list[Obj], list[Obj], dict[str, str]]:
    """``(loaded, unreadable PodGroups, PodGroups to delete, broken pod → what its reason
    names)``; every name starts with ``x``."""
    loaded: list[Obj] = []
    unreadable: list[Obj] = []
    deleted: list[Obj] = []
    named: dict[str, str] = {}

    def jobs(prefix: str, queue: str, must_name: str) -> None:
        objs = _broken_jobs(prefix, queue, draw)
        loaded.extend(objs)
        named.update({o["metadata"]["name"]: must_name for o in objs if o["kind"] == "Pod"})

    kinds = draw(st.lists(st.sampled_from(BROKEN_KINDS), min_size=1, max_size=4, unique=True))
    for kind in kinds:
        if kind == "self-cycle":
            loaded.append(_queue("xself", parent="xself", deserved={"cpu": "1"}))
            jobs("xselfjob", "xself", "(xself -> xself)")
        elif kind == "cycle":
            loaded += [_queue("xa", parent="xb"), _queue("xb", parent="xa"),
                       _queue("xchild", parent="xa", capability={"cpu": "1"})]
            jobs("xchildjob", "xchild", "(xa -> xb -> xa)")
            jobs("xbjob", "xb", "(xb -> xa -> xb)")
        elif kind == "missing-parent":
            loaded += [_queue("xlost", parent="xnowhere"), _queue("xbelow", parent="xlost")]
            jobs("xlostjob", "xlost", "'xnowhere', which does not exist")
            jobs("xbelowjob", "xbelow", "'xnowhere', which does not exist")
        elif kind == "missing-queue":
            jobs("xghostjob", "xghost", "queue xghost of PodGroup default/xghostjob")
        elif kind == "device":
            loaded.append(_device("xgone"))
        elif kind == "bad-podgroup":
            group, *pods = _broken_jobs("xbad", "default", draw)
            group["spec"]["minMember" if draw(st.booleans()) else "minResources"] = \
                draw(st.sampled_from([-3, {"cpu": "-1"}]))
            unreadable.append(group)
            loaded += pods
            named.update({p["metadata"]["name"]: "PodGroup default/xbad" for p in pods})
        else:
            group, *pods = _broken_jobs("xdel", "default", draw)
            deleted.append(group)
            loaded += [group, *pods]
            named.update({p["metadata"]["name"]: "PodGroup default/xdel" for p in pods})
    return loaded, unreadable, deleted, named


def _run(objs: list[Obj], *, seed: int, unreadable: Sequence[Obj] = (),
         deleted: Sequence[Obj] = ()) -> SimCluster:
    """Schedule to quiescence as ``lahar simulate`` does; ``unreadable`` PodGroups reach only
    the cache (the manifest loader refuses them) and ``deleted`` ones are deleted before the
    first cycle."""
    manifests = [Manifest(f"test#{i}", obj) for i, obj in enumerate(objs)]
    cluster, cache, scheduler = build_simulation(manifests, conf=CONF, seed=seed)
    for group in unreadable:
        cache.apply("ADDED", "PodGroup", group)
    for group in deleted:
        key = f"default/{group['metadata']['name']}"
        cache.apply("DELETED", "PodGroup", cluster.objects["PodGroup"].pop(key))
    cluster.take_changes()
    _cycles(cluster, cache, scheduler)
    return cluster


def _cycles(cluster: SimCluster, cache: SchedulerCache, scheduler: Any) -> None:
    for _ in range(20):
        scheduler.run_once()
        cache.flush()
        cluster.clock.advance(1.0)
        if cluster.take_changes() == 0:
            return


def _placements(cluster: SimCluster) -> dict[str, str]:
    return {pod["metadata"]["name"]: pod["spec"].get("nodeName", "")
            for pod in cluster.objects["Pod"].values()}


def _reason(cluster: SimCluster, pod: str) -> str:
    status = cluster.objects["Pod"][f"default/{pod}"].get("status") or {}
    return next((str(c.get("message")) for c in status.get("conditions") or []
                 if c["type"] == "PodScheduled" and c["status"] == "False"), "")


@SETTINGS
@given(valid=valid_clusters(), broken=broken_objects(), seed=st.integers(0, 2**16))
def test_broken_objects_change_nothing_for_the_valid_ones(
        valid: list[Obj], broken: tuple[list[Obj], list[Obj], list[Obj], dict[str, str]],
        seed: int) -> None:
    loaded, unreadable, deleted, named = broken
    alone = _placements(_run(valid, seed=seed))
    mixed_cluster = _run([*valid, *loaded], seed=seed, unreadable=unreadable, deleted=deleted)
    mixed = _placements(mixed_cluster)
    assert {name: node for name, node in mixed.items() if not name.startswith("x")} == alone
    for pod, must_name in named.items():
        assert mixed[pod] == "", f"{pod} of a broken object was placed"
        assert must_name in _reason(mixed_cluster, pod), (pod, _reason(mixed_cluster, pod))
