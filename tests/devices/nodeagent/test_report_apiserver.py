"""The reporter's Device object as an API server takes it, with a broken card.

koordlet reports a card that fails its health check with ``health: false`` and a
``Healthy=False`` condition (``pkg/koordlet/statesinformer/impl/states_device_linux.go``); the
Device CRD types conditions as ``metav1.Condition`` (``apis/scheduling/v1alpha1/
device_types.go``), whose ``lastTransitionTime`` is required. Without it the API server
refuses the whole object with 422 and the Device keeps saying the broken card is healthy.

The reporter writes through the agent's Kubernetes adapter (``KubeNodeAccess``) to the API double,
which checks custom objects against ``conf/crds/`` as a server does, and to a real API server
when ``LAHAR_NODEAGENT_KUBECONFIG`` names one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.nodeaccess import KubeNodeAccess
from scheduler.devices.base import DeviceConfig
from scheduler.devices.node.reporter import Reporter
from scheduler.devices.node.resources import AgentConfig, endpoints
from tests.apiserver import DEFAULT_COLLECTIONS, DEVICES, ApiServerDouble
from tests.builders import make_node
from tests.devices.nodeagent.conftest import inventory
from tests.e2e.kube import short_id


@pytest.fixture(params=["double", "real"])
def client(request: pytest.FixtureRequest) -> Iterator[KubeClient]:
    if request.param == "double":
        with ApiServerDouble(collections=(*DEFAULT_COLLECTIONS, DEVICES),
                             status_subresources=("queues", "pods", "nodes")) as double:
            kube = KubeClient.for_host(double.url)
            yield kube
            kube.close()
        return
    real = os.environ.get("LAHAR_NODEAGENT_KUBECONFIG", "")
    if not real:
        pytest.skip("LAHAR_NODEAGENT_KUBECONFIG names no real API server")
    from tests.e2e.kube import Kube

    reason = Kube(real).ensure_device_crd()
    if reason:
        pytest.skip(reason)
    kube = KubeClient.from_flags(kubeconfig=real)
    yield kube
    kube.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


def _device(client: KubeClient, name: str) -> dict[str, Any]:
    found = KubeNodeAccess(client).get_device(name)
    assert found is not None
    return found


def test_a_broken_card_is_reported_and_the_server_takes_it(client: KubeClient) -> None:
    name = f"na-report-{short_id()}"
    client.request_json("POST", "/api/v1/nodes", body=make_node(name))
    try:
        access = KubeNodeAccess(client)
        config = AgentConfig(node_name=name, devices=DeviceConfig(finegrained=True))
        clock = Clock()
        reporter = Reporter(access=access, config=config, endpoints=endpoints(config),
                            clock=clock, sleep=lambda _: None, attempts=1)
        healthy = inventory(2)
        reporter.report(healthy)
        assert [d["health"] for d in _device(client, name)["spec"]["devices"]] == [True, True]

        broken = replace(healthy, gpus=(healthy.gpus[0], replace(healthy.gpus[1],
                                                                 healthy=False)))
        clock.now += 60
        reporter.report(broken)
        written = _device(client, name)
        devices = written["spec"]["devices"]
        assert [d["health"] for d in devices] == [True, False]
        (condition,) = devices[1]["conditions"]
        assert condition["type"] == "Healthy" and condition["status"] == "False"
        assert condition["lastTransitionTime"] == "2026-09-21T14:14:20Z"
        assert condition["reason"] and condition["message"]

        clock.now += 60  # still broken: the transition keeps its time, nothing is rewritten
        reporter.report(broken)
        again = _device(client, name)
        assert again["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]

        clock.now += 60
        reporter.report(healthy)
        devices = _device(client, name)["spec"]["devices"]
        assert [d["health"] for d in devices] == [True, True]
        assert "conditions" not in devices[1]
    finally:
        for path in (f"/apis/{DEVICES.rsplit('/', 1)[0]}/devices/{name}",
                     f"/api/v1/nodes/{name}"):
            try:
                client.request_json("DELETE", path)
            except Exception as exc:  # clean up what can be
                print(f"clean-up of {path} failed: {exc}")
