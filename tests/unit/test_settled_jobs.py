"""Settled jobs: when a job may be skipped by a cycle and what brings it back.

See :mod:`scheduler.framework.settled`. Volcano visits every job each cycle (its job updater,
``pkg/scheduler/framework/job_updater.go``); these cases pin down when skipping a job is safe.
"""

from __future__ import annotations

from typing import Any

from scheduler.api.resource import Resource
from scheduler.api.types import JobID
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.framework.settled import SettledStore
from tests.builders import conf_of, make_node, make_pod, make_podgroup

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
"""


def _world() -> tuple[Any, Any, Any]:
    objects = [make_node("n0", cpu="8"), make_podgroup("a", min_member=2),
               make_pod("a-0", cpu="1", group="a"), make_pod("a-1", cpu="1", group="a"),
               make_podgroup("b", min_member=1), make_pod("b-0", cpu="1", group="b")]
    cluster, cache, scheduler = build_simulation(
        [Manifest(f"t#{i}", o) for i, o in enumerate(objects)], conf=conf_of(CONF), seed=1)
    for _ in range(2):
        scheduler.run_once()
        cache.flush()
    for pod in cluster.objects["Pod"].values():  # the node side starts them
        pod.setdefault("status", {})["phase"] = "Running"
        cluster._store(pod)
        cache.apply("MODIFIED", "Pod", pod)
    for _ in range(3):
        scheduler.run_once()
        cache.flush()
    return cluster, cache, scheduler


def test_running_jobs_settle_and_the_echo_of_their_status_does_not_unsettle_them() -> None:
    cluster, cache, scheduler = _world()
    assert cache.pool.last.settled == {JobID("default/a"), JobID("default/b")}
    writes = cluster.changes
    scheduler.run_once()
    cache.flush()
    assert cluster.changes == writes  # a quiet cycle writes nothing
    assert cache.pool.last.settled == {JobID("default/a"), JobID("default/b")}


def test_a_lost_podgroup_write_brings_the_job_back_and_it_is_written_again() -> None:
    cluster, cache, scheduler = _world()
    cluster.objects["PodGroup"]["default/a"]["status"] = {}  # as if the write never landed
    cache.status.lost(("podgroup", "default/a"))
    scheduler.run_once()
    cache.flush()
    assert JobID("default/a") not in cache.pool.last.settled
    assert cluster.objects["PodGroup"]["default/a"]["status"]["phase"] == "Running"


def test_a_changed_podgroup_is_not_settled() -> None:
    cluster, cache, scheduler = _world()
    podgroup = cluster.objects["PodGroup"]["default/b"]
    podgroup["spec"]["minMember"] = 2
    cluster._store(podgroup)
    cache.apply("MODIFIED", "PodGroup", podgroup)
    scheduler.run_once()
    assert JobID("default/b") not in cache.pool.last.settled
    assert JobID("default/a") in cache.pool.last.settled


def test_a_deleted_queue_unsettles_every_job() -> None:
    _cluster, cache, scheduler = _world()
    cache.apply("ADDED", "Queue", {"apiVersion": "scheduling.volcano.sh/v1beta1",
                                   "kind": "Queue", "metadata": {"name": "other"},
                                   "spec": {"weight": 1}})
    scheduler.run_once()
    assert cache.pool.last.settled  # a new queue changes no job
    cache.apply("DELETED", "Queue", {"apiVersion": "scheduling.volcano.sh/v1beta1",
                                     "kind": "Queue", "metadata": {"name": "other"},
                                     "spec": {"weight": 1}})
    scheduler.run_once()
    assert not cache.pool.last.settled


class _Job:
    def __init__(self, uid: str, queue: str, cpu: float) -> None:
        self.uid, self.queue, self.cpu = JobID(uid), queue, cpu


def _part(job: Any) -> tuple[Resource] | None:
    return None if job.cpu < 0 else (Resource(job.cpu, 0.0, {"nvidia.com/gpu": 1.0}),)


def _advance(store: SettledStore, settled: set[JobID]) -> None:
    before = set(store.settled)
    store.advance(settled, entered=settled - before, left=before - settled)


def test_store_sums_follow_jobs_entering_and_leaving() -> None:
    jobs: Any = {JobID(f"j{i}"): _Job(f"j{i}", "q" if i % 2 else "r", float(i))
                 for i in range(6)}
    jobs[JobID("j5")].cpu = -1  # its contribution is not kept: handed back to the caller
    store = SettledStore()
    _advance(store, set(jobs))
    totals, loose = store.totals("x", jobs=jobs, contribution=_part, width=1)
    assert totals["q"][0] == Resource(4.0, 0.0, {"nvidia.com/gpu": 2.0})  # j1 + j3
    assert loose == {"j5"}
    _advance(store, {JobID("j0"), JobID("j2")})
    totals, _ = store.totals("x", jobs=jobs, contribution=_part, width=1)
    assert totals["q"][0] == Resource(0.0, 0.0, {})  # no kept job names the scalar now
    assert totals["r"][0] == Resource(2.0, 0.0, {"nvidia.com/gpu": 2.0})
    jobs[JobID("j0")].cpu = 7.0
    _advance(store, set())  # no session asked for "x" here ...
    _advance(store, {JobID("j0")})  # ... so it is rebuilt rather than trusted
    totals, _ = store.totals("x", jobs=jobs, contribution=_part, width=1)
    assert totals == {"r": [Resource(7.0, 0.0, {"nvidia.com/gpu": 1.0})]}


def test_fractional_contributions_are_left_to_the_caller() -> None:
    jobs: Any = {JobID("j"): _Job("j", "q", 0.5)}
    store = SettledStore()
    _advance(store, set(jobs))
    totals, loose = store.totals("x", jobs=jobs, contribution=_part, width=1)
    assert totals == {} and loose == {"j"}
