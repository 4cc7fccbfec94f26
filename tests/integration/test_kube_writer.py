"""ClusterWriter contract against the API server double: binds, evictions, status, events, nodes."""

from __future__ import annotations

import re
import socket

import pytest
from kube_helpers import make_node, make_pod

from scheduler.cache.interface import BindError, ObjectRef, WriteError
from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.retry import RetryPolicy
from scheduler.cluster.kube.writer import ConflictError, KubeClusterWriter
from tests.apiserver import ApiServerDouble

FAST = RetryPolicy(attempts=4, initial_wait=0.001, max_wait=0.01)
BINDING = r"/pods/p1/binding$"


@pytest.fixture
def writer(client: KubeClient) -> KubeClusterWriter:
    return KubeClusterWriter(client, scheduler_name="volcano", retry=FAST,
                             clock=lambda: 1_700_000_000.0, instance="lahar-0")


@pytest.fixture
def pod_uid(apiserver: ApiServerDouble) -> str:
    return str(apiserver.create("v1/pods", make_pod("p1", namespace="team"))["metadata"]["uid"])


def bind(writer: KubeClusterWriter, uid: str, node: str = "n1") -> None:
    writer.bind(namespace="team", name="p1", uid=uid, node=node,
                annotations={"volcano.sh/gpu-index": "0"})


