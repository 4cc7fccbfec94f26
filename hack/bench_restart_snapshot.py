"""A full snapshot after a restart, in one process with the in-memory cluster.

    python hack/bench_throughput.py --restart-snapshot --nodes 20000 --pods 200000

``--pods`` pods run on ``--nodes`` nodes (PodGroups of 1–4, Running, the cluster of
``--idle-cycle``); a first scheduler runs ``--warmup`` cycles so every PodGroup's status is
written, as on a cluster that has been scheduled for a while. Then the scheduler restarts: a new
cache is filled from every stored object (the informers' initial lists) and a new scheduler runs
its first cycle, which snapshots every node and job (nothing is incremental yet). Reported:
``sync_seconds`` (the new cache fed with every object), ``first_cycle_seconds`` (snapshot,
session open, actions, close and writes), ``open_seconds`` (the plugins' session open within
it), ``restart_to_first_cycle_seconds`` (the two together), ``writes_after_restart`` (objects the
first cycle wrote: a steady cluster should need none) and peak RSS. ``collector``: the
garbage collector is off while the cache syncs and what it loaded is frozen after
(:class:`~scheduler.collector.Collector`), and pods' strings are interned after the first cycle
(``interned_after_cpu_seconds``), as ``lahar run`` does; otherwise CPython's default runs
throughout and pods are interned as they arrive. ``profile``: a cProfile of the sync and the
first cycle is written there.
"""

from __future__ import annotations

import cProfile
import gc
import random
import resource
import time
from pathlib import Path
from typing import Any

from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.simulation import build_simulation
from scheduler.collector import Collector
from scheduler.conf import load_conf
from scheduler.deviceconf import device_support
from scheduler.loop import Scheduler

CONF = Path(__file__).resolve().parents[1] / "conf" / "binpack.conf"


def run_restart(nodes: int, pods: int, seed: int, *, build: Any, warmup: int = 3,
                collector: bool = False, profile: str | None = None) -> dict[str, Any]:
    """``build(nodes, pods, seed)`` gives the running cluster's manifests."""
    conf = load_conf(CONF)
    cluster, cache, scheduler = build_simulation(
        build(nodes, pods, seed), conf=conf, seed=seed, freeze_loaded=True)
    cluster.take_changes()
    for _ in range(warmup):
        scheduler.run_once()
        cache.flush()
        cluster.clock.advance(1.0)
    cluster.take_changes()
    cluster.listener = None
    del scheduler, cache  # the old process is gone
    gc.collect()
    collecting = gc.isenabled()
    if collector:
        gc.disable()
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    started, cpu_started = time.perf_counter(), time.process_time()
    devices = device_support(conf, config_maps=[])
    fresh = SchedulerCache(writer=cluster, scheduler_names=("volcano",), clock=cluster.clock,
                           **devices.cache_options())
    devices.install(fresh, access=cluster, clock=cluster.clock, sleep=lambda seconds: None)
    fresh.strings.deferred = collector  # lahar run interns after its first cycle
    cluster.replay_into(fresh.apply)
    cluster.listener = fresh.apply
    if collector:
        Collector().settle()
        if collecting:
            gc.enable()
    synced, cpu_synced = time.perf_counter(), time.process_time()
    restarted = Scheduler(cache=fresh, conf=conf, clock=cluster.clock, rng=random.Random(seed))
    cycle_started = time.perf_counter()
    stats = restarted.run_once()
    fresh.flush()
    done = time.perf_counter()
    cpu = time.process_time() - cpu_started
    fresh.strings.deferred = False
    while fresh.intern_deferred():  # what lahar run does between its next cycles
        pass
    deferred_cpu = time.process_time() - cpu_started - cpu
    if profiler is not None and profile:
        profiler.disable()
        profiler.dump_stats(profile)
    return {
        "nodes": nodes,
        "running_pods": pods,
        "sync_seconds": round(synced - started, 3),
        "first_cycle_seconds": round(done - cycle_started, 3),
        "open_seconds": round(stats.plugin_open_seconds, 3),
        "restart_to_first_cycle_seconds": round(done - started, 3),
        "restart_cpu_seconds": round(cpu, 3),
        "sync_cpu_seconds": round(cpu_synced - cpu_started, 3),
        "interned_after_cpu_seconds": round(deferred_cpu, 3),
        "collector": "lahar run's" if collector else "CPython's default",
        "snapshot_nodes": stats.nodes,
        "snapshot_jobs": stats.jobs,
        "writes_after_restart": cluster.take_changes(),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
