"""The reflectors' first LISTs sent before the scheduler core is imported (``firstlist.py``).

kube-scheduler starts its informers (their LIST and WATCH) before it waits for their sync and
builds the scheduling loop (``cmd/kube-scheduler/app/server.go``, ``Run``:
``cc.InformerFactory.Start`` then ``WaitForCacheSync``); client-go's reflector sends the first
LIST with ``resourceVersion=0`` (``tools/cache/reflector.go``, ``list``). Here the first page is
sent early and the reflector takes its answer as if it had sent the request itself: one LIST
per collection, not two, and everything after it (pages, 404 of an optional CRD, errors,
the watch's start version) as before.
"""

from __future__ import annotations

import json
import random
import threading
import time

import pytest
from kube_helpers import Recorder, RunningScheduler, make_node, make_pod, wait_until

from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.firstlist import send_first_lists
from scheduler.cluster.kube.reflector import DEVICES as DEVICE_SPEC
from scheduler.cluster.kube.reflector import NODES, PODS, RESOURCES, Reflector
from tests.apiserver import ApiServerDouble


def lists_of(apiserver: ApiServerDouble, path: str = r"/api/v1/nodes$") -> list[dict]:
    return [r.query for r in apiserver.requests_to("GET", path) if not r.query.get("watch")]


def start(client: KubeClient, stop: threading.Event, recorder: Recorder, *, spec=NODES,
          **options: object) -> Reflector:
    reflector = Reflector(client=client, resource=spec, handler=recorder,
                          backoff_initial=0.01, backoff_max=0.05, rng=random.Random(3),
                          **options)  # type: ignore[arg-type]
    reflector.start(stop)
    wait_until(lambda: reflector.has_synced, message="initial list")
    return reflector


