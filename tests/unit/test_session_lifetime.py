"""A session is freed once the next one has opened: nothing the scheduler keeps from cycle to
cycle (the snapshot handed on, the node table carried over, plugins' shared state) may keep
the sessions before it alive, or a long `lahar run` and a replay of thousands of pods grow
without bound."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.framework.session import Session
from scheduler.loop import Scheduler
from tests.builders import conf_of, make_node, make_pod, make_podgroup
from tests.devices.conftest import gpu_node, gpu_pod, gpushare_conf

Obj = dict[str, Any]


def _submit(cluster: Any, cache: Any, obj: Obj) -> None:
    meta = obj["metadata"]
    meta.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
    meta.setdefault("uid", f"uid-{obj['kind']}-{meta['name']}")
    meta["resourceVersion"] = str(len(cluster.objects.get(obj["kind"], {})) + 1)
    cluster.objects.setdefault(obj["kind"], {})[f"{meta['namespace']}/{meta['name']}"] = obj
    cache.apply("ADDED", obj["kind"], obj)


def _recording(scheduler: Scheduler, opened: list[weakref.ref[Session]]) -> None:
    open_session = scheduler.open_session

    def recorded() -> Session:
        session = open_session()
        opened.append(weakref.ref(session))
        return session

    scheduler.open_session = recorded  # type: ignore[method-assign]


@pytest.mark.parametrize("devices", [False, True], ids=["plain", "gpushare"])
def test_sessions_do_not_outlive_the_next_cycle(devices: bool) -> None:
    """With devices on, the device plugin registers row hooks on the node table, and the
    predicates' pod index is built on that table: both paths once kept every session alive
    (a snapshot handed on the last table; a map keyed by session held the index)."""
    if devices:
        nodes = [gpu_node(f"n{i}", cards=4) for i in range(3)]
        conf = conf_of(gpushare_conf())
    else:
        nodes = [make_node(f"n{i}", cpu="32") for i in range(3)]
        conf = conf_of(None)
    cluster, cache, scheduler = build_simulation(
        [Manifest(f"t#{i}", obj) for i, obj in enumerate(nodes)], conf=conf)
    opened: list[weakref.ref[Session]] = []
    _recording(scheduler, opened)
    for i in range(12):
        _submit(cluster, cache, make_podgroup(f"job-{i}", min_member=1))
        pod = gpu_pod(f"job-{i}-0", memory=1000, group=f"job-{i}", cpu="1") if devices \
            else make_pod(f"job-{i}-0", group=f"job-{i}", cpu="1")
        _submit(cluster, cache, pod)
        scheduler.run_once()
        cache.flush()
    assert sum(1 for name in cluster.objects["Pod"].values() if name["spec"].get("nodeName")) \
        == 12
    gc.collect()
    alive = [i for i, ref in enumerate(opened) if ref() is not None]
    # The last session's table is handed to the next snapshot and keeps the table before it
    # (whose row hooks reach that session) for its own session: two at most, never a chain.
    assert len(opened) >= 12
    assert set(alive) <= {len(opened) - 1, len(opened) - 2}
