"""The long-running scheduler's collector policy (:mod:`scheduler.collector`) and the property
it relies on: a scheduling cycle leaves no reference cycle behind, so freezing what survives a
cycle keeps nothing alive that reference counting would have freed."""

from __future__ import annotations

import gc
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import actions
import plugins
import scheduler
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import SimCluster
from scheduler.cluster.simulation import build_simulation
from scheduler.collector import Collector
from scheduler.conf import SchedulerConf, load_conf
from tests.builders import conf_of, gang, make_node, make_pod, make_queue


@dataclass
class FakeGc:
    """Records the calls the policy makes instead of touching the real collector."""

    calls: list[str] = field(default_factory=list)
    unreachable: int = 3
    thresholds: tuple[int, ...] = ()

    def set_threshold(self, *thresholds: int) -> None:
        self.thresholds = thresholds

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def collect(self) -> int:
        self.calls.append("collect")
        return self.unreachable


@dataclass
class Heap:
    blocks: int = 1000

    def __call__(self) -> int:
        return self.blocks


def _policy(heap: Heap, fake: FakeGc) -> Collector:
    return Collector(collector=fake, heap=heap, clock=iter(range(100)).__next__)  # type: ignore[arg-type]


def test_each_cycle_freezes_its_survivors_and_nothing_more_while_the_heap_grows_slowly() -> None:
    heap, fake = Heap(1000), FakeGc()
    policy = _policy(heap, fake)
    policy.settle()
    assert (fake.calls, policy.baseline) == (["freeze"], 1000)
    assert fake.thresholds == (10_000, 10, 10)  # young collections every 10,000 new objects
    for blocks in (1200, 1700, 2000):  # at most double the baseline: no full collection
        heap.blocks = blocks
        policy.after_cycle()
    assert fake.calls == ["freeze"] * 4
    assert policy.full_collections == 0


def test_a_heap_past_double_its_baseline_gets_one_full_unfrozen_collection() -> None:
    heap, fake = Heap(1000), FakeGc()
    policy = _policy(heap, fake)
    policy.settle()
    heap.blocks = 2001
    policy.after_cycle()
    assert fake.calls[1:] == ["freeze", "unfreeze", "collect", "freeze"]
    assert policy.full_collections == 1
    assert policy.baseline == 2001  # the new baseline: the next one waits for 4,002
    fake.calls.clear()
    heap.blocks = 4000
    policy.after_cycle()
    assert fake.calls == ["freeze"]


def test_growth_sets_the_threshold() -> None:
    heap, fake = Heap(1000), FakeGc()
    policy = Collector(growth=0.5, collector=fake, heap=heap)  # type: ignore[arg-type]
    policy.settle()
    heap.blocks = 1501
    policy.after_cycle()
    assert policy.full_collections == 1


def test_a_busy_scheduler_waits_for_a_quiet_cycle_or_four_times_the_heap() -> None:
    """A full collection stops every thread: while cycles place pods it waits, up to a heap
    of four times the baseline, and runs at the first quiet cycle past double."""
    heap, fake = Heap(1000), FakeGc()
    policy = _policy(heap, fake)
    policy.settle()
    for blocks in (2500, 3500, 4000):
        heap.blocks = blocks
        policy.after_cycle(busy=True)
    assert policy.full_collections == 0
    policy.after_cycle(busy=False)
    assert policy.full_collections == 1 and policy.baseline == 4000
    heap.blocks = 16_001
    policy.after_cycle(busy=True)
    assert policy.full_collections == 2


@pytest.fixture
def collector_paused() -> Iterator[None]:
    """No automatic collection may free a cycle before the test counts what is left."""
    enabled = gc.isenabled()
    gc.disable()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()


_PACKAGES = (scheduler, plugins, actions)
_PACKAGE_DIRS = tuple(str(Path(package.__file__ or "").parent) for package in _PACKAGES)
_PACKAGE_NAMES = tuple(package.__name__ for package in _PACKAGES)


