"""Plain device pods are admitted: per-device names stay out of ``minResources`` admission.

Volcano's podgroup controller writes a plain pod's whole requests as its PodGroup's
``minResources`` (``pkg/controllers/podgroup/pg_controller_handler.go``
``createNormalPodPGIfNotExist`` with ``pkg/controllers/util/util.go`` ``CalTaskRequests``),
device amounts included. Its scheduler reads them through ``NewResource``
(``pkg/scheduler/api/resource_info.go``), which leaves out every name of
``IgnoredDevicesList`` (``pkg/scheduler/api/shared_device_pool.go``, filled by
``NodeInfo.setNodeOthersResource`` from each family's ``GetIgnoredDevices``), for nodes, pods,
``JobInfo.GetMinResources`` (``job_info.go``) and queue quantities alike; the inqueue
reservation of ``pkg/scheduler/plugins/util/util.go`` ``GetInqueueResource`` skips them too.
A name no node total carries (``nvidia.com/gpumem``, ``volcano.sh/vgpu-memory``,
``koordinator.sh/gpu.shared``, …) therefore never makes ``overcommit`` or ``proportion``
reject a job; the device family accounts it on the card instead.

Each family is tried on ``lahar run``'s cache, which schedules a plain pod at once under the
PodGroup it implies (``minResources`` as Volcano's controller writes it), and in ``lahar
simulate`` with a PodGroup whose ``minResources`` carries the device amounts. (The embedded
cluster's own controller writes no ``minResources`` for plain pods, so a plain pod there never
met the check.) GPU share and GPU number pass either way: their names are node totals (the
device plugin's capacity), as in Volcano, where ``GetIgnoredDevices`` of ``gpushare`` is
empty.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.api.types import QueueID
from scheduler.cache.cache import SchedulerCache
from scheduler.deviceconf import device_support
from scheduler.loop import Scheduler
from tests.builders import conf_of, make_node, make_pod, make_podgroup, make_queue, simulate
from tests.devices.conftest import card, gpushare_conf, vgpu_conf, vgpu_node
from tests.devices.finegrained_helpers import device_object, fg_node, finegrained_conf, gpu

Obj = dict[str, Any]


def _hami_node(name: str) -> Obj:
    devices = [{"id": "GPU-h0", "index": 0, "count": 10, "devmem": 24000, "devcore": 100,
                "type": "NVIDIA-L4", "health": True, "mode": "hami-core"}]
    return make_node(name, cpu="32", memory="128Gi", extra={"nvidia.com/gpu": "10"},
                     annotations={"hami.io/node-nvidia-register": json.dumps(devices)})


def _gpu_node(name: str) -> Obj:
    return make_node(name, cpu="32", memory="128Gi", extra={
        "volcano.sh/gpu-memory": "32000", "volcano.sh/gpu-number": "2"})


@dataclass(frozen=True)
class Family:
    conf: str
    cluster: Callable[[], list[Obj]]
    limits: dict[str, str]


FAMILIES = {
    "gpu-share": Family(gpushare_conf(), lambda: [_gpu_node("n1")],
                        {"volcano.sh/gpu-memory": "10000"}),
    "gpu-number": Family(gpushare_conf(number=True), lambda: [_gpu_node("n1")],
                         {"volcano.sh/gpu-number": "1"}),
    "vgpu-volcano": Family(
        vgpu_conf(), lambda: [vgpu_node("n1", [card("GPU-0", memory=16000)])],
        {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000",
         "volcano.sh/vgpu-cores": "20"}),
    "vgpu-volcano-percentage": Family(
        vgpu_conf(), lambda: [vgpu_node("n1", [card("GPU-0", memory=16000)])],
        {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory-percentage": "50"}),
    "vgpu-hami": Family(
        vgpu_conf(profile="hami"), lambda: [_hami_node("n1")],
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"}),
    "vgpu-hami-percentage": Family(
        vgpu_conf(profile="hami"), lambda: [_hami_node("n1")],
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25"}),
    "fine-grained": Family(
        finegrained_conf(),
        lambda: [fg_node("n1", gpus=4), device_object("n1", [gpu(i) for i in range(4)])],
        {"koordinator.sh/gpu.shared": "2", "koordinator.sh/gpu-core": "100",
         "koordinator.sh/gpu-memory-ratio": "100"}),
    "fine-grained-deprecated": Family(
        finegrained_conf(),
        lambda: [fg_node("n1", gpus=4), device_object("n1", [gpu(i) for i in range(4)])],
        {"kubernetes.io/gpu-core": "50", "kubernetes.io/gpu-memory-ratio": "50"}),
}


def _plain(name: str, limits: dict[str, str]) -> Obj:
    pod = make_pod(name, limits=limits)
    pod["metadata"]["annotations"].pop("scheduling.k8s.io/group-name", None)
    return pod


class _Binds:
    """A cluster writer that records binds and takes every other write."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}

    def bind(self, *, namespace: str, name: str, uid: str, node: str,
             annotations: dict[str, str]) -> None:
        self.bound[name] = node

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES.keys())
def test_lahar_run_binds_a_plain_device_pod_under_its_implied_podgroup(family: Family) -> None:
    """``lahar run``'s cache schedules a plain pod at once under the PodGroup it implies
    (``minResources`` = the pod's requests, device names included): the job is admitted and
    the pod bound in the first cycle."""
    conf = conf_of(family.conf)
    writer = _Binds()
    cache = SchedulerCache(writer=writer, clock=time.time, implied_groups=True,
                           **device_support(conf).cache_options())
    cache.apply("ADDED", "Queue", make_queue("default"))
    for obj in family.cluster():
        cache.apply("ADDED", obj["kind"], obj)
    pod = _plain("p", family.limits)
    pod["metadata"]["uid"] = "uid-p"
    cache.apply("ADDED", "Pod", pod)
    Scheduler(cache=cache, conf=conf).run_once()
    cache.flush()
    assert writer.bound == {"p": "n1"}


@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES.keys())
def test_a_podgroup_with_device_min_resources_is_admitted(family: Family) -> None:
    """A PodGroup whose ``minResources`` names device amounts, as Volcano's controller writes
    for a Deployment's pods (``CalTaskRequests`` × replicas): ``GetMinResources`` leaves the
    ignored names out, so the gang of two is admitted and placed."""
    minimum = {"cpu": "2", **{name: str(2 * int(value)) for name, value in family.limits.items()}}
    pods = [make_pod(f"p{i}", group="pg", limits=family.limits) for i in range(2)]
    run = simulate([*family.cluster(), make_podgroup("pg", min_member=2, min_resources=minimum),
                    *pods], conf=family.conf)
    assert [name for name in ("p0", "p1") if run.node_of(name)] == ["p0", "p1"]
    assert run.cluster.objects["PodGroup"]["default/pg"]["status"]["phase"] == "Running"


def test_queue_capability_leaves_ignored_names_out() -> None:
    """A Queue's quantities are read through ``NewResource`` too: a capability naming a
    per-device amount neither caps nor admits on it."""
    conf = conf_of(vgpu_conf(profile="hami"))
    cache = SchedulerCache(writer=_Binds(), clock=time.time,
                           **device_support(conf).cache_options())
    queue = make_queue("q", capability={"cpu": "8", "nvidia.com/gpumem": "1"})
    cache.apply("ADDED", "Queue", queue)
    capability = cache.queues[QueueID("q")].capability
    assert capability is not None
    assert capability.get("nvidia.com/gpumem") == 0 and capability.milli_cpu == 8000
