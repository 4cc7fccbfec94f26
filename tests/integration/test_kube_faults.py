"""``lahar run`` against the API double when things go wrong, and what it writes when they go right.

API server unreachable at start, a lost Lease, binds refused by the server, objects with broken
fields; plus the conditions, events, statuses and ``volcano_*`` metrics of an ordinary run.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kube_helpers import RunningScheduler, free_port, make_node, make_pod, wait_until

from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.reflector import DEVICES, Reflector
from tests.apiserver import DEVICES as DEVICE_COLLECTION
from tests.apiserver import ApiServerDouble

PODGROUPS = "scheduling.volcano.sh/v1beta1/podgroups"
FAST = ("--leader-elect=false", "--schedule-period=50ms")


def podgroup(name: str, *, namespace: str = "team", min_member: int = 1) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member, "queue": "default"}}


def pod(name: str, *, cpu: str = "1", group: str = "pg1") -> dict[str, Any]:
    manifest = make_pod(name, namespace="team", group=group)
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    return manifest


def node_of(apiserver: ApiServerDouble, name: str) -> str:
    return str(((apiserver.get("v1/pods", f"team/{name}") or {}).get("spec") or {})
               .get("nodeName") or "")


def events(apiserver: ApiServerDouble, *, reason: str, name: str) -> list[dict[str, Any]]:
    with apiserver.cond:
        stored = list(apiserver.objects["v1/events"].values())
    return [e for e in stored if e["reason"] == reason and e["involvedObject"]["name"] == name]


def test_unreachable_api_server_is_retried_with_readyz_false(
        scheduler_runs: list[RunningScheduler]) -> None:
    port = free_port()  # nothing listens there yet
    run = RunningScheduler("--master", f"http://127.0.0.1:{port}", *FAST)
    scheduler_runs.append(run)
    wait_until(lambda: run.status("/healthz") == 200, message="healthz")
    time.sleep(0.6)
    assert run.status("/readyz") == 503
    assert run.thread.is_alive()
    with ApiServerDouble(port=port) as apiserver:
        apiserver.create("v1/nodes", make_node("n1"))
        apiserver.create(PODGROUPS, podgroup("pg1"))
        apiserver.create("v1/pods", pod("p1"))
        wait_until(lambda: run.status("/readyz") == 200, timeout=20.0, message="readyz")
        wait_until(lambda: node_of(apiserver, "p1") == "n1", timeout=5.0, message="bind")
        assert run.stop() == 0


def test_losing_the_lease_stops_the_process_with_exit_code_1(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler]) -> None:
    run = RunningScheduler("--master", apiserver.url, "--schedule-period=50ms",
                           "--leader-elect-lease-duration=1s",
                           "--leader-elect-renew-deadline=600ms",
                           "--leader-elect-retry-period=100ms")
    scheduler_runs.append(run)
    leases = "coordination.k8s.io/v1/leases"
    wait_until(lambda: apiserver.get(leases, "volcano-system/volcano") is not None,
               timeout=5.0, message="lease")
    wait_until(lambda: run.status("/readyz") == 200, timeout=5.0, message="leading and synced")
    stolen = apiserver.get(leases, "volcano-system/volcano")
    assert stolen is not None
    stolen["spec"].update(holderIdentity="someone-else", renewTime="2030-01-01T00:00:00.000000Z")
    apiserver.update(leases, stolen)
    assert run.wait_exit(timeout=10.0) == 1


def test_refused_bind_is_rolled_back_reported_and_resynced(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler]) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    apiserver.create(PODGROUPS, podgroup("pg1"))
    apiserver.create("v1/pods", pod("p1"))
    apiserver.fail("POST", r"/pods/p1/binding$", 500, times=5)  # every retry of the first bind
    run = RunningScheduler("--master", apiserver.url, *FAST)
    scheduler_runs.append(run)
    wait_until(lambda: node_of(apiserver, "p1") == "n1", timeout=15.0, message="bind")
    assert len(apiserver.requests_to("POST", r"/pods/p1/binding$")) == 6
    condition_patches = [r.body["status"]["conditions"][0]
                         for r in apiserver.requests_to("PATCH", r"/pods/p1/status$")]
    assert any(c["reason"] == "SchedulerError"
               and c["message"].startswith("failed to bind to node n1: ")
               for c in condition_patches)
    assert events(apiserver, reason="FailedScheduling", name="p1")
    assert apiserver.requests_to("GET", r"^/api/v1/namespaces/team/pods/p1$")  # re-read
    wait_until(lambda: bool(events(apiserver, reason="Scheduled", name="p1")),
               message="Scheduled event")
    (scheduled,) = events(apiserver, reason="Scheduled", name="p1")
    assert scheduled["message"] == "Successfully assigned team/p1 to n1"
    assert run.stop() == 0


def test_broken_objects_are_reported_by_name_and_never_stop_scheduling(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler]) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    broken_node = make_node("n-broken")
    broken_node["status"]["allocatable"]["cpu"] = "lots"
    apiserver.create("v1/nodes", broken_node)
    apiserver.create(PODGROUPS, podgroup("pg1"))
    apiserver.create(PODGROUPS, podgroup("pg-bad", min_member=1))
    apiserver.create("v1/pods", pod("bad-quantity", cpu="1x", group="pg-bad"))
    weird = pod("bad-shape", group="pg-bad")
    weird["spec"]["affinity"] = {"nodeAffinity": "anywhere"}
    apiserver.create("v1/pods", weird)
    apiserver.create("v1/pods", pod("good"))
    run = RunningScheduler("--master", apiserver.url, *FAST)
    scheduler_runs.append(run)
    wait_until(lambda: node_of(apiserver, "good") == "n1", timeout=8.0, message="good pod bound")
    # Events are written by a background recorder, in no promised order: wait for each.
    wait_until(lambda: bool(events(apiserver, reason="FailedScheduling", name="bad-shape")),
               message="event on the unreadable pod")
    wait_until(lambda: bool(events(apiserver, reason="FailedScheduling", name="bad-quantity")),
               message="event on the pod with a bad quantity")
    wait_until(lambda: bool(events(apiserver, reason="Invalid", name="n-broken")),
               message="event on the broken node")
    (quantity,) = events(apiserver, reason="FailedScheduling", name="bad-quantity")
    assert "Pod team/bad-quantity" in quantity["message"]
    assert "'1x' is not a valid quantity" in quantity["message"]
    (node_event,) = events(apiserver, reason="Invalid", name="n-broken")
    assert "Node n-broken: field status.allocatable" in node_event["message"]
    # Fixing the pod brings it back: nothing was dropped.
    fixed = apiserver.get("v1/pods", "team/bad-quantity")
    assert fixed is not None
    fixed["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    apiserver.update("v1/pods", fixed)
    wait_until(lambda: node_of(apiserver, "bad-quantity") == "n1", timeout=8.0,
               message="fixed pod bound")
    assert run.thread.is_alive()
    assert run.stop() == 0


def test_run_writes_conditions_events_statuses_and_metrics(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler]) -> None:
    apiserver.create("v1/nodes", make_node("n1", cpu="4"))
    apiserver.create(PODGROUPS, podgroup("fits", min_member=2))
    apiserver.create(PODGROUPS, podgroup("too-big"))
    apiserver.create("v1/pods", pod("fits-0", group="fits"))
    apiserver.create("v1/pods", pod("fits-1", group="fits"))
    apiserver.create("v1/pods", pod("huge", cpu="100", group="too-big"))
    run = RunningScheduler("--master", apiserver.url, *FAST)
    scheduler_runs.append(run)
    wait_until(lambda: node_of(apiserver, "fits-0") == node_of(apiserver, "fits-1") == "n1",
               timeout=8.0, message="gang bound")

    def huge_condition() -> dict[str, Any]:
        status = (apiserver.get("v1/pods", "team/huge") or {}).get("status") or {}
        return next((c for c in status.get("conditions") or []
                     if c["type"] == "PodScheduled"), {})

    wait_until(lambda: huge_condition().get("status") == "False", timeout=5.0,
               message="PodScheduled=False on the pod that does not fit")
    assert huge_condition()["reason"] == "Unschedulable"
    assert huge_condition()["message"].startswith("0/1 nodes are unavailable: ")
    assert "Insufficient cpu" in huge_condition()["message"]
    wait_until(lambda: bool(events(apiserver, reason="FailedScheduling", name="huge")),
               message="FailedScheduling event")
    (failed,) = events(apiserver, reason="FailedScheduling", name="huge")
    assert failed["type"] == "Warning" and failed["source"]["component"] == "volcano"
    assert failed["message"] == huge_condition()["message"]
    wait_until(lambda: bool(events(apiserver, reason="Scheduled", name="fits-1")),
               message="Scheduled event")
    wait_until(lambda: ((apiserver.get(PODGROUPS, "team/too-big") or {}).get("status") or {})
               .get("phase") in ("Pending", "Inqueue"), message="PodGroup status written")
    wait_until(lambda: bool(events(apiserver, reason="Unschedulable", name="too-big")),
               message="PodGroup Unschedulable event")
    queue = apiserver.get("scheduling.volcano.sh/v1beta1/queues", "default")
    assert queue is not None
    wait_until(lambda: bool(((apiserver.get("scheduling.volcano.sh/v1beta1/queues", "default")
                              or {}).get("status") or {}).get("allocated")),
               message="queue status.allocated")
    time.sleep(0.2)  # a few more cycles
    body = run.metrics()
    for series in ("volcano_e2e_scheduling_latency_milliseconds_count",
                   'volcano_action_scheduling_latency_milliseconds_count{action="allocate"}',
                   'volcano_plugin_scheduling_latency_milliseconds_count{OnSession="OnSessionOpen",plugin="gang"}',
                   'volcano_plugin_scheduling_latency_milliseconds_count{OnSession="OnSessionClose",plugin="proportion"}',
                   'volcano_schedule_attempts_total{result="scheduled"}',
                   'volcano_schedule_attempts_total{result="unschedulable"}',
                   'volcano_unschedule_task_count{job_id="too-big"} 1.0',
                   'volcano_unschedule_task_count{job_id="fits"} 0.0',
                   "volcano_unschedule_job_count 1.0",
                   'volcano_queue_weight{queue_name="default"} 1.0',
                   'volcano_queue_allocated_milli_cpu{queue_name="default"} 2000.0'):
        assert series in body, series
    # Conditions and events are written when they change, not every cycle.
    assert len(events(apiserver, reason="FailedScheduling", name="huge")) == 1
    assert events(apiserver, reason="FailedScheduling", name="huge")[0]["count"] == 1
    assert run.stop() == 0


def test_device_objects_reach_the_cache_when_the_crd_is_served(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    apiserver.serve(DEVICE_COLLECTION)
    apiserver.create(DEVICE_COLLECTION, {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
        "metadata": {"name": "n1"},
        "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True,
                              "resources": {"koordinator.sh/gpu-memory": "80Gi"}}]}})

    class Nothing:
        def __getattr__(self, name: str) -> Any:
            return lambda **_: None

    cache = SchedulerCache(writer=Nothing(), clock=time.time)
    reflector = Reflector(client=client, resource=DEVICES,
                          handler=lambda event, obj: cache.apply(event, "Device", obj))
    reflector.start(stop)
    wait_until(lambda: "n1" in cache.device_objects, message="Device in the cache")
    apiserver.delete(DEVICE_COLLECTION, "n1")
    wait_until(lambda: "n1" not in cache.device_objects, message="Device gone")


def test_plain_pods_get_a_podgroup_and_are_scheduled(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler]) -> None:
    apiserver.create("v1/nodes", make_node("n1", cpu="4"))
    plain = pod("plain", group="")
    plain["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "default"
    plain["spec"]["priorityClassName"] = "high"
    apiserver.create("v1/pods", plain)
    apiserver.create("v1/pods", pod("other-scheduler", group="") | {
        "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c"}]}})
    run = RunningScheduler("--master", apiserver.url, *FAST)
    scheduler_runs.append(run)
    wait_until(lambda: node_of(apiserver, "plain") == "n1", timeout=8.0,
               message="plain pod bound")
    stored = apiserver.get("v1/pods", "team/plain") or {}
    group = stored["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
    assert group == f"podgroup-{stored['metadata']['uid']}"
    wait_until(lambda: apiserver.get(PODGROUPS, f"team/{group}") is not None, timeout=8.0,
               message="its PodGroup written (binds first)")
    podgroup = apiserver.get(PODGROUPS, f"team/{group}") or {}
    assert podgroup["spec"]["minMember"] == 1
    assert podgroup["spec"]["queue"] == "default"
    assert podgroup["spec"]["priorityClassName"] == "high"
    assert podgroup["spec"]["minResources"] == {"cpu": "1", "memory": "1Gi"}
    assert podgroup["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    # A pod of another scheduler is left alone.
    other = apiserver.get("v1/pods", "team/other-scheduler") or {}
    assert "scheduling.k8s.io/group-name" not in (other["metadata"].get("annotations") or {})
    assert run.stop() == 0
