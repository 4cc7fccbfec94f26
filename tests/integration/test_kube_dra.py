"""``lahar run`` with DRA objects through the API double: the reflectors mirror
``resource.k8s.io/v1``, the claim's status is written with its resourceVersion on the
``status`` subresource before the Binding (kube-scheduler's DynamicResources PreBind,
``bindClaim``), and a server without the group is no obstacle."""

from __future__ import annotations

import argparse
import threading
from typing import Any

from kube_helpers import make_node, make_pod, wait_until

from scheduler.cluster.kube.flags import normalize
from scheduler.cluster.kube.run import add_run_arguments, run_main
from tests.apiserver.store import DEFAULT_COLLECTIONS, DRA_COLLECTIONS, ApiServerDouble

V1 = "resource.k8s.io/v1"
DRIVER = "gpu.example.com"


def _args(url: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return normalize(parser.parse_args(["--master", url, "--leader-elect=false",
                                        "--schedule-period=50ms"]))


def _cluster(double: ApiServerDouble) -> None:
    double.create("v1/nodes", make_node("n1"))
    double.create(f"{V1}/deviceclasses", {
        "apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    double.create(f"{V1}/resourceslices", {
        "apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "n1-gpus"},
        "spec": {"driver": DRIVER, "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}]}})
    double.create(f"{V1}/resourceclaims", {
        "apiVersion": V1, "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "team"},
        "spec": {"devices": {"requests": [{"name": "gpu",
                                           "exactly": {"deviceClassName": DRIVER}}]}}})
    double.create("scheduling.volcano.sh/v1beta1/podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg1", "namespace": "team"},
        "spec": {"minMember": 1, "queue": "default"}})


def _claim_pod(name: str) -> dict[str, Any]:
    pod = make_pod(name, namespace="team", group="pg1")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    return pod


def _run(double: ApiServerDouble, until: Any, message: str) -> None:
    stop = threading.Event()
    outcome: list[int] = []
    runner = threading.Thread(target=lambda: outcome.append(run_main(_args(double.url),
                                                                     stop=stop)), daemon=True)
    runner.start()
    try:
        wait_until(until, timeout=10.0, message=message)
    finally:
        stop.set()
        runner.join(10.0)
    assert outcome == [0]


def test_run_allocates_a_claim_before_the_bind() -> None:
    with ApiServerDouble(collections=(*DEFAULT_COLLECTIONS, *DRA_COLLECTIONS),
                         status_subresources=("queues", "pods", "resourceclaims")) as double:
        _cluster(double)
        double.create("v1/pods", _claim_pod("p1"))
        _run(double, lambda: (double.get("v1/pods", "team/p1") or {})
             .get("spec", {}).get("nodeName") == "n1", "bind")
        claim = double.get(f"{V1}/resourceclaims", "team/c")
        assert claim is not None
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["pool"], r["device"]) for r in results] == [("n1", "gpu-0")]
        assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p1"]
        writes = double.requests_to("PUT", "^/apis/resource.k8s.io/v1/namespaces/team/"
                                           "resourceclaims/c/status$")
        assert len(writes) == 1 and writes[0].body["metadata"]["resourceVersion"]
        binds = double.requests_to("POST", "^/api/v1/namespaces/team/pods/p1/binding$")
        assert double.requests.index(writes[0]) < double.requests.index(binds[0])


def test_run_without_the_dra_group_still_schedules() -> None:
    """A server before 1.34 answers 404 for resource.k8s.io/v1: counted as synced."""
    with ApiServerDouble() as double:
        double.create("v1/nodes", make_node("n1"))
        double.create("scheduling.volcano.sh/v1beta1/podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg1", "namespace": "team"},
            "spec": {"minMember": 1, "queue": "default"}})
        double.create("v1/pods", make_pod("plain", namespace="team", group="pg1"))
        _run(double, lambda: (double.get("v1/pods", "team/plain") or {})
             .get("spec", {}).get("nodeName") == "n1", "bind without DRA")
