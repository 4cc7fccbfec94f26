"""Property: an incremental snapshot shows a session exactly what a full copy would.

Random sequences of cluster events (pods arriving, running, finishing, deleted; nodes added,
changed, removed), scheduling cycles (binds, the simulated node side) and sessions whose
statements are discarded or left with pipelined tasks run against one cache. After every
step the cache's incremental :meth:`~scheduler.cache.cache.SchedulerCache.snapshot` and a
wholly fresh copy (:meth:`~scheduler.cache.cache.SchedulerCache.full_snapshot`) must agree on
every node (accounting, tasks, device ledgers), every job and queue, and every column of the
node table a session builds from them; and the incremental one must share no object with the
cache. Volcano copies the whole cluster each cycle (``SchedulerCache.Snapshot`` in
``pkg/scheduler/cache/cache.go``); this is the check that copying less changes nothing.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from plugins import PLUGINS
from scheduler.api.resource import Resource
from scheduler.api.types import COMPLETED_STATUS, TaskStatus
from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import SimCluster
from scheduler.cluster.simulation import build_simulation
from scheduler.conf import SchedulerConf
from scheduler.framework.session import PluginEntry, Session
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.statement import Statement
from tests.builders import conf_of, gang, make_node, make_pod, make_podgroup
from tests.devices.conftest import gpu_node, gpu_pod, gpushare_conf

STEPS = (
    "cycle",
    "arrive",
    "arrive_gpu",
    "arrive_huge",
    "run",
    "finish",
    "delete_pod",
    "change_node",
    "add_node",
    "delete_node",
    "discarded_session",
    "pipelined_session",
    "delete_podgroup",
    "readd_podgroup",
    "queue_change",
)


def _ledger(ledger: Any) -> Any:
    if dataclasses.is_dataclass(ledger):
        return {f.name: getattr(ledger, f.name) for f in dataclasses.fields(ledger)
                if f.name != "reporter"}
    return repr(ledger)


def _task(task: Any) -> tuple[Any, ...]:
    return (task.uid, task.status, task.node_name, task.nominated_node, task.last_node,
            dict(task.bind_annotations), task.resreq, task.priority)


def picture(snapshot: Snapshot) -> dict[str, Any]:
    nodes = [
        (node.name, node.idle, node.used, node.releasing, node.pipelined, node.allocatable,
         node.labels, node.unschedulable, dict(node.host_ports),
         [_task(t) for t in node.tasks.values()],
         {name: _ledger(ledger) for name, ledger in node.others.items()})
        for node in snapshot.nodes
    ]
    jobs = {
        uid: (job.podgroup.status_dict(), job.podgroup.phase, job.priority, job.min_available,
              [_task(t) for t in job.tasks.values()], job.allocated, job.total_request,
              {str(s): sorted(ts) for s, ts in job.task_status_index.items() if ts},
              job.queue, job.preemptable, job.name, job.namespace, job.nodes_fit_errors,
              job.unfit_tasks, job.job_fit_error, job.enqueue_message)
        for uid, job in snapshot.jobs.items()
    }
    queues = {uid: (q.name, q.weight, q.state) for uid, q in snapshot.queues.items()}
    return {"nodes": nodes, "jobs": jobs, "queues": queues}


def open_session(snapshot: Snapshot, cache: SchedulerCache, conf: SchedulerConf) -> Session:
    """A session with the conf's plugins opened (device summary columns included)."""
    tiers = [[PluginEntry(PLUGINS[option.name](option.args), option.flags, t)
              for option in tier] for t, tier in enumerate(conf.tiers)]
    session = Session(snapshot, tiers=tiers, sink=cache, clock=lambda: 0.0,
                      rng=random.Random(0))
    session.open()
    return session


def table_columns(session: Session) -> dict[str, Any]:
    table = session.table
    return {name: getattr(table, name).copy() for name in (
        "allocatable", "idle", "used", "releasing", "pipelined", "future_idle", "pod_count",
        "unschedulable")} | {"names": list(table.names), "dims": list(table.dims)} | {
        f"column {name}": values.copy() for name, values in table.columns.items()}


