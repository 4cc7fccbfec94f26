"""Invariants of the fine-grained ledger under any sequence of allocate / rollback / evict.

* no device is ever booked beyond what it has, in core, ratio or bytes (the byte check closes
  the rounding hole of Koordinator's ``fillGPUTotalMem``);
* rebuilding the ledger from the surviving pods' annotations (what a restart does, as
  Koordinator's ``nodeDeviceCache`` rebuild from ``device-allocated``) gives the same ledger;
* a ``SamePCIe`` joint request is satisfied whenever some GPU set has NICs on all its roots
  (brute force over every subset on small nodes).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.node import node_from_object
from scheduler.api.task import TaskInfo, task_from_pod
from scheduler.devices.base import DeviceConfig, DeviceError, Reporter
from scheduler.devices.finegrained.columns import vector_score
from scheduler.devices.finegrained.devices import FineGrainedDevices
from scheduler.devices.finegrained.family import FineGrainedFamily
from tests.devices.finegrained_helpers import GIB, device_object, fg_node, fg_pod, gpu, nic

CORE, MEM, RATIO = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory", \
    "koordinator.sh/gpu-memory-ratio"
MEMORIES = (16 * GIB, 24 * GIB + 7, 10 * GIB + 12345)

requests = st.one_of(
    st.builds(lambda n: {"nvidia": n}, st.integers(1, 2)),
    st.builds(lambda r, c: {"gpu_memory_ratio": r, "gpu_core": c}, st.integers(1, 100),
              st.integers(1, 100)),
    st.builds(lambda m: {"gpu_memory": m}, st.integers(1, 24 * GIB)),
    st.builds(lambda s, m: {"gpu_shared": s, "gpu_memory": m * s}, st.integers(1, 2),
              st.integers(1, 12 * GIB)),
    st.builds(lambda q: {"rdma": q}, st.sampled_from([1, 30, 50, 100, 200])),
    st.builds(lambda q: {"rdma": q, "annotations": {
        "scheduling.koordinator.sh/device-allocate-hint":
            '{"rdma": {"vfSelector": {}, "allocateStrategy": "RequestsAsCount"}}'}},
        st.integers(1, 2)),
)
steps = st.lists(st.tuples(st.sampled_from(["allocate", "allocate", "rollback", "evict"]),
                           requests), min_size=1, max_size=25)


def _family() -> FineGrainedFamily:
    return FineGrainedFamily(DeviceConfig(finegrained=True), Reporter())


def _device_obj() -> dict[str, Any]:
    return device_object("n1", [*(gpu(m, memory=MEMORIES[m % 3], pcie=f"p{m // 2}")
                                  for m in range(4)), nic(0, vfs=2), nic(1, pcie="p1", vfs=1)])


def _fresh(family: FineGrainedFamily) -> FineGrainedDevices:
    return family.build(node_from_object(fg_node("n1", gpus=4)), _device_obj())


def _check_not_overbooked(devices: FineGrainedDevices) -> None:
    ledger = devices.ledger
    assert ledger is not None
    for (kind, minor), used in ledger.used.items():
        total = ledger.devices[(kind, minor)].total
        for name, value in used.items():
            assert value <= total.get(name, 0), (kind, minor, name, value, total)
    vfs = [bus for allocation in ledger.holders.values() for picks in allocation.values()
           for pick in picks for _, bus in pick.vfs]
    assert len(vfs) == len(set(vfs)), vfs  # no virtual function handed out twice


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_no_overbooking_and_rebuild_from_annotations(sequence: list[tuple[str, Any]]) -> None:
    family = _family()
    devices = _fresh(family)
    live: dict[str, TaskInfo] = {}
    for i, (action, resources) in enumerate(sequence):
        task = task_from_pod(fg_pod(f"p{i}", **resources))
        request = family.parse_request(task)
        assert request is not None
        try:
            annotations = devices.allocate(task, request, now=0.0)
        except DeviceError:
            continue
        task.bind_annotations.update(annotations)
        _check_not_overbooked(devices)
        if action == "rollback":  # a discarded Statement: the ledger forgets the pod
            devices.sub_task(task)
            for key in devices.release(task):
                task.bind_annotations.pop(key, None)
        elif action == "evict" and live:  # an earlier pod leaves the node
            victim = live.pop(sorted(live)[0])
            devices.sub_task(victim)
            live[task.name] = task
        else:
            live[task.name] = task
    rebuilt = _fresh(family)
    for task in live.values():
        rebuilt.add_task(task)
    assert devices.ledger is not None and rebuilt.ledger is not None
    assert devices.ledger.used == rebuilt.ledger.used
    assert devices.ledger.vfs_used == rebuilt.ledger.vfs_used
    _check_not_overbooked(rebuilt)


def test_rollback_returns_every_dimension() -> None:
    family = _family()
    devices = _fresh(family)
    task = task_from_pod(fg_pod("p", gpu_core=30, gpu_memory_ratio=40))
    request = family.parse_request(task)
    assert request is not None
    devices.allocate(task, request, now=0.0)
    assert devices.ledger is not None and devices.ledger.used
    devices.sub_task(task)
    assert devices.ledger.used == {}


@st.composite
def joint_nodes(draw: st.DrawFn) -> tuple[list[Any], set[int], set[int], int]:
    roots = draw(st.integers(1, 4))
    gpus = [gpu(m, numa=(m % roots) % 2, pcie=f"p{m % roots}")
            for m in range(draw(st.integers(1, 6)))]
    nics: list[Any] = []
    for root in range(roots):
        for _ in range(draw(st.integers(0, 2))):
            nics.append(nic(len(nics), numa=root % 2, pcie=f"p{root}"))
    used_gpus = draw(st.sets(st.sampled_from(range(len(gpus)))))
    used_nics = draw(st.sets(st.sampled_from(range(len(nics))))) if nics else set()
    return gpus + nics, used_gpus, used_nics, draw(st.integers(1, 3))


def _holder(name: str, kind: str, minor: int) -> TaskInfo:
    resources = ({CORE: "100", RATIO: "100", MEM: "16Gi"} if kind == "gpu"
                 else {"koordinator.sh/rdma": "100"})
    task = task_from_pod(fg_pod(name, nvidia=1))
    task.bind_annotations["scheduling.koordinator.sh/device-allocated"] = json.dumps(
        {kind: [{"minor": minor, "resources": resources}]})
    return task


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(joint_nodes())
def test_same_pcie_joint_succeeds_whenever_some_combination_exists(
        node: tuple[list[Any], set[int], set[int], int]) -> None:
    """Brute force over every GPU subset: the search must find one exactly when it exists."""
    devices, used_gpus, used_nics, count = node
    family = _family()
    ledger_owner = family.build(node_from_object(fg_node("n1", gpus=6)),
                                device_object("n1", devices))
    for i, minor in enumerate(sorted(used_gpus)):
        ledger_owner.add_task(_holder(f"g{i}", "gpu", minor))
    for i, minor in enumerate(sorted(used_nics)):
        ledger_owner.add_task(_holder(f"r{i}", "rdma", minor))
    free_gpus = [d for d in devices if d["type"] == "gpu" and d["minor"] not in used_gpus]
    nic_roots = {d["topology"]["pcieID"] for d in devices
                 if d["type"] == "rdma" and d["minor"] not in used_nics}
    exists = any(all(g["topology"]["pcieID"] in nic_roots for g in subset)
                 for subset in itertools.combinations(free_gpus, count))
    pod = task_from_pod(fg_pod("p", nvidia=count, rdma=1, annotations={
        "scheduling.koordinator.sh/device-joint-allocate":
            '{"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}'}))
    request = family.parse_request(pod)
    assert request is not None
    fit = ledger_owner.filter_node(pod, request)
    assert (fit.status is None) == exists, fit.status
    if exists:
        result = json.loads(ledger_owner.allocate(pod, request, now=0.0)[
            "scheduling.koordinator.sh/device-allocated"])
        by_minor = {(d["type"], d["minor"]): d["topology"]["pcieID"] for d in devices}
        gpu_roots = {by_minor[("gpu", e["minor"])] for e in result["gpu"]}
        assert {by_minor[("rdma", e["minor"])] for e in result["rdma"]} == gpu_roots


column_requests = st.one_of(
    requests,
    st.builds(lambda n: {"nvidia": n, "rdma": 1, "annotations": {
        "scheduling.koordinator.sh/device-joint-allocate":
            '{"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}'}},
        st.integers(1, 4)),
    st.builds(lambda n, q: {"nvidia": n, "rdma": q, "annotations": {
        "scheduling.koordinator.sh/device-joint-allocate": '{"deviceTypes": ["gpu", "rdma"]}'}},
        st.integers(1, 4), st.sampled_from([1, 100, 200])),
    st.builds(lambda q: {"rdma": q, "annotations": {
        "scheduling.koordinator.sh/device-allocate-hint":
            '{"rdma": {"vfSelector": {}, "allocateStrategy": "RequestsAsCount"}}'}},
        st.integers(1, 3)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(requests, max_size=8), column_requests)
def test_columns_decide_exactly_what_the_device_choice_decides(
        history: list[Any], probe: dict[str, Any]) -> None:
    """When the family says the columns are exact, the vector verdict and score must equal the
    full device choice (``filter_node``) on every node state."""
    family = _family()
    devices = family.build(node_from_object(fg_node("n1", gpus=4)), device_object("n1", [
        *(gpu(m, memory=MEMORIES[m % 3], pcie=f"p{m // 2}", numa=m // 2) for m in range(4)),
        nic(0, pcie="p0", vfs=2), nic(1, pcie="p1", numa=1, vfs=1)]))
    for i, resources in enumerate(history):
        task = task_from_pod(fg_pod(f"h{i}", **resources))
        request = family.parse_request(task)
        assert request is not None
        with contextlib.suppress(DeviceError):
            devices.allocate(task, request, now=0.0)
    resources = dict(probe)
    annotations = resources.pop("annotations", None)
    pod = task_from_pod(fg_pod("probe", annotations=annotations, **resources))
    request = family.parse_request(pod)
    assert request is not None
    columns = {name: np.array([value]) for name, value in
               zip(family.COLUMNS, devices.summary(), strict=True)}
    if family.needs_exact(request, columns):
        return
    fit = devices.filter_node(pod, request)
    assert bool(family.vector_fit(request, columns)[0]) == (fit.status is None), fit.status
    if fit.status is None:
        score = vector_score(request, columns, np.array([0]), family.scoring)[0]
        assert score == fit.score
