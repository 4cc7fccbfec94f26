"""Reflector contract: list, watch, bookmarks, 410 re-list, resume after a dropped watch."""

from __future__ import annotations

import random
import threading

import pytest
from kube_helpers import Recorder, make_node, make_pod, wait_until

from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.reflector import (
    DEVICES as DEVICE_SPEC,
)
from scheduler.cluster.kube.reflector import (
    NODES,
    PODS,
    Reflector,
    ReflectorGroup,
)
from tests.apiserver import DEVICES, ApiServerDouble


def start(client: KubeClient, stop: threading.Event, recorder: Recorder, spec=NODES,
          **options: object) -> Reflector:
    reflector = Reflector(client=client, resource=spec, handler=recorder,
                          backoff_initial=0.01, backoff_max=0.05, rng=random.Random(7),
                          **options)  # type: ignore[arg-type]
    reflector.start(stop)
    wait_until(lambda: reflector.has_synced, message="initial list")
    return reflector


def watch_requests(apiserver: ApiServerDouble, path: str = r"/api/v1/nodes$") -> list[dict]:
    return [r.query for r in apiserver.requests_to("GET", path) if r.query.get("watch")]


def test_list_then_watch_delivers_events_and_tracks_bookmarks(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    apiserver.create("v1/nodes", make_node("n2"))
    listed_at = str(apiserver.resource_version)
    recorder = Recorder()
    reflector = start(client, stop, recorder)

    assert recorder.wait_for(2) == [("ADDED", "n1"), ("ADDED", "n2")]
    assert recorder.objects[0]["kind"] == "Node"  # filled in although the list item lacks it
    assert reflector.resource_version == listed_at
    wait_until(lambda: bool(watch_requests(apiserver)), message="watch request")
    first_watch = watch_requests(apiserver)[0]
    assert first_watch["resourceVersion"] == listed_at
    assert first_watch["allowWatchBookmarks"] == "true"
    assert int(first_watch["timeoutSeconds"]) > 0

    apiserver.create("v1/nodes", make_node("n3"))
    changed = apiserver.get("v1/nodes", "n1")
    assert changed is not None
    changed["metadata"]["labels"] = {"zone": "a"}
    apiserver.update("v1/nodes", changed)
    apiserver.delete("v1/nodes", "n2")
    assert recorder.wait_for(5)[2:] == [("ADDED", "n3"), ("MODIFIED", "n1"), ("DELETED", "n2")]
    assert recorder.objects[3]["metadata"]["labels"] == {"zone": "a"}
    assert reflector.keys() == ["n1", "n3"]
    assert reflector.resource_version == str(apiserver.resource_version)

    bookmark = apiserver.bookmark()
    wait_until(lambda: reflector.resource_version == str(bookmark), message="bookmark")
    assert len(recorder.events) == 5  # bookmarks are not delivered to the handler
    assert reflector.lists == 1


@pytest.mark.parametrize("as_event", [True, False], ids=["error-event-410", "http-410"])
def test_gone_relists_and_diffs_against_what_was_delivered(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event,
        as_event: bool) -> None:
    for name in ("keep", "vanish", "recreate"):
        apiserver.create("v1/nodes", make_node(name))
    recorder = Recorder()
    reflector = start(client, stop, recorder)
    recorder.wait_for(3)
    old_uid = apiserver.get("v1/nodes", "recreate")["metadata"]["uid"]  # type: ignore[index]
    recorder.clear()

    with apiserver.watches_held():  # changes the reflector cannot see through its watch
        apiserver.delete("v1/nodes", "vanish")
        apiserver.delete("v1/nodes", "recreate")
        apiserver.create("v1/nodes", make_node("recreate"))
        apiserver.create("v1/nodes", make_node("fresh"))
        apiserver.compact(as_event=as_event)

    wait_until(lambda: reflector.lists == 2, message="re-list")
    events = recorder.wait_for(5)
    assert sorted(events[:2]) == [("DELETED", "recreate"), ("DELETED", "vanish")]
    assert sorted(events[2:]) == [("ADDED", "fresh"), ("ADDED", "recreate"), ("MODIFIED", "keep")]
    deleted = next(o for o in recorder.objects if o["metadata"]["name"] == "recreate")
    assert deleted["metadata"]["uid"] == old_uid  # the last known object is handed over
    assert reflector.keys() == ["fresh", "keep", "recreate"]
    wait_until(lambda: watch_requests(apiserver)[-1]["resourceVersion"]
               == str(apiserver.resource_version), message="watch from the new list")


@pytest.mark.parametrize("abrupt", [False, True], ids=["stream-ended", "connection-cut"])
def test_dropped_watch_resumes_from_last_resource_version(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event,
        abrupt: bool) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    recorder = Recorder()
    reflector = start(client, stop, recorder)
    wait_until(lambda: len(watch_requests(apiserver)) == 1, message="first watch")
    apiserver.create("v1/nodes", make_node("n2"))
    recorder.wait_for(2)
    bookmark = apiserver.bookmark()
    wait_until(lambda: reflector.resource_version == str(bookmark), message="bookmark")

    apiserver.drop_watches(abrupt=abrupt)
    wait_until(lambda: len(watch_requests(apiserver)) >= 2, message="re-watch")
    assert watch_requests(apiserver)[1]["resourceVersion"] == str(bookmark)
    apiserver.create("v1/nodes", make_node("n3"))
    assert recorder.wait_for(3) == [("ADDED", "n1"), ("ADDED", "n2"), ("ADDED", "n3")]
    assert reflector.lists == 1  # resumed, not re-listed
    assert len(apiserver.requests_to("GET", r"/api/v1/nodes$")) - len(
        watch_requests(apiserver)) == 1


def test_list_is_paged_and_namespaced_objects_keyed_by_namespace(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    for index in range(5):
        apiserver.create("v1/pods", make_pod(f"p{index}", namespace=f"ns{index % 2}"))
    recorder = Recorder()
    reflector = start(client, stop, recorder, spec=PODS, page_size=2)
    assert len(recorder.wait_for(5)) == 5
    assert reflector.keys() == ["ns0/p0", "ns0/p2", "ns0/p4", "ns1/p1", "ns1/p3"]

    def lists() -> list[dict[str, str]]:
        return [r.query for r in apiserver.requests_to("GET", r"/api/v1/pods$")
                if not r.query.get("watch")]

    # The first LIST is client-go's: resourceVersion=0, answered whole from the watch cache.
    assert [(q.get("resourceVersion"), q.get("limit")) for q in lists()] == [("0", "2")]
    with apiserver.watches_held():
        apiserver.create("v1/pods", make_pod("p5", namespace="ns1"))
        apiserver.compact(as_event=True)
    wait_until(lambda: reflector.lists == 2, message="re-list after 410")
    # After 410 Gone: a consistent read (no resourceVersion), in pages.
    relist = lists()[1:]
    assert [q.get("limit") for q in relist] == ["2", "2", "2"]
    assert reflector.keys()[-1] == "ns1/p5"
    assert all("resourceVersion" not in q for q in relist)
    assert "continue" not in relist[0] and relist[1]["continue"]


def test_server_errors_back_off_and_retry_until_synced(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    apiserver.fail("GET", r"/api/v1/nodes$", 503, times=2, watch=False)
    recorder = Recorder()
    start(client, stop, recorder)
    assert recorder.wait_for(1) == [("ADDED", "n1")]
    lists = [r for r in apiserver.requests_to("GET", r"/api/v1/nodes$")
             if not r.query.get("watch")]
    assert len(lists) == 3


def test_missing_optional_crd_counts_as_synced_and_is_rechecked(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    recorder = Recorder()
    reflector = start(client, stop, recorder, spec=DEVICE_SPEC, missing_recheck=0.05)
    assert reflector.lists == 0 and recorder.events == []
    apiserver.serve(DEVICES)
    apiserver.create(DEVICES, {"apiVersion": "scheduling.koordinator.sh/v1alpha1",
                               "kind": "Device", "metadata": {"name": "n1"},
                               "spec": {"devices": []}})
    assert recorder.wait_for(1) == [("ADDED", "n1")]
    assert reflector.lists == 1


def test_handler_failure_does_not_stop_the_mirror(
        apiserver: ApiServerDouble, client: KubeClient, stop: threading.Event) -> None:
    seen: list[str] = []

    def handler(event_type: str, obj: dict) -> None:
        seen.append(obj["metadata"]["name"])
        if obj["metadata"]["name"] == "bad":
            raise RuntimeError("boom")

    apiserver.create("v1/nodes", make_node("bad"))
    reflector = Reflector(client=client, resource=NODES, handler=handler)
    group = ReflectorGroup([reflector])
    group.start(stop)
    assert group.wait_for_sync(stop, timeout=3.0)
    apiserver.create("v1/nodes", make_node("good"))
    wait_until(lambda: seen == ["bad", "good"], message="event after a failing handler")
    stop.set()
    group.interrupt()
    group.join(timeout=2.0)
    assert not any(thread.is_alive() for thread in group.threads)


def test_cached_pods_share_their_repeated_strings() -> None:
    import json

    from scheduler.cache.intern import StringTable
    from tests.apiserver.standalone import fake_pod

    text = json.dumps([fake_pod(i, nodes=3, scheduler="volcano", group_size=4)
                       for i in range(8)])
    first, second = json.loads(text)[0], json.loads(text)[4]
    assert first["status"]["phase"] is not second["status"]["phase"]
    table = StringTable(limit=1000)
    table.intern(first)
    table.intern(second)
    assert first["status"]["phase"] is second["status"]["phase"] == "Running"
    assert (first["spec"]["containers"][0]["image"]
            is second["spec"]["containers"][0]["image"])
    assert first["metadata"]["name"] != second["metadata"]["name"]
    one = StringTable()
    one.intern(json.loads(text)[2])
    small = StringTable(limit=2)
    for index in range(3):
        small.intern(json.loads(text)[index])
    assert len(small) == len(one)  # started afresh instead of growing without bound


def test_interning_reaches_every_level_and_any_depth() -> None:
    import json

    from scheduler.cache.intern import StringTable

    class Labels(dict):  # type: ignore[type-arg]
        """A mapping type other than the decoder's own is still walked."""

    first = {"a": [{"b": "Running"}, ["Running", 1, 2.5, True, None]],
             "c": Labels(d="Running"), "long": "x" * 65}
    second = json.loads(json.dumps(first))
    second["c"] = Labels(second["c"])
    table = StringTable()
    table.intern(first)
    table.intern(second)
    assert second["a"][0]["b"] is first["a"][0]["b"]
    assert second["a"][1][0] is first["a"][1][0]
    assert second["c"]["d"] is first["c"]["d"]
    assert second["long"] is not first["long"]  # longer strings are left alone
    assert second["a"][1][1:] == [1, 2.5, True, None]
    deep: dict[str, object] = {"v": "Running"}
    for _ in range(5000):  # deeper than the recursion limit: walked all the same
        deep = {"n": [deep]}
    table.intern(deep)
    node = deep
    while "n" in node:
        node = node["n"][0]  # type: ignore[index]
    assert node["v"] is first["a"][0]["b"]


def test_deferred_interning_waits_for_the_loop_and_changes_nothing_read() -> None:
    """While ``lahar run`` defers it (its first sync and cycle), pods are cached as decoded and
    interned later, between cycles; the tasks read from them are the same either way."""
    import json
    import time

    from scheduler.cache.cache import SchedulerCache
    from tests.apiserver.standalone import fake_pod
    from tests.builders import IgnoredWrites

    text = json.dumps([fake_pod(i, nodes=3, scheduler="volcano", group_size=4)
                       for i in range(5)])
    now, later = (SchedulerCache(writer=IgnoredWrites(), clock=time.time) for _ in range(2))
    later.strings.deferred = True
    for pod in json.loads(text):
        now.apply("ADDED", "Pod", pod)
    for pod in json.loads(text):
        later.apply("ADDED", "Pod", pod)
    pods = [later.pods[key] for key in sorted(later.pods)]
    assert later.strings.waiting == 5 and len(later.strings) == 0
    assert pods[0]["status"]["phase"] is not pods[1]["status"]["phase"]
    assert later.intern_deferred(count=3) and later.strings.waiting == 2
    assert pods[0]["status"]["phase"] is pods[1]["status"]["phase"]
    assert pods[3]["status"]["phase"] is not pods[0]["status"]["phase"]
    assert later.intern_deferred() and later.strings.waiting == 0
    assert not later.intern_deferred()
    assert pods[4]["status"]["phase"] is pods[0]["status"]["phase"]
    assert later.pods == now.pods
    assert {uid: (task.status, task.node_name, task.resreq, task.job)
            for uid, task in later.tasks.items()} == {
        uid: (task.status, task.node_name, task.resreq, task.job)
        for uid, task in now.tasks.items()}
    later.strings.deferred = False
    extra = fake_pod(9, nodes=3, scheduler="volcano", group_size=4)
    later.apply("ADDED", "Pod", extra)
    assert later.strings.waiting == 0  # interned at once again
    assert extra["status"]["phase"] is pods[0]["status"]["phase"]