def test_bind_posts_binding_with_annotations(apiserver: ApiServerDouble,
                                             writer: KubeClusterWriter, pod_uid: str) -> None:
    bind(writer, pod_uid)
    pod = apiserver.get("v1/pods", "team/p1")
    assert pod is not None and pod["spec"]["nodeName"] == "n1"
    assert pod["metadata"]["annotations"]["volcano.sh/gpu-index"] == "0"
    (request,) = apiserver.requests_to("POST", BINDING)
    assert request.path == "/api/v1/namespaces/team/pods/p1/binding"
    assert request.body == {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p1", "namespace": "team", "uid": pod_uid,
                     "annotations": {"volcano.sh/gpu-index": "0"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}


def test_bind_conflict_is_not_retried(apiserver: ApiServerDouble, writer: KubeClusterWriter,
                                      pod_uid: str) -> None:
    bind(writer, pod_uid, node="n1")
    with pytest.raises(BindError) as caught:
        bind(writer, pod_uid, node="n2")
    assert caught.value.status == 409
    assert "already assigned" in str(caught.value)
    assert len(apiserver.requests_to("POST", BINDING)) == 2  # one per bind call
    assert apiserver.get("v1/pods", "team/p1")["spec"]["nodeName"] == "n1"  # type: ignore[index]


def test_bind_retries_server_errors_then_succeeds(apiserver: ApiServerDouble,
                                                  writer: KubeClusterWriter,
                                                  pod_uid: str) -> None:
    apiserver.fail("POST", BINDING, 500, times=2)
    bind(writer, pod_uid)
    assert len(apiserver.requests_to("POST", BINDING)) == 3
    assert apiserver.get("v1/pods", "team/p1")["spec"]["nodeName"] == "n1"  # type: ignore[index]


def test_bind_gives_up_after_bounded_attempts(apiserver: ApiServerDouble,
                                              writer: KubeClusterWriter, pod_uid: str) -> None:
    apiserver.fail("POST", BINDING, 503, times=10)
    with pytest.raises(BindError) as caught:
        bind(writer, pod_uid)
    assert caught.value.status == 503
    assert len(apiserver.requests_to("POST", BINDING)) == FAST.attempts


@pytest.mark.parametrize("status", [400, 403, 404])
def test_bind_client_errors_surface_at_once(apiserver: ApiServerDouble,
                                            writer: KubeClusterWriter, pod_uid: str,
                                            status: int) -> None:
    apiserver.fail("POST", BINDING, status)
    with pytest.raises(BindError) as caught:
        bind(writer, pod_uid)
    assert caught.value.status == status
    assert len(apiserver.requests_to("POST", BINDING)) == 1


def test_transport_errors_are_retried_and_reported_as_status_zero() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = KubeClient.for_host(f"http://127.0.0.1:{port}")
    calls: list[float] = []
    policy = RetryPolicy(attempts=3, initial_wait=0.001, max_wait=0.01, sleep=calls.append)
    writer = KubeClusterWriter(client, retry=policy)
    with pytest.raises(BindError) as caught:
        writer.bind(namespace="ns", name="p", uid="u", node="n", annotations={})
    assert caught.value.status == 0
    assert len(calls) == 2  # slept between three attempts


def test_evict_marks_conditions_then_uses_the_eviction_api(
        apiserver: ApiServerDouble, writer: KubeClusterWriter, pod_uid: str) -> None:
    writer.evict(namespace="team", name="p1", uid=pod_uid, reason="preempt",
                 message="Pod team/p1 is preempted by team/high")
    (patch,) = apiserver.requests_to("PATCH", r"/pods/p1/status$")
    assert patch.headers["content-type"].startswith("application/strategic-merge-patch+json")
    conditions = {c["type"]: c for c in patch.body["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "False" and conditions["Ready"]["reason"] == "Evict"
    disruption = conditions["DisruptionTarget"]
    assert (disruption["status"], disruption["reason"]) == ("True", "PreemptionByScheduler")
    assert disruption["message"] == (
        "volcano: preempting to accommodate a higher priority pod")
    (eviction,) = apiserver.requests_to("POST", r"/pods/p1/eviction$")
    assert eviction.body["kind"] == "Eviction" and eviction.body["apiVersion"] == "policy/v1"
    assert eviction.body["deleteOptions"]["preconditions"]["uid"] == pod_uid
    assert apiserver.get("v1/pods", "team/p1") is None
    (event,) = [r.body for r in apiserver.requests_to("POST", r"/events$")]
    assert (event["type"], event["reason"]) == ("Warning", "Evict")
    assert event["message"] == "Pod team/p1 is preempted by team/high"
    assert event["involvedObject"]["uid"] == pod_uid


def test_successful_bind_records_a_scheduled_event(
        apiserver: ApiServerDouble, writer: KubeClusterWriter, pod_uid: str) -> None:
    bind(writer, pod_uid)
    (event,) = [r.body for r in apiserver.requests_to("POST", r"/events$")]
    assert (event["type"], event["reason"]) == ("Normal", "Scheduled")
    assert event["message"] == "Successfully assigned team/p1 to n1"


def test_evict_blocked_by_disruption_budget_is_reported_not_retried(
        apiserver: ApiServerDouble, writer: KubeClusterWriter, pod_uid: str) -> None:
    apiserver.pdb_blocked.add("team/p1")
    with pytest.raises(WriteError) as caught:
        writer.evict(namespace="team", name="p1", uid=pod_uid, reason="reclaim", message="")
    assert caught.value.status == 429
    assert len(apiserver.requests_to("POST", r"/pods/p1/eviction$")) == 1
    assert apiserver.get("v1/pods", "team/p1") is not None


def test_evict_of_a_pod_already_gone_succeeds(writer: KubeClusterWriter) -> None:
    writer.evict(namespace="team", name="ghost", uid="u", reason="preempt", message="gone")


def test_update_pod_condition_merges_by_type_and_sets_nomination(
        apiserver: ApiServerDouble, writer: KubeClusterWriter, pod_uid: str) -> None:
    for message in ("0/2 nodes are unavailable: 2 Insufficient cpu.", "second"):
        writer.update_pod_condition(
            namespace="team", name="p1", nominated_node="n2",
            condition={"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                       "message": message})
    pod = apiserver.get("v1/pods", "team/p1")
    assert pod is not None
    assert [c["message"] for c in pod["status"]["conditions"]] == ["second"]
    assert pod["status"]["conditions"][0]["lastTransitionTime"] == "2023-11-14T22:13:20Z"
    assert pod["status"]["nominatedNodeName"] == "n2"
    assert pod["status"]["phase"] == "Pending"


def test_podgroup_status_is_merge_patched_on_the_object(apiserver: ApiServerDouble,
                                                        writer: KubeClusterWriter) -> None:
    group = "scheduling.volcano.sh/v1beta1/podgroups"
    apiserver.create(group, {"metadata": {"name": "pg", "namespace": "team"},
                             "spec": {"minMember": 2}, "status": {"phase": "Pending"}})
    writer.update_podgroup_status(namespace="team", name="pg",
                                  status={"phase": "Running", "running": 2})
    (patch,) = apiserver.requests_to("PATCH", r"/podgroups/pg")
    assert patch.path == "/apis/scheduling.volcano.sh/v1beta1/namespaces/team/podgroups/pg"
    assert patch.headers["content-type"].startswith("application/merge-patch+json")
    stored = apiserver.get(group, "team/pg")
    assert stored is not None and stored["status"] == {"phase": "Running", "running": 2}


@pytest.mark.parametrize("has_subresource", [True, False])
def test_queue_status_goes_through_the_status_subresource_only(has_subresource: bool) -> None:
    """The deploy role grants ``patch`` on ``queues/status`` only: without the subresource the
    write fails with a message saying why, and the Queue object itself is never patched."""
    queues = "scheduling.volcano.sh/v1beta1/queues"
    double = ApiServerDouble(status_subresources=("queues",) if has_subresource else ())
    with double:
        kube = KubeClient.for_host(double.url)
        double.create(queues, {"metadata": {"name": "q1"}, "spec": {"weight": 1},
                               "status": {"state": "Open"}})
        writer = KubeClusterWriter(kube, retry=FAST)
        if has_subresource:
            writer.update_queue_status(name="q1", status={"allocated": {"cpu": "2"}})
            stored = double.get(queues, "q1")
            assert stored is not None
            assert stored["status"] == {"state": "Open", "allocated": {"cpu": "2"}}
        else:
            with pytest.raises(WriteError, match="no status subresource") as info:
                writer.update_queue_status(name="q1", status={"allocated": {"cpu": "2"}})
            assert info.value.status == 404
        paths = [r.path.rsplit("/", 1)[-1] for r in double.requests_to("PATCH", "queues")]
        assert set(paths) == {"status"}


def test_ensure_queue_creates_only_when_missing(apiserver: ApiServerDouble,
                                                writer: KubeClusterWriter) -> None:
    assert writer.ensure_queue("default") is True
    assert writer.ensure_queue("default") is False
    stored = apiserver.get("scheduling.volcano.sh/v1beta1/queues", "default")
    assert stored is not None and stored["spec"] == {"weight": 1, "reclaimable": True}


def test_replace_node_detects_lost_updates(apiserver: ApiServerDouble,
                                           writer: KubeClusterWriter) -> None:
    apiserver.create("v1/nodes", make_node("n1", spec={"futureField": {"x": 1}}))
    mine = writer.get_node("n1")
    theirs = writer.get_node("n1")
    theirs["metadata"]["annotations"] = {"hami.io/mutex.lock": "them"}
    writer.replace_node(theirs)

    mine["metadata"]["annotations"] = {"hami.io/mutex.lock": "me"}
    with pytest.raises(ConflictError) as caught:
        writer.replace_node(mine)
    assert caught.value.status == 409 and isinstance(caught.value, WriteError)
    assert len(apiserver.requests_to("PUT", r"/nodes/n1$")) == 2  # conflicts are not retried

    fresh = writer.get_node("n1")
    assert fresh["metadata"]["annotations"] == {"hami.io/mutex.lock": "them"}
    assert fresh["spec"]["futureField"] == {"x": 1}  # raw dicts keep fields unknown to models
    fresh["metadata"]["annotations"] = {}
    stored = writer.replace_node(fresh)
    assert int(stored["metadata"]["resourceVersion"]) > int(
        fresh["metadata"]["resourceVersion"])


def test_record_event_creates_core_events_and_counts_repeats(
        apiserver: ApiServerDouble, writer: KubeClusterWriter, pod_uid: str) -> None:
    involved = ObjectRef(kind="Pod", name="p1", namespace="team", uid=pod_uid)
    for _ in range(2):
        writer.record_event(involved=involved, type="Warning", reason="FailedScheduling",
                            message="0/3 nodes are unavailable: 3 Insufficient cpu.")
    events = list(apiserver.objects["v1/events"].values())
    assert len(events) == 1
    event = events[0]
    assert re.fullmatch(r"p1\.[0-9a-f]+", event["metadata"]["name"])
    assert event["metadata"]["namespace"] == "team"
    assert event["involvedObject"] == {"kind": "Pod", "name": "p1", "namespace": "team",
                                       "uid": pod_uid, "apiVersion": "v1"}
    assert (event["type"], event["reason"]) == ("Warning", "FailedScheduling")
    assert event["source"] == {"component": "volcano"}
    assert event["reportingComponent"] == "volcano"
    assert event["reportingInstance"] == "lahar-0"
    assert event["count"] == 2 and event["firstTimestamp"] == "2023-11-14T22:13:20Z"

    writer.record_event(involved=ObjectRef(kind="Queue", name="q1", api_version=(
        "scheduling.volcano.sh/v1beta1")), type="Normal", reason="Opened", message="open")
    queue_events = [e for e in apiserver.objects["v1/events"].values()
                    if e["involvedObject"]["kind"] == "Queue"]
    assert queue_events[0]["metadata"]["namespace"] == "default"
    assert "namespace" not in queue_events[0]["involvedObject"]

