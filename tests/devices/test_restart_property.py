"""Restart safety: device usage lives only in bound pods' annotations.

Random sequences of submissions, scheduling cycles, pod deletions, failed binds and scheduler
restarts (a new cache rebuilt from the cluster's objects alone, queued writes lost) must never
over-commit a card: GPU share memory per card, whole cards held by one pod only, vGPU split
slots, memory and cores per card. The check reads the cluster's objects, not the ledgers.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.cache.cache import SchedulerCache
from scheduler.cache.interface import WriteError
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import SimCluster
from scheduler.cluster.simdevices import install_simulated_device_plugin
from scheduler.conf import SchedulerConf, parse_conf
from scheduler.deviceconf import device_support
from scheduler.loop import Scheduler
from tests.devices.conftest import card, deviceshare_conf, gpu_node, gpu_pod, vgpu_node, vgpu_pod

GPU_CARDS, GPU_CARD_MEMORY = 3, 8000
VGPU_CARDS = {"GPU-0": (3, 10000), "GPU-1": (2, 6000)}


@dataclass
class World:
    conf: SchedulerConf
    cluster: SimCluster = field(default_factory=SimCluster)
    fail_next_bind: bool = False
    cache: SchedulerCache | None = None
    scheduler: Scheduler | None = None
    counter: int = 0

    def __post_init__(self) -> None:
        cards = [card(uuid, split=split, memory=memory)
                 for uuid, (split, memory) in VGPU_CARDS.items()]
        self.cluster.load([Manifest("g", gpu_node("g1", cards=GPU_CARDS,
                                                   card_memory=GPU_CARD_MEMORY)),
                           Manifest("v", vgpu_node("v1", cards))])
        install_simulated_device_plugin(self.cluster, device_support(self.conf))
        self.restart()

    def restart(self) -> None:
        """A new scheduler process: everything it knows comes from the cluster's objects."""
        support = device_support(self.conf)
        cache = SchedulerCache(writer=self.cluster, scheduler_names=("volcano",),
                               clock=self.cluster.clock, **support.cache_options())
        support.install(cache, access=self.cluster, clock=self.cluster.clock,
                        sleep=lambda seconds: None)
        cache.pre_bind_hooks.append(self._maybe_fail)
        self.cluster.replay_into(cache.apply)
        self.cluster.listener = cache.apply
        self.cache = cache
        self.scheduler = Scheduler(cache=cache, conf=self.conf, clock=self.cluster.clock,
                                   rng=random.Random(self.counter))

    def _maybe_fail(self, task: Any) -> None:
        if self.fail_next_bind:
            self.fail_next_bind = False
            raise WriteError("injected bind failure", status=500)

    def submit(self, pod: dict[str, Any]) -> None:
        self.counter += 1
        pod["metadata"]["name"] = f"p{self.counter}"
        before = set(self.cluster.objects.get("PodGroup", {}))
        self.cluster.load([Manifest("new", pod)])
        assert self.cache is not None
        for key, group in self.cluster.objects["PodGroup"].items():
            if key not in before:
                self.cache.apply("ADDED", "PodGroup", group)
        self.cache.apply("ADDED", "Pod", self.cluster.objects["Pod"][f"default/p{self.counter}"])

    def cycle(self) -> None:
        assert self.scheduler is not None and self.cache is not None
        self.scheduler.run_once()
        self.cache.flush()
        self.cluster.clock.advance(1.0)

    def delete(self, choice: int) -> None:
        bound = sorted(k for k, p in self.cluster.objects.get("Pod", {}).items()
                       if p["spec"].get("nodeName"))
        if not bound:
            return
        pod = self.cluster.objects["Pod"].pop(bound[choice % len(bound)])
        assert self.cache is not None
        self.cache.apply("DELETED", "Pod", pod)