def assert_usage(cache: SchedulerCache) -> None:
    """The cache's kept queue sums, pending index and unready-by-name against a recount."""
    request: dict[str, Resource] = {}
    allocated: dict[str, Resource] = {}
    pending = set()
    for task in cache.tasks.values():
        podgroup = cache.podgroups.get(task.job)
        queue = podgroup.queue if podgroup is not None else ""
        if task.status is TaskStatus.PENDING and task.job:
            pending.add(task.uid)
        if queue and not task.status & COMPLETED_STATUS:
            request.setdefault(queue, Resource()).add(task.resreq)
            if task.node_name:
                allocated.setdefault(queue, Resource()).add(task.resreq)
    if not cache.usage.active:
        cache.usage.activate(cache.tasks.values(), cache._queue_of)
    kept_request, kept_allocated = cache.usage.totals(lambda: cache.tasks.values(),
                                                      cache._queue_of)
    for queue in kept_request.keys() | request.keys():
        assert kept_request.get(queue, Resource()) == request.get(queue, Resource()), queue
        assert kept_allocated.get(queue, Resource()) == allocated.get(queue, Resource()), queue
    assert set(cache.usage.pending) == pending
    by_name: dict[str, int] = {}
    for name, count in cache.unready.values():
        by_name[name] = by_name.get(name, 0) + count
    assert cache.unready_by_name == by_name
    assert cache.unready_positive == sum(1 for count in by_name.values() if count > 0)


def assert_same(cache: SchedulerCache, conf: SchedulerConf) -> Session:
    """Compare an incremental snapshot with a full one; return the incremental session."""
    assert_usage(cache)
    incremental = cache.snapshot()
    full = cache.full_snapshot()
    assert picture(incremental) == picture(full)
    assert list(incremental.jobs) == list(full.jobs)  # job order breaks ties in sessions
    if incremental.active is not None:  # the jobs a session visits, kept in step
        assert incremental.active == [u for u in incremental.jobs if u not in incremental.settled]
    assert incremental.settled <= incremental.jobs.keys()
    cached_nodes = {id(node) for node in cache.nodes.values()}
    cached_tasks = {id(task) for task in cache.tasks.values()}
    assert not any(id(node) in cached_nodes for node in incremental.nodes)
    for node in incremental.nodes:
        assert not any(id(task) in cached_tasks for task in node.tasks.values())
        for name, ledger in node.others.items():
            assert ledger is not cache.nodes[node.name].others[name]
    for job in incremental.jobs.values():
        assert not any(id(task) in cached_tasks for task in job.tasks.values())
    session = open_session(incremental, cache, conf)
    reference = open_session(full, cache, conf)
    columns = table_columns(session)
    assert columns.keys() == table_columns(reference).keys()
    for name, value in table_columns(reference).items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(columns[name], value, err_msg=name)
        else:
            assert columns[name] == value, name
    assert [n.index for n in session.node_list] == list(range(len(reference.table)))
    return session


