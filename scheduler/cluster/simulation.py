"""``lahar simulate``: run the scheduler against the embedded cluster until it settles.

Each cycle is one scheduling session followed by the writes it produced; simulated time moves
one schedule period per cycle. The run stops after the first cycle that changes nothing, or
after ``max_cycles``.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import SimClock, SimCluster
from scheduler.cluster.simdevices import install_simulated_device_plugin
from scheduler.conf import SchedulerConf
from scheduler.deviceconf import device_support
from scheduler.loop import CycleStats, Scheduler

__all__ = ["SimulationResult", "build_simulation", "run_simulation"]


@dataclass(slots=True)
class SimulationResult:
    cluster: SimCluster
    cycles: int = 0
    settled: bool = False
    stats: list[CycleStats] = field(default_factory=list)


def build_simulation(
    manifests: Sequence[Manifest],
    *,
    conf: SchedulerConf,
    scheduler_names: Sequence[str] = ("volcano",),
    seed: int = 0,
    clock: SimClock | None = None,
    setup: Callable[[SimCluster, SchedulerCache], None] | None = None,
    freeze_loaded: bool = False,
    take_manifests: bool = False,
    on_close: Callable[[Any, CycleStats], None] | None = None,
) -> tuple[SimCluster, SchedulerCache, Scheduler]:
    """Wire an embedded cluster, a cache and a scheduler together (nothing runs yet).

    ``freeze_loaded`` moves every object alive once the cache holds the loaded cluster out of
    the garbage collector's reach (:func:`gc.freeze`): a large cluster's objects live for the
    whole run, and every full collection would otherwise walk all of them again. The
    collector is also paused while the cluster and the cache are filled (only long-lived
    objects are made then, so each collection would find nothing), and no collection runs
    before the freeze: a 20,000-pod load leaves no cyclic garbage to free, and a full
    collection costs 0.2 s there. For long runs on big clusters; objects made later are
    collected as usual. ``take_manifests`` gives the manifests' objects to the cluster (see
    :meth:`SimCluster.load`): the caller must not use them afterwards.
    """
    collecting = gc.isenabled()
    if freeze_loaded:
        gc.disable()
    try:
        cluster, cache = _load(
            manifests, conf=conf, scheduler_names=scheduler_names, clock=clock or SimClock(),
            setup=setup, take_manifests=take_manifests,
        )
        if freeze_loaded:
            gc.freeze()
    finally:
        if freeze_loaded and collecting:
            gc.enable()
    scheduler = Scheduler(cache=cache, conf=conf, clock=cluster.clock, rng=random.Random(seed),
                          on_close=on_close)
    return cluster, cache, scheduler


def _load(
    manifests: Sequence[Manifest],
    *,
    conf: SchedulerConf,
    scheduler_names: Sequence[str],
    clock: SimClock,
    setup: Callable[[SimCluster, SchedulerCache], None] | None,
    take_manifests: bool,
) -> tuple[SimCluster, SchedulerCache]:
    cluster = SimCluster(clock=clock, scheduler_names=tuple(scheduler_names))
    cluster.load(manifests, take=take_manifests)
    devices = device_support(conf, config_maps=[m.obj for m in manifests
                                                if m.kind == "ConfigMap"])
    cache = SchedulerCache(
        writer=cluster, scheduler_names=scheduler_names, clock=clock, **devices.cache_options()
    )
    devices.install(cache, access=cluster, clock=clock, sleep=lambda seconds: None)
    install_simulated_device_plugin(cluster, devices)
    if setup is not None:
        setup(cluster, cache)
    cluster.replay_into(cache.apply)
    cluster.listener = cache.apply
    return cluster, cache


def run_simulation(
    manifests: Sequence[Manifest],
    *,
    conf: SchedulerConf,
    scheduler_names: Sequence[str] = ("volcano",),
    seed: int = 0,
    max_cycles: int = 100,
    period: float = 1.0,
    freeze_loaded: bool = False,
    take_manifests: bool = False,
    on_cycle: Callable[[SimulationResult], None] | None = None,
    on_close: Callable[[Any, CycleStats], None] | None = None,
    setup: Callable[[SimCluster, SchedulerCache], None] | None = None,
) -> SimulationResult:
    """Run cycles until one changes nothing or ``max_cycles`` ran (``freeze_loaded`` and
    ``take_manifests`` as for :func:`build_simulation`); ``on_cycle`` is told before each
    cycle, and ``result.cycles`` counts those done; ``setup`` as for
    :func:`build_simulation`."""
    cluster, cache, scheduler = build_simulation(
        manifests, conf=conf, scheduler_names=scheduler_names, seed=seed,
        freeze_loaded=freeze_loaded, take_manifests=take_manifests, on_close=on_close,
        setup=setup,
    )
    result = SimulationResult(cluster=cluster)
    cluster.take_changes()
    while result.cycles < max_cycles:
        if on_cycle is not None:
            on_cycle(result)
        result.stats.append(scheduler.run_once())
        cache.flush()
        result.cycles += 1
        cluster.clock.advance(period)
        if cluster.take_changes() == 0:
            result.settled = True
            break
    return result
