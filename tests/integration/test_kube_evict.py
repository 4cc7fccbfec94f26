"""Evictions against the API server double, through the cache, the writer and the watch.

A test-only action evicts a bound victim and pipelines the preemptor, as the preempt and
reclaim actions do; the session's writes then go to the double exactly as ``lahar run``
sends them: the ``DisruptionTarget`` condition (kube-scheduler's ``PrepareCandidate``), the
Eviction API, Volcano's ``Evict`` events (``SchedulerCache.Evict``), the preemptor's
``nominatedNodeName`` (``taskUnschedulable``), and a rollback plus resync when the API server
refuses (``resyncTask``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kube_helpers import make_node, make_pod, wait_until

from scheduler import metrics
from scheduler.api.types import TaskStatus
from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.reflector import RESOURCES, Reflector, ReflectorGroup
from scheduler.cluster.kube.retry import RetryPolicy
from scheduler.cluster.kube.writer import KubeClusterWriter
from scheduler.conf import load_conf
from scheduler.loop import Scheduler
from tests.apiserver import ApiServerDouble
from tests.scenarios.test_evict import EvictFor

PODGROUPS = "scheduling.volcano.sh/v1beta1/podgroups"
FAST = RetryPolicy(attempts=3, initial_wait=0.001, max_wait=0.01)


@dataclasses.dataclass
class Clock:
    now: float = 1_767_225_600.0

    def __call__(self) -> float:
        return self.now


@dataclasses.dataclass
class Mirror:
    cache: SchedulerCache
    scheduler: Scheduler
    clock: Clock

    def evict_once(self, reason: str = "preempt") -> None:
        """One session whose only action evicts ``victim`` for ``preemptor``, then its writes."""
        default = self.scheduler.conf
        self.scheduler.actions[EvictFor.NAME] = EvictFor("victim", "preemptor", reason)
        self.scheduler.set_conf(dataclasses.replace(default, actions=(EvictFor.NAME,)))
        self.scheduler.run_once()
        self.cache.flush()
        self.scheduler.set_conf(default)

    def cycle(self) -> None:
        self.scheduler.run_once()
        self.cache.flush()

    def task(self, name: str) -> Any:
        with self.cache.lock:
            return next((t for t in self.cache.tasks.values() if t.name == name), None)


def podgroup(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"minMember": 1, "queue": "default"}}


def pod(name: str, *, group: str, node: str = "") -> dict[str, Any]:
    manifest = make_pod(name, namespace="team", group=group, node=node)
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4", "memory": "1Gi"}}
    if node:
        manifest["status"] = {"phase": "Running"}
    return manifest


@pytest.fixture
def mirror(apiserver: ApiServerDouble, client: KubeClient,
           stop: threading.Event) -> Iterator[Mirror]:
    apiserver.create("scheduling.volcano.sh/v1beta1/queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "default"}, "spec": {"weight": 1}})
    apiserver.create("v1/nodes", make_node("n1", cpu="4"))
    apiserver.create(PODGROUPS, podgroup("low"))
    apiserver.create(PODGROUPS, podgroup("high"))
    apiserver.create("v1/pods", pod("victim", group="low", node="n1"))
    apiserver.create("v1/pods", pod("preemptor", group="high"))
    clock = Clock()
    writer = KubeClusterWriter(client, scheduler_name="volcano", retry=FAST, clock=clock)
    cache = SchedulerCache(writer=writer, clock=clock)

    def feed(kind: str) -> Any:
        return lambda event, obj: cache.apply(event, kind, obj)

    reflectors = ReflectorGroup([Reflector(client=client, resource=spec, handler=feed(spec.kind))
                                 for spec in RESOURCES])
    reflectors.start(stop)
    assert reflectors.wait_for_sync(stop, timeout=5.0)
    scheduler = Scheduler(cache=cache, conf=load_conf(None), clock=clock)
    state = Mirror(cache=cache, scheduler=scheduler, clock=clock)
    wait_until(lambda: state.task("victim") is not None and state.task("preemptor") is not None
               and bool(cache.queues), message="objects in the cache")
    try:
        yield state
    finally:
        stop.set()
        reflectors.interrupt()
        reflectors.join(timeout=5.0)


def events(apiserver: ApiServerDouble, reason: str, name: str) -> list[dict[str, Any]]:
    with apiserver.cond:
        stored = list(apiserver.objects["v1/events"].values())
    return [e for e in stored if e["reason"] == reason and e["involvedObject"]["name"] == name]


def test_eviction_of_a_bound_pod_marks_it_then_uses_the_eviction_api(
        apiserver: ApiServerDouble, mirror: Mirror) -> None:
    victim_uid = mirror.task("victim").uid
    mirror.evict_once()

    paths = [(r.method, r.path) for r in apiserver.requests
             if "/pods/victim" in r.path and r.method != "GET"]
    assert paths == [("PATCH", "/api/v1/namespaces/team/pods/victim/status"),
                     ("POST", "/api/v1/namespaces/team/pods/victim/eviction")]
    (patch,) = apiserver.requests_to("PATCH", r"/pods/victim/status$")
    disruption = {c["type"]: c for c in patch.body["status"]["conditions"]}["DisruptionTarget"]
    assert (disruption["status"], disruption["reason"]) == ("True", "PreemptionByScheduler")
    (eviction,) = apiserver.requests_to("POST", r"/pods/victim/eviction$")
    assert eviction.body["deleteOptions"]["preconditions"]["uid"] == victim_uid
    assert apiserver.get("v1/pods", "team/victim") is None

    (evicted,) = events(apiserver, "Evict", "victim")
    assert (evicted["type"], evicted["message"]) == ("Warning", "Pod is evicted, because of preempt")
    assert evicted["related"]["kind"] == "Pod" and evicted["related"]["name"] == "preemptor"
    (group_event,) = events(apiserver, "Evict", "low")
    assert (group_event["type"], group_event["message"]) == ("Normal", "preempt")
    assert group_event["involvedObject"]["kind"] == "PodGroup"

    preemptor = apiserver.get("v1/pods", "team/preemptor") or {}
    assert preemptor["status"]["nominatedNodeName"] == "n1"
    wait_until(lambda: mirror.task("victim") is None, message="the deletion through the watch")
    wait_until(lambda: mirror.task("preemptor").nominated_node == "n1",
               message="the nomination through the watch")
    mirror.cycle()
    assert (apiserver.get("v1/pods", "team/preemptor") or {})["spec"]["nodeName"] == "n1"


def test_nomination_is_written_once_and_never_cleared(
        apiserver: ApiServerDouble, mirror: Mirror) -> None:
    apiserver.graceful_evictions = True  # the victim takes a while to terminate
    mirror.evict_once()
    wait_until(lambda: mirror.task("victim").status is TaskStatus.RELEASING,
               message="the victim terminating")
    wait_until(lambda: mirror.task("preemptor").nominated_node == "n1",
               message="the nomination through the watch")
    nominations = [r for r in apiserver.requests_to("PATCH", r"/pods/preemptor/status$")
                   if "nominatedNodeName" in r.body["status"]]
    assert len(nominations) == 1
    # While the victim terminates the preemptor waits, pipelined on its nominated node.
    mirror.cycle()
    mirror.cycle()
    preemptor = apiserver.get("v1/pods", "team/preemptor") or {}
    assert "nodeName" not in preemptor["spec"]
    assert preemptor["status"]["nominatedNodeName"] == "n1"
    assert [r for r in apiserver.requests_to("PATCH", r"/pods/preemptor/status$")
            if "nominatedNodeName" in r.body["status"]] == nominations
    apiserver.delete("v1/pods", "team/victim")  # the kubelet is done
    wait_until(lambda: mirror.task("victim") is None, message="the victim gone")
    mirror.cycle()
    assert (apiserver.get("v1/pods", "team/preemptor") or {})["spec"]["nodeName"] == "n1"


@pytest.mark.parametrize("status", [429, 500])
def test_refused_eviction_is_rolled_back_and_resynced(
        apiserver: ApiServerDouble, mirror: Mirror, status: int) -> None:
    if status == 429:
        apiserver.pdb_blocked.add("team/victim")
    else:
        apiserver.fail("POST", r"/pods/victim/eviction$", 500, times=FAST.attempts)
    # Watches wait, so the rollback and the resync are seen before any watch event.
    with apiserver.watches_held():
        mirror.evict_once()
        attempts = apiserver.requests_to("POST", r"/pods/victim/eviction$")
        assert len(attempts) == (1 if status == 429 else FAST.attempts)  # a PDB answer is final
        assert apiserver.get("v1/pods", "team/victim") is not None
        assert events(apiserver, "Evict", "victim") == []
        victim = mirror.task("victim")
        assert victim is not None and victim.status is TaskStatus.RUNNING
        with mirror.cache.lock:
            assert mirror.cache.nodes["n1"].idle.milli_cpu == 0  # the victim holds n1 again
            assert mirror.cache.resync.waiting("team/victim")
        reads = apiserver.requests_to("GET", r"^/api/v1/namespaces/team/pods/victim$")
        mirror.clock.now += 1.0  # past the first backoff
        mirror.cache.flush()
        again = apiserver.requests_to("GET", r"^/api/v1/namespaces/team/pods/victim$")
        assert len(again) == len(reads) + 1
        with mirror.cache.lock:
            assert not mirror.cache.resync.waiting("team/victim")
        victim = mirror.task("victim")
        assert victim.status is TaskStatus.RUNNING
        # The re-read version carries the condition written before the refused eviction.
        conditions = victim.pod["status"]["conditions"]
        assert any(c["type"] == "DisruptionTarget" for c in conditions)


def test_preemption_metrics_keep_volcanos_names() -> None:
    """Volcano ``metrics.go``: ``volcano_total_preemption_attempts`` has no ``_total``
    suffix; ``volcano_pod_preemption_victims`` is a gauge of the latest choice."""

    def sample(body: str, name: str) -> float:
        line = next(line for line in body.splitlines() if line.startswith(f"{name} "))
        return float(line.split()[1])

    before = sample(metrics.exposition().decode(), "volcano_total_preemption_attempts")
    metrics.record_preemption_attempt()
    metrics.record_preemption_attempt()
    metrics.record_victims(3)
    body = metrics.exposition().decode()
    assert sample(body, "volcano_total_preemption_attempts") == before + 2
    assert "volcano_total_preemption_attempts_total" not in body
    assert sample(body, "volcano_pod_preemption_victims") == 3.0
    metrics.record_victims(1)
    assert sample(metrics.exposition().decode(), "volcano_pod_preemption_victims") == 1.0


def test_unschedule_counts_follow_volcanos_gang_plugin() -> None:
    """Volcano gang ``OnSessionClose``: ``unschedule_task_count{job_id=<PodGroup name>}`` is
    minAvailable minus ready tasks for a job that is not ready, 0 for one that is, and
    ``unschedule_job_count`` counts the jobs that are not."""
    from scheduler.cluster.kube.cyclemetrics import record_cycle
    from scheduler.cluster.manifests import Manifest
    from scheduler.cluster.simulation import build_simulation
    from tests.builders import gang
    from tests.builders import make_node as sim_node

    objects = [sim_node("n1", cpu="4"), *gang("stuck", 3, cpu="2"),
               *gang("elastic", 4, min_member=1, cpu="1")]
    manifests = [Manifest(f"test#{i}", obj) for i, obj in enumerate(objects)]
    _, cache, scheduler = build_simulation(manifests, conf=load_conf(None))
    record_cycle(scheduler.run_once(), cache)
    body = metrics.exposition().decode()
    assert 'volcano_unschedule_task_count{job_id="stuck"} 3.0' in body
    assert 'volcano_unschedule_task_count{job_id="elastic"} 0.0' in body
    assert "volcano_unschedule_job_count 1.0" in body
