"""The restart benchmark (``hack/bench_restart_snapshot.py``) on a small cluster: the new cache
sees every node and job, and a steady cluster is not written again after the restart (Volcano
rebuilds its cache from the informers' lists and snapshots it whole on the first cycle:
pkg/scheduler/cache/cache.go ``SchedulerCache.Snapshot``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, ROOT / "hack" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_restart_snapshot_covers_every_object_and_writes_nothing() -> None:
    throughput = _load("bench_throughput")
    restart = _load("bench_restart_snapshot")
    result = restart.run_restart(20, 100, 1, build=throughput.idle_cluster, warmup=3)
    groups = sum(1 for m in throughput.idle_cluster(20, 100, 1) if m.kind == "PodGroup")
    assert result["snapshot_nodes"] == 20
    assert result["snapshot_jobs"] == groups
    assert result["writes_after_restart"] == 0
    assert result["restart_to_first_cycle_seconds"] >= result["first_cycle_seconds"]


def test_restart_snapshot_as_lahar_run_has_it_writes_nothing_either(tmp_path: Path) -> None:
    """``--collector``: the collector off during the sync and the strings interned after the
    first cycle, as ``lahar run`` does; the restart's decisions and writes are the same."""
    throughput = _load("bench_throughput")
    restart = _load("bench_restart_snapshot")
    profile = tmp_path / "restart.prof"
    result = restart.run_restart(20, 100, 1, build=throughput.idle_cluster, warmup=3,
                                 collector=True, profile=str(profile))
    assert result["snapshot_nodes"] == 20
    assert result["writes_after_restart"] == 0
    assert result["interned_after_cpu_seconds"] >= 0
    assert profile.stat().st_size > 0
