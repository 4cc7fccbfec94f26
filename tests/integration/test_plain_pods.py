"""Plain pods (no PodGroup) are scheduled at once; their PodGroups are written off the loop.

Volcano's controller creates ``podgroup-<uid>`` for such pods; ``lahar run`` does the same from
background threads while the cache schedules the pod under the PodGroup it implies, so a slow
or failing API server delays those writes and never a decision.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from kube_helpers import RunningScheduler, make_node, make_pod, wait_until

from scheduler.api.implied import implied_podgroup
from scheduler.api.types import JobID, TaskID, TaskStatus
from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.podgroups import PodGroupController
from scheduler.cluster.kube.retry import RetryPolicy
from tests.apiserver import ApiServerDouble
from tests.builders import IgnoredWrites

PODGROUPS = "scheduling.volcano.sh/v1beta1/podgroups"
FAST = ("--leader-elect=false", "--schedule-period=50ms")


def plain(name: str, *, cpu: str = "1") -> dict[str, Any]:
    pod = make_pod(name, namespace="team", group="")
    pod["metadata"]["annotations"].pop("scheduling.k8s.io/group-name", None)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return pod


def node_of(apiserver: ApiServerDouble, name: str) -> str:
    return str(((apiserver.get("v1/pods", f"team/{name}") or {}).get("spec") or {})
               .get("nodeName") or "")


def test_a_plain_pod_binds_while_its_podgroup_cannot_be_written(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler]) -> None:
    """Every PodGroup create fails for a while: the pods bind anyway, and once the server
    takes writes again each gets its PodGroup, the annotation, and a Running status."""
    apiserver.create("v1/nodes", make_node("n1", cpu="8"))
    apiserver.fail("POST", "podgroups", 503, times=10_000)
    for i in range(3):
        apiserver.create("v1/pods", plain(f"p{i}"))
    scheduler_runs.append(RunningScheduler("--master", apiserver.url, *FAST))
    wait_until(lambda: all(node_of(apiserver, f"p{i}") == "n1" for i in range(3)),
               timeout=8.0, message="plain pods bound before any PodGroup exists")
    with apiserver.cond:
        assert not apiserver.objects.get(PODGROUPS)
    with apiserver.cond:
        apiserver.faults.clear()
    for i in range(3):
        pod = apiserver.get("v1/pods", f"team/p{i}") or {}
        name = f"podgroup-{pod['metadata']['uid']}"
        wait_until(lambda name=name: apiserver.get(PODGROUPS, f"team/{name}") is not None,
                   timeout=10.0, message=f"PodGroup {name} created once writes succeed")
        wait_until(lambda i=i, name=name: ((apiserver.get("v1/pods", f"team/p{i}") or {})
                                           ["metadata"].get("annotations") or {})
                   .get("scheduling.k8s.io/group-name") == name,
                   timeout=10.0, message="the pod annotated with its PodGroup")
        wait_until(lambda name=name: ((apiserver.get(PODGROUPS, f"team/{name}") or {})
                                      .get("status") or {}).get("phase") == "Running",
                   timeout=10.0, message="the real PodGroup's status written")
    assert scheduler_runs[0].stop() == 0


def test_the_controller_writes_from_its_own_threads(apiserver: ApiServerDouble,
                                                     client: KubeClient,
                                                     stop: threading.Event) -> None:
    pod = apiserver.create("v1/pods", plain("p"))
    groups = PodGroupController(client, ["volcano"], retry=RetryPolicy(attempts=1),
                                retry_after=0.05)
    groups.start(stop)
    apiserver.fail("POST", "podgroups", 503, times=2)  # the first tries fail, later ones not
    groups.observe("ADDED", pod)
    name = implied_podgroup(pod)["metadata"]["name"]
    wait_until(lambda: apiserver.get(PODGROUPS, f"team/{name}") is not None, timeout=5.0,
               message="created after two failures, with nobody calling sync()")
    wait_until(lambda: groups.pending == 0, timeout=5.0, message="served")
    stop.set()
    groups.join(timeout=2.0)


def _cache() -> SchedulerCache:
    cache = SchedulerCache(writer=IgnoredWrites(), clock=time.time, implied_groups=True)
    cache.apply("ADDED", "Queue", {"apiVersion": "scheduling.volcano.sh/v1beta1",
                                   "kind": "Queue", "metadata": {"name": "default"},
                                   "spec": {"weight": 1}})
    return cache


def test_the_cache_holds_the_implied_podgroup_until_the_real_one_comes() -> None:
    cache = _cache()
    pod = plain("p")
    pod["metadata"]["uid"] = "u-1"
    cache.apply("ADDED", "Pod", pod)
    snapshot = cache.snapshot()
    job = next(iter(snapshot.jobs.values()))
    assert job.name == "podgroup-u-1" and len(job.tasks) == 1
    assert job.podgroup.min_resources is not None
    assert job.podgroup.min_resources.milli_cpu == 1000
    assert job.uid in cache.implied
    document = implied_podgroup(pod)
    document["metadata"]["uid"] = "pg-uid"
    cache.apply("ADDED", "PodGroup", document)
    assert job.uid not in cache.implied
    assert cache.podgroups[job.uid].uid == "pg-uid"


def test_an_implied_podgroup_goes_with_its_last_pod() -> None:
    cache = _cache()
    first, second = plain("a"), plain("b")
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1",
             "controller": True}
    for i, pod in enumerate((first, second)):
        pod["metadata"]["uid"] = f"u-{i}"
        pod["metadata"]["ownerReferences"] = [owner]
        cache.apply("ADDED", "Pod", pod)
    assert list(cache.snapshot().jobs) == ["team/podgroup-rs-1"]
    cache.apply("DELETED", "Pod", first)
    assert "team/podgroup-rs-1" in cache.podgroups
    cache.apply("DELETED", "Pod", second)
    assert "team/podgroup-rs-1" not in cache.podgroups
    assert cache.snapshot().jobs == {}


def test_without_the_controller_a_plain_pod_waits_for_a_podgroup() -> None:
    cache = SchedulerCache(writer=IgnoredWrites(), clock=time.time)
    cache.apply("ADDED", "Pod", plain("p"))
    assert cache.snapshot().jobs == {}


def test_the_controller_trickles_while_binds_are_queued(apiserver: ApiServerDouble,
                                                         client: KubeClient,
                                                         stop: threading.Event) -> None:
    """Binds first: while the bind queue is busy, one pod's PodGroup per ``trickle``."""
    binding = [True]
    groups = PodGroupController(client, ["volcano"], yield_to=lambda: binding[0],
                                trickle=3.0)
    groups.start(stop)
    pods = [apiserver.create("v1/pods", plain(f"p{i}")) for i in range(3)]
    for pod in pods:
        groups.observe("ADDED", pod)

    def created() -> int:
        with apiserver.cond:
            return len(apiserver.objects.get(PODGROUPS) or {})

    wait_until(lambda: created() == 1, timeout=5.0, message="one PodGroup while binds wait")
    time.sleep(0.5)
    assert created() == 1
    binding[0] = False  # the next look, a trickle later, finds the binds done
    wait_until(lambda: created() == 3, timeout=10.0, message="the rest once binds are done")
    stop.set()
    groups.join(timeout=2.0)