def _of_the_scheduler(obj: object) -> bool:
    """Whether ``obj`` is the scheduler's (``scheduler``, ``plugins``, ``actions``): an instance
    of one of its classes, one of its functions, or a frame running its code. Every reference
    cycle a scheduling cycle leaves behind holds at least one such object (a session, a plugin,
    a recursive nested function, a traceback's frame); garbage another thread made meanwhile
    (a test server's request thread from an earlier test, ending when its client is collected)
    holds none and is not counted."""
    if isinstance(obj, types.FrameType):
        return obj.f_code.co_filename.startswith(_PACKAGE_DIRS)
    module = obj.__module__ if isinstance(obj, types.FunctionType) else type(obj).__module__
    return (module or "").split(".")[0] in _PACKAGE_NAMES


def _unreachable_after_cycles(objects: list[dict[str, Any]], conf: SchedulerConf,
                              cycles: int) -> tuple[int, SimCluster]:
    """The scheduler's objects a full collection finds unreachable after ``cycles`` cycles over
    ``objects``."""
    cluster, cache, simulated = build_simulation(
        [Manifest(f"test#{i}", obj) for i, obj in enumerate(objects)], conf=conf)
    gc.collect()
    for _ in range(cycles):
        simulated.run_once()
        cache.flush()
        cluster.clock.advance(1.0)
    gc.set_debug(gc.DEBUG_SAVEALL)  # keep what the collection finds, to tell whose it is
    try:
        gc.collect()
        found = sum(1 for obj in gc.garbage if _of_the_scheduler(obj))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()
    return found, cluster


@pytest.mark.usefixtures("collector_paused")
@pytest.mark.parametrize("conf", [None, "conf/preemption.conf", "conf/binpack.conf",
                                  "conf/finegrained.conf"])
def test_a_cycle_leaves_no_reference_cycle(conf: str | None) -> None:
    """Every plugin keeps its session (``PluginBase.session``, drf's job source) and the session
    keeps every plugin: before :meth:`Session.release`, each cycle left its session, its plugins
    and all its snapshot's clones to a full collection (10,000–20,000 objects every few seconds
    under ``lahar run``, found with ``gc.DEBUG_SAVEALL``)."""
    objects = [make_queue("default"), *[make_node(f"n{i}", cpu="8") for i in range(4)]]
    objects += gang("g1", size=3, cpu="1")
    objects += [make_pod(f"plain-{i}", cpu="1") for i in range(4)]
    objects += [make_pod("too-big", cpu="64")]
    unreachable, _ = _unreachable_after_cycles(
        objects, conf_of(None) if conf is None else load_conf(conf), cycles=3)
    assert unreachable == 0


@pytest.mark.usefixtures("collector_paused")
def test_a_cycle_placing_fine_grained_devices_leaves_no_reference_cycle() -> None:
    """The device searches walk PCIe/NUMA trees recursively; as nested functions calling
    themselves they left a cycle per search (``by_tree``, ``_ranked_scopes``)."""
    from tests.devices.finegrained_helpers import (
        device_object,
        fg_node,
        fg_pod,
        finegrained_conf,
        topo_gpus,
        topo_nics,
    )

    objects = [make_queue("default")]
    for i in range(2):
        objects += [fg_node(f"n{i}", nics=4),
                    device_object(f"n{i}", topo_gpus() + topo_nics([1, 1, 1, 1], vfs=4))]
    objects += [fg_pod("whole", nvidia=2), fg_pod("shared", gpu_core=50, gpu_memory_ratio=50),
                fg_pod("joint", nvidia=1, rdma=1)]
    unreachable, cluster = _unreachable_after_cycles(objects, conf_of(finegrained_conf()),
                                                     cycles=2)
    assert unreachable == 0
    assert all(pod["spec"].get("nodeName") for pod in cluster.objects["Pod"].values())
