"""Invariants of the fine-grained ledger under any sequence of allocate / rollback / evict.

* no device is ever booked beyond what it has, in core, ratio or bytes (the byte check closes
  the rounding hole of Koordinator's ``fillGPUTotalMem``);
* rebuilding the ledger from the surviving pods' annotations (what a restart does, as
  Koordinator's ``nodeDeviceCache`` rebuild from ``device-allocated``) gives the same ledger.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.devices.base import DeviceConfig, DeviceError, Reporter
from scheduler.api.devices.finegrained.devices import FineGrainedDevices
from scheduler.api.devices.finegrained.family import FineGrainedFamily
from scheduler.api.node import node_from_object
from scheduler.api.task import TaskInfo, task_from_pod
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
)
steps = st.lists(st.tuples(st.sampled_from(["allocate", "allocate", "rollback", "evict"]),
                           requests), min_size=1, max_size=25)


def _family() -> FineGrainedFamily:
    return FineGrainedFamily(DeviceConfig(finegrained=True), Reporter())


def _device_obj() -> dict[str, Any]:
    return device_object("n1", [*(gpu(m, memory=MEMORIES[m % 3], pcie=f"p{m // 2}")
                                  for m in range(4)), nic(0), nic(1, pcie="p1")])


def _fresh(family: FineGrainedFamily) -> FineGrainedDevices:
    return family.build(node_from_object(fg_node("n1", gpus=4)), _device_obj())


def _check_not_overbooked(devices: FineGrainedDevices) -> None:
    ledger = devices.ledger
    assert ledger is not None
    for (kind, minor), used in ledger.used.items():
        total = ledger.devices[(kind, minor)].total
        for name, value in used.items():
            assert value <= total.get(name, 0), (kind, minor, name, value, total)


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