def test_the_early_page_is_taken_and_the_watch_starts_from_its_version(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    apiserver.create("v1/nodes", make_node("n2"))
    listed_at = str(apiserver.resource_version)
    first = send_first_lists(client, [NODES])
    sent = first.take(NODES.path)
    assert sent is not None and first.take(NODES.path) is None  # taken once
    wait_until(lambda: sent.done, message="early list answered")
    apiserver.create("v1/nodes", make_node("n3"))  # after the list: must come by the watch

    recorder = Recorder()
    reflector = start(client, stop, recorder, first_page=sent)
    assert recorder.wait_for(3) == [("ADDED", "n1"), ("ADDED", "n2"), ("ADDED", "n3")]
    assert lists_of(apiserver) == [{"limit": "500", "resourceVersion": "0"}]
    watches = [r.query for r in apiserver.requests_to("GET", r"/api/v1/nodes$")
               if r.query.get("watch")]
    assert watches[0]["resourceVersion"] == listed_at
    assert reflector.lists == 1


def test_after_the_early_page_a_410_relists_in_pages_from_etcd(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    for i in range(5):
        apiserver.create("v1/nodes", make_node(f"n{i}"))
    first = send_first_lists(client, [NODES], page_size=2)
    recorder = Recorder()
    reflector = start(client, stop, recorder, page_size=2, first_page=first.take(NODES.path))
    assert sorted(name for _, name in recorder.wait_for(5)) == [f"n{i}" for i in range(5)]
    # resourceVersion=0 is answered whole from the watch cache, whatever the limit
    assert lists_of(apiserver) == [{"limit": "2", "resourceVersion": "0"}]
    with apiserver.watches_held():
        apiserver.create("v1/nodes", make_node("n5"))
        apiserver.compact(as_event=True)
    wait_until(lambda: reflector.lists == 2, message="re-list after 410")
    relist = lists_of(apiserver)[1:]
    assert [q.get("limit") for q in relist] == ["2", "2", "2"]
    assert all("resourceVersion" not in q for q in relist)
    assert reflector.keys()[-1] == "n5"


def test_a_page_sent_with_another_query_is_not_used(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    for i in range(3):
        apiserver.create("v1/nodes", make_node(f"n{i}"))
    first = send_first_lists(client, [NODES], page_size=1)
    recorder = Recorder()
    start(client, stop, recorder, first_page=first.take(NODES.path))  # page size 500
    assert recorder.wait_for(3) == [("ADDED", "n0"), ("ADDED", "n1"), ("ADDED", "n2")]
    queries = lists_of(apiserver)
    assert {"limit": "500", "resourceVersion": "0"} in queries  # the reflector's own


def test_an_early_404_of_an_optional_crd_counts_as_synced(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    first = send_first_lists(client, [DEVICE_SPEC])
    recorder = Recorder()
    reflector = start(client, stop, recorder, spec=DEVICE_SPEC,
                      first_page=first.take(DEVICE_SPEC.path))
    assert reflector.lists == 0 and recorder.events == []
    assert len(lists_of(apiserver, r"/devices$")) == 1


def test_an_early_failure_backs_off_and_lists_again(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    apiserver.fail("GET", r"/api/v1/nodes$", 503, times=1, watch=False)
    first = send_first_lists(client, [NODES])
    recorder = Recorder()
    start(client, stop, recorder, first_page=first.take(NODES.path))
    assert recorder.wait_for(1) == [("ADDED", "n1")]
    assert len(lists_of(apiserver)) == 2


def test_pages_not_taken_in_time_are_dropped(
        apiserver: ApiServerDouble, client: KubeClient) -> None:
    first = send_first_lists(client, [NODES, PODS], keep_for=0.05)
    wait_until(lambda: len(first) == 0, timeout=5.0, message="dropped")
    assert first.take(NODES.path) is None


def test_lahar_run_lists_each_collection_once_before_its_watch(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler]) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    apiserver.create("scheduling.volcano.sh/v1beta1/podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg1", "namespace": "team"},
        "spec": {"minMember": 1, "queue": "default"}})
    apiserver.create("v1/pods", make_pod("p1", namespace="team", group="pg1"))
    run = RunningScheduler("--master", apiserver.url, "--leader-elect=false",
                           "--schedule-period=50ms")
    scheduler_runs.append(run)
    wait_until(lambda: (apiserver.get("v1/pods", "team/p1") or {})
               .get("spec", {}).get("nodeName") == "n1", timeout=15.0, message="bind")
    time.sleep(0.2)
    for spec in RESOURCES:
        path = spec.path.replace(".", r"\.") + "$"
        assert len(lists_of(apiserver, path)) == 1, spec.plural
    assert run.stop() == 0


def test_lahar_run_sends_the_first_lists_while_its_conf_loads(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler],
        monkeypatch: object) -> None:
    """Loading the conf imports the plugins, the actions, the framework and numpy; the LISTs
    are on their way before it ends (before this change they left after it)."""
    import scheduler.conf

    load_conf = scheduler.conf.load_conf
    listed_during_load: list[bool] = []

    def slow_load(*args: object, **kwargs: object) -> object:
        if not listed_during_load:
            wait = time.monotonic() + 5.0
            while not lists_of(apiserver, r"/api/v1/pods$") and time.monotonic() < wait:
                time.sleep(0.01)
            listed_during_load.append(bool(lists_of(apiserver, r"/api/v1/pods$")))
        return load_conf(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(scheduler.conf, "load_conf", slow_load)  # type: ignore[attr-defined]
    apiserver.create("v1/nodes", make_node("n1"))
    run = RunningScheduler("--master", apiserver.url, "--leader-elect=false",
                           "--schedule-period=50ms")
    scheduler_runs.append(run)
    wait_until(lambda: bool(listed_during_load), timeout=10.0, message="conf loaded")
    assert listed_during_load == [True]
    assert run.stop() == 0


def test_the_start_up_line_counts_from_the_process_start() -> None:
    """One ``start-up`` log line with the seconds from the process start (``/proc``, so the
    interpreter and the imports count) to each step, however often it is asked for."""
    import structlog

    from scheduler.cluster.kube.startuplog import StartupTimes, process_age

    age = process_age()
    assert age is not None and 0 < age < 24 * 3600
    times = StartupTimes()
    times.mark("lists_sent", at=time.monotonic() - 0.5)
    times.mark("synced")
    times.mark("synced")  # the first mark of a step stays
    with structlog.testing.capture_logs() as logs:
        times.report()
        times.report()
    assert [entry["event"] for entry in logs] == ["start-up"]
    marks = logs[0]["seconds_since_process_start"]
    assert list(marks) == ["lists_sent", "synced"]
    assert age - 0.6 <= marks["lists_sent"] <= marks["synced"] - 0.5 + 0.01


def test_a_standby_drops_the_early_pages_and_lists_again_once_it_leads(
        apiserver: ApiServerDouble, scheduler_runs: list[RunningScheduler],
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A replica waiting for the Lease does not hold a copy of the cluster: its early pages
    go after ``FIRST_LISTS_KEPT`` seconds, and when it leads it sends the first LISTs again
    (before importing the cache and the loop, as at a start)."""
    import scheduler.cluster.kube.run as run_module
    from scheduler.cluster.kube.leader import micro_time

    monkeypatch.setattr(run_module, "FIRST_LISTS_KEPT", 0.05)
    apiserver.create("coordination.k8s.io/v1/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "volcano", "namespace": "volcano-system"},
        "spec": {"holderIdentity": "gone_0", "leaseDurationSeconds": 1,
                 "renewTime": micro_time(0.0), "leaseTransitions": 1}})
    apiserver.create("v1/nodes", make_node("n1"))
    apiserver.create("scheduling.volcano.sh/v1beta1/podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg1", "namespace": "team"},
        "spec": {"minMember": 1, "queue": "default"}})
    apiserver.create("v1/pods", make_pod("p1", namespace="team", group="pg1"))
    run = RunningScheduler("--master", apiserver.url, "--leader-elect=true",
                           "--leader-elect-retry-period=200ms", "--schedule-period=50ms")
    scheduler_runs.append(run)
    wait_until(lambda: (apiserver.get("v1/pods", "team/p1") or {})
               .get("spec", {}).get("nodeName") == "n1", timeout=20.0, message="bind")
    assert len(lists_of(apiserver, r"/api/v1/pods$")) == 2  # dropped, then sent again
    assert run.stop() == 0
    captured = capfd.readouterr()
    lines = [json.loads(line) for line in (captured.out + captured.err).splitlines()
             if '"start-up"' in line]
    marks = lines[0]["seconds_since_process_start"]
    assert marks["leading"] <= marks["lists_sent"] <= marks["imported"]