def test_an_update_from_before_the_bind_keeps_the_pod_placed() -> None:
    """The PodGroup controller's annotation lands while the pod's bind is on its way: the
    watch shows the pod still without a node. The cache keeps the pod Binding on its node
    (else the next cycle places it twice and the second bind fails with 409), then takes the
    bound version. Matches Volcano's ``SchedulerCache.updatePod``, which ignores an update of
    a pod allocated in the cache whose ``spec.nodeName`` is still empty."""
    cache = _cache()
    cache.apply("ADDED", "Node", make_node("n1", cpu="2"))
    pod = plain("p")
    pod["metadata"]["uid"] = "u-1"
    cache.apply("ADDED", "Pod", pod)
    task = next(iter(cache.snapshot().jobs.values())).tasks[TaskID("u-1")]
    task.node_name = "n1"
    cache.bind([task])
    annotated = copy.deepcopy(pod)
    annotated["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "podgroup-u-1"
    cache.apply("MODIFIED", "Pod", annotated)
    snapshot = cache.snapshot()
    placed = snapshot.jobs[JobID("team/podgroup-u-1")].tasks[TaskID("u-1")]
    assert placed.status is TaskStatus.BINDING and placed.node_name == "n1"
    assert next(n for n in snapshot.nodes if n.name == "n1").used.milli_cpu == 1000
    bound = copy.deepcopy(annotated)
    bound["spec"]["nodeName"] = "n1"
    cache.apply("MODIFIED", "Pod", bound)
    snapshot = cache.snapshot()
    placed = snapshot.jobs[JobID("team/podgroup-u-1")].tasks[TaskID("u-1")]
    assert placed.status is not TaskStatus.BINDING and placed.node_name == "n1"
    assert next(n for n in snapshot.nodes if n.name == "n1").used.milli_cpu == 1000


def _bound(pod: dict[str, Any], *, named: str = "") -> dict[str, Any]:
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = "n1"
    bound["status"] = {"phase": "Running"}
    if named:
        bound["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = named
    return bound


def test_a_pod_bound_before_its_turn_still_gets_its_podgroup(apiserver: ApiServerDouble,
                                                              client: KubeClient) -> None:
    """Volcano's controller gives every pod of its schedulers without a group a PodGroup,
    bound or not (``pgcontroller.processNextReq``). A pod bound while the controller yields
    to binds is served afterwards: only the PodGroup when its bind carried the name, the
    PodGroup and the annotation when it did not."""
    binding = [True]
    groups = PodGroupController(client, ["volcano"], yield_to=lambda: binding[0],
                                trickle=30.0)
    carried, plain_bound = (apiserver.create("v1/pods", plain(n)) for n in ("a", "b"))
    groups.observe("ADDED", carried)
    groups.observe("ADDED", plain_bound)
    name_a = implied_podgroup(carried)["metadata"]["name"]
    name_b = implied_podgroup(plain_bound)["metadata"]["name"]
    groups.observe("MODIFIED", _bound(carried, named=name_a))
    groups.observe("MODIFIED", _bound(plain_bound))
    assert groups.pending == 2
    assert groups.sync() == 2
    assert apiserver.get(PODGROUPS, f"team/{name_a}") is not None
    assert apiserver.get(PODGROUPS, f"team/{name_b}") is not None
    patched = [r.path for r in apiserver.requests_to("PATCH", "/pods/")]
    assert patched == ["/api/v1/namespaces/team/pods/b"]


def test_a_pod_naming_its_missing_podgroup_gets_it_after_the_sync(
        apiserver: ApiServerDouble, client: KubeClient) -> None:
    """A bind carried the name, then the scheduler restarted before the PodGroup was
    written: the next one lists the pod naming ``podgroup-<uid>`` and, once its caches have
    synced and hold no such PodGroup, creates it (one that exists is left alone)."""
    synced = [False]
    existing: set[str] = set()
    groups = PodGroupController(client, ["volcano"], synced=lambda: synced[0],
                                known=lambda namespace, name: name in existing)
    lost, kept = (apiserver.create("v1/pods", plain(n)) for n in ("lost", "kept"))
    lost_name = implied_podgroup(lost)["metadata"]["name"]
    kept_name = implied_podgroup(kept)["metadata"]["name"]
    existing.add(kept_name)
    groups.observe("ADDED", _bound(lost, named=lost_name))
    groups.observe("ADDED", _bound(kept, named=kept_name))
    groups.observe("ADDED", _bound(plain("other"), named="a-gang"))
    assert groups.sync() == 0 and groups.pending == 2  # not before the caches synced
    synced[0] = True
    assert groups.sync() == 1 and groups.pending == 0
    assert apiserver.get(PODGROUPS, f"team/{lost_name}") is not None
    assert apiserver.get(PODGROUPS, f"team/{kept_name}") is None
    assert not apiserver.requests_to("PATCH", "/pods/")


def test_a_plain_pods_bind_carries_its_podgroup_name() -> None:
    """The Binding of a pod scheduled under its implied PodGroup names that group (the API
    server applies a Binding's annotations to the pod); a pod naming a group keeps it."""
    cache = _cache()
    cache.apply("ADDED", "Node", make_node("n1", cpu="4"))
    pod = plain("p")
    pod["metadata"]["uid"] = "u-1"
    gang = plain("g")
    gang["metadata"]["uid"] = "u-2"
    gang["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "podgroup-u-1"
    for obj in (pod, gang):
        cache.apply("ADDED", "Pod", obj)
    tasks = cache.snapshot().jobs[JobID("team/podgroup-u-1")].tasks
    for task in tasks.values():
        task.node_name = "n1"
    cache.bind(list(tasks.values()))
    assert cache.tasks[TaskID("u-1")].bind_annotations == {
        "scheduling.k8s.io/group-name": "podgroup-u-1"}
    assert cache.tasks[TaskID("u-2")].bind_annotations == {}