def _limits(pod: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for container in pod["spec"]["containers"]:
        for key, value in (container.get("resources", {}).get("limits") or {}).items():
            if key.startswith("volcano.sh/"):
                out[key] += int(value)
    return out


def check_no_overcommit(cluster: SimCluster) -> None:
    gpu_used = [0] * GPU_CARDS
    gpu_holders: dict[int, list[str]] = defaultdict(list)
    whole: set[int] = set()
    vgpu: dict[str, list[int]] = {uuid: [0, 0, 0] for uuid in VGPU_CARDS}
    for pod in cluster.objects.get("Pod", {}).values():
        node = pod["spec"].get("nodeName")
        annotations = pod["metadata"].get("annotations") or {}
        if not node:
            continue
        name = pod["metadata"]["name"]
        if "volcano.sh/gpu-index" in annotations:
            assert node == "g1"
            limits = _limits(pod)
            for index in (int(i) for i in annotations["volcano.sh/gpu-index"].split(",")):
                assert 0 <= index < GPU_CARDS, f"{name} on missing card {index}"
                gpu_holders[index].append(name)
                if limits.get("volcano.sh/gpu-number"):
                    whole.add(index)
                    gpu_used[index] += GPU_CARD_MEMORY
                else:
                    gpu_used[index] += limits["volcano.sh/gpu-memory"]
        if "volcano.sh/vgpu-ids-new" in annotations:
            assert node == "v1"
            for container in annotations["volcano.sh/vgpu-ids-new"].split(";"):
                for entry in filter(None, container.split(":")):
                    uuid, _, memory, cores = entry.split(",")
                    vgpu[uuid][0] += 1
                    vgpu[uuid][1] += int(memory)
                    vgpu[uuid][2] += int(cores)
    for index in range(GPU_CARDS):
        assert gpu_used[index] <= GPU_CARD_MEMORY, f"card {index}: {gpu_holders[index]}"
        if index in whole:
            assert len(gpu_holders[index]) == 1, f"whole card {index}: {gpu_holders[index]}"
    for uuid, (split, memory) in VGPU_CARDS.items():
        count, used_memory, cores = vgpu[uuid]
        assert count <= split and used_memory <= memory and cores <= 100, (uuid, vgpu[uuid])


pods = st.one_of(
    st.builds(lambda m: gpu_pod("x", memory=m), st.integers(1000, 9000)),
    st.builds(lambda n: gpu_pod("x", number=n), st.integers(1, 2)),
    st.builds(lambda n, m, c: vgpu_pod("x", number=n, memory=m, cores=c),
              st.integers(1, 2), st.integers(500, 7000), st.sampled_from([0, 30, 50, 100])),
    st.builds(lambda p: vgpu_pod("x", percentage=p), st.sampled_from([25, 50, 100])),
)
operations = st.lists(st.one_of(
    st.tuples(st.just("submit"), pods),
    st.tuples(st.just("cycle"), st.none()),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("fail"), st.none()),
    st.tuples(st.just("restart"), st.none()),
), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, lock=st.booleans(), policy=st.sampled_from(["", "binpack", "spread"]),
       family=st.sampled_from(["GPUSharingEnable", "GPUNumberEnable", "VGPUEnable"]))
def test_no_card_is_ever_overcommitted(ops: list[tuple[str, Any]], lock: bool,
                                       policy: str, family: str) -> None:
    # One family per conf, as Volcano allows; pods of the others stay plain resources.
    conf = parse_conf(deviceshare_conf(**{family: True}, NodeLockEnable=lock,
                                       SchedulePolicy=policy, ScheduleWeight=1))
    world = World(conf)
    for kind, value in ops:
        if kind == "submit":
            world.submit(value)
        elif kind == "cycle":
            world.cycle()
        elif kind == "delete":
            world.delete(value)
        elif kind == "fail":
            world.fail_next_bind = True
        else:
            world.restart()
        check_no_overcommit(world.cluster)
    for _ in range(3):
        world.cycle()
    check_no_overcommit(world.cluster)


def test_restart_sees_the_usage_of_bound_pods() -> None:
    conf = parse_conf(deviceshare_conf(GPUSharingEnable=True))
    world = World(conf)
    world.submit(gpu_pod("x", memory=7000))
    world.cycle()
    world.restart()
    for _ in range(GPU_CARDS):
        world.submit(gpu_pod("x", memory=7000))
    for _ in range(3):
        world.cycle()
    placed = [p for p in world.cluster.objects["Pod"].values() if p["spec"].get("nodeName")]
    assert len(placed) == GPU_CARDS
    check_no_overcommit(world.cluster)