class World:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        objects: list[dict[str, Any]] = [
            make_node("n0", cpu="8"), make_node("n1", cpu="4", labels={"zone": "a"}),
            gpu_node("g0", cards=2),
            make_podgroup("run", min_member=1, phase="Running"),
            make_pod("run-0", cpu="1", group="run", node="n0"),
            make_pod("run-1", cpu="2", group="run", node="g0"),
            *gang("wait", 2, cpu="1"),
        ]
        manifests = [Manifest(f"t#{i}", obj) for i, obj in enumerate(objects)]
        self.cluster, self.cache, self.scheduler = build_simulation(
            manifests, conf=conf_of(gpushare_conf()), seed=seed)
        self.count = 0

    @property
    def sim(self) -> SimCluster:
        return self.cluster

    def _add(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta.setdefault("namespace", "default") if obj["kind"] != "Node" else None
        meta["uid"] = f"uid-{obj['kind']}-{meta['name']}"
        meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
        self.sim._store(obj)
        self.cache.apply("ADDED", obj["kind"], obj)

    def _modify(self, obj: dict[str, Any]) -> None:
        self.sim._store(obj)
        self.cache.apply("MODIFIED", obj["kind"], obj)

    def _pods(self, bound: bool) -> list[dict[str, Any]]:
        return [p for _, p in sorted(self.sim.objects.get("Pod", {}).items())
                if bool(p["spec"].get("nodeName")) == bound]

    def step(self, kind: str) -> None:
        rng = self.rng
        self.count += 1
        name = f"x{self.count}"
        if kind == "cycle":
            self.scheduler.run_once()
            self.cache.flush()
            self.sim.clock.advance(1.0)
        elif kind == "arrive_huge":  # fits no node: leaves fit errors on its job
            self._add(make_podgroup(name, min_member=1))
            self._add(make_pod(f"{name}-0", cpu="64", group=name))
        elif kind in ("arrive", "arrive_gpu"):
            size = rng.randint(1, 3)
            self._add(make_podgroup(name, min_member=size))
            for i in range(size):
                pod = (gpu_pod(f"{name}-{i}", memory=4000, group=name) if kind == "arrive_gpu"
                       else make_pod(f"{name}-{i}", cpu=rng.choice(("500m", "1", "3")),
                                     group=name))
                self._add(pod)
        elif kind in ("run", "finish"):
            pods = self._pods(bound=True)
            if pods:
                pod = rng.choice(pods)
                pod.setdefault("status", {})["phase"] = (
                    "Running" if kind == "run" else "Succeeded")
                self._modify(pod)
        elif kind == "delete_pod":
            pods = self._pods(bound=rng.random() < 0.5)
            if pods:
                pod = rng.choice(pods)
                key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                self.sim.objects["Pod"].pop(key)
                self.cache.apply("DELETED", "Pod", pod)
        elif kind == "change_node":
            node = rng.choice(sorted(self.sim.objects["Node"].values(),
                                     key=lambda n: n["metadata"]["name"]))
            node["metadata"].setdefault("labels", {})["zone"] = rng.choice("abc")
            node["status"]["allocatable"]["cpu"] = rng.choice(("4", "8", "16"))
            node.setdefault("spec", {})["unschedulable"] = rng.random() < 0.2
            self._modify(node)
        elif kind in ("delete_podgroup", "readd_podgroup"):
            groups = sorted(self.sim.objects.get("PodGroup", {}))
            if groups:
                podgroup = self.sim.objects["PodGroup"].pop(rng.choice(groups))
                self.cache.apply("DELETED", "PodGroup", podgroup)
                if kind == "readd_podgroup":  # same name again: it moves to the end
                    self._add(podgroup)
        elif kind == "queue_change":  # a new queue, or a PodGroup moved to a missing one
            if rng.random() < 0.5:
                self._add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                           "metadata": {"name": name}, "spec": {"weight": 1}})
            groups = sorted(self.sim.objects.get("PodGroup", {}))
            if groups:
                podgroup = self.sim.objects["PodGroup"][rng.choice(groups)]
                podgroup["spec"]["queue"] = rng.choice(
                    [q for q in self.sim.objects.get("Queue", {})] + ["missing"])
                self._modify(podgroup)
        elif kind == "add_node":
            self._add(make_node(name, cpu=rng.choice(("2", "8"))) if rng.random() < 0.6
                      else gpu_node(name))
        elif kind == "delete_node":
            nodes = sorted(self.sim.objects["Node"])
            if len(nodes) > 1:
                node = self.sim.objects["Node"].pop(rng.choice(nodes))
                self.cache.apply("DELETED", "Node", node)
        else:
            self._session_step(discard=kind == "discarded_session")

    def _session_step(self, *, discard: bool) -> None:
        """A session places and evicts on its copies, then discards or leaves them."""
        session = assert_same(self.cache, self.scheduler.conf)
        statement = Statement(session)
        pending = [t for job in session.jobs.values()
                   for t in job.tasks_in(TaskStatus.PENDING)]
        running = [t for job in session.jobs.values()
                   for t in job.tasks_in(TaskStatus.RUNNING) if t.node_name in session.nodes]
        for task in self.rng.sample(pending, min(2, len(pending))):
            node = self.rng.choice(session.node_list)
            if self.rng.random() < 0.5:
                statement.allocate(task, node)
            else:
                statement.pipeline(task, node, eviction_occurred=True)
        for task in self.rng.sample(running, min(1, len(running))):
            statement.evict(task, "test")
        if discard:
            statement.discard()
        # otherwise the placements stay in the session and are never committed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), steps=st.lists(st.sampled_from(STEPS), max_size=25))
@example(seed=0, steps=["arrive_huge", "cycle", "cycle", "pipelined_session", "cycle"])
@example(seed=1, steps=["arrive", "discarded_session", "run", "cycle", "delete_node", "cycle"])
def test_incremental_snapshot_matches_a_full_copy(seed: int, steps: list[str]) -> None:
    world = World(seed)
    assert_same(world.cache, world.scheduler.conf)
    for kind in steps:
        world.step(kind)
        assert_same(world.cache, world.scheduler.conf)
