"""Dynamic Resource Allocation through a real API server.

Kubernetes 1.34+ serves ``resource.k8s.io/v1`` itself. On older servers the suite installs the
test-only stand-ins of ``tests/e2e/dra-test-only-crds.yaml`` (same group, version, kinds; never
part of ``conf/deploy``) and uses the 1.28–1.30 pod shape (``spec.resourceClaims[].source``).
Such a server has no resourceclaim controller for the stand-ins, so the test plays it: it
creates each pod's claim from the template (owned by the pod, annotated with its pod claim name)
and writes the pod's ``status.resourceClaimStatuses``, as kube-controller-manager would. A
1.28–1.30 server keeps ``spec.resourceClaims`` only with the ``DynamicResourceAllocation``
feature gate on; without it the field is dropped on create. The suite's shared cluster is such
a server, so when it drops the field (or with ``LAHAR_E2E_PRIVATE_APISERVER=1`` and no
``KUBECONFIG``) the module starts a control plane of its own from the same binaries with
``--feature-gates=DynamicResourceAllocation=true`` (:mod:`tests.e2e.privateapi`, fake nodes)
and runs there; where those binaries are missing (CI) the cases are skipped, saying so.

Checked as kube-scheduler's DynamicResources PreBind leaves a claim (bindClaim): every claim of
a bound pod has ``status.allocation`` with its devices and ``status.reservedFor`` naming the pod.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Case, Settings, open_own_case
from tests.e2e.dra import (
    GATES,
    GROUP,
    VERSION,
    allocated,
    claim_name_of,
    claim_pod,
    claim_template,
    create,
    dra_api_served,
    dra_cluster,
    get_claim,
    one_device,
    reserved_for,
)
from tests.e2e.kube import eventually, node_name_of


@pytest.fixture(scope="module")
def dra_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """The suite's cluster when it keeps ``spec.resourceClaims``; else a private 1.28 control
    plane with the DynamicResourceAllocation gate (fake nodes), stopped at the end."""
    with dra_cluster(tmp_path_factory.mktemp("lahar-e2e-dra")) as made:
        yield made


@pytest.fixture
def own_case(dra_settings: Settings) -> Iterator[Case]:
    """The suite's ``own_case`` on this module's cluster."""
    with open_own_case(dra_settings) as made:
        yield made


@pytest.fixture(scope="module")
def dra_api(dra_settings: Settings) -> Iterator[None]:
    """``resource.k8s.io/v1`` served (the stand-in CRDs installed when the server lacks it)."""
    with dra_api_served(dra_settings.kube):
        yield


def _driver(case: Case) -> str:
    return f"gpu-{case.case_id}.example.com"


def _setup_devices(case: Case, *, nodes: int, devices: int, shared: str | None = None) -> None:
    """A DeviceClass of this case's driver, and a slice of ``devices`` GPUs per node."""
    driver = _driver(case)
    create(case, "deviceclasses", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}},
        namespaced=False)
    for node in case.add_nodes(nodes, units=8):
        listed = []
        for i in range(devices):
            device: dict[str, Any] = {"name": f"gpu-{i}",
                                      "capacity": {"memory": {"value": shared or "40Gi"}}}
            if shared:
                device["allowMultipleAllocations"] = True
            listed.append(device)
        create(case, "resourceslices", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": listed}}, namespaced=False)


def _template(case: Case, name: str, memory: str | None = None) -> None:
    claim_template(case, name, one_device(_driver(case), memory))


def test_a_gang_gets_four_distinct_devices_from_a_template(dra_api: None,
                                                           own_case: Case) -> None:
    case = own_case
    case.start_scheduler(extra_args=GATES).wait_serving()
    _setup_devices(case, nodes=2, devices=2)
    _template(case, "one-gpu")
    case.kube.create_podgroup(case.namespace, "train", min_member=4)
    pods = [f"train-{i}" for i in range(4)]
    uids = {p: claim_pod(case, p, group="train", template="one-gpu")["metadata"]["uid"]
            for p in pods}
    eventually(lambda: len(case.bound(pods)) == 4 or None, timeout=60.0, what="gang bound")
    seen = []
    for pod in pods:
        claim = get_claim(case, claim_name_of(case, pod))
        devices = allocated(claim)
        assert len(devices) == 1 and devices[0][0] == case.node_of(pod)
        assert reserved_for(claim) == [uids[pod]]
        seen += devices
    assert len(set(seen)) == 4


def test_a_shared_gpu_pair(dra_api: None, own_case: Case) -> None:
    """Two claims of 16Gi each on one 40Gi device that allows several allocations."""
    case = own_case
    case.start_scheduler(extra_args=GATES).wait_serving()
    _setup_devices(case, nodes=1, devices=1, shared="40Gi")
    _template(case, "half", memory="16Gi")
    for i in range(2):
        case.kube.create_podgroup(case.namespace, f"infer-{i}", min_member=1)
        claim_pod(case, f"infer-{i}", group=f"infer-{i}", template="half")
    pods = ["infer-0", "infer-1"]
    eventually(lambda: len(case.bound(pods)) == 2 or None, timeout=60.0, what="pair bound")
    claims = [get_claim(case, claim_name_of(case, pod)) for pod in pods]
    assert allocated(claims[0]) == allocated(claims[1]) == [(case.nodes[0], "gpu-0")]


def test_an_unsatisfiable_claim_leaves_the_pod_pending_with_an_event(dra_api: None,
                                                                     own_case: Case) -> None:
    case = own_case
    case.start_scheduler(extra_args=GATES).wait_serving()
    _setup_devices(case, nodes=1, devices=1)
    create(case, "resourceclaims", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
        "metadata": {"name": "two-gpus"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": _driver(case), "allocationMode": "ExactCount", "count": 2}}]}}},
        namespaced=True)
    case.kube.create_podgroup(case.namespace, "solo", min_member=1)
    claim_pod(case, "solo", group="solo", claim="two-gpus")

    def failed() -> list[dict[str, Any]] | None:
        events = case.kube.events(case.namespace, name="solo", reason="FailedScheduling")
        return [e for e in events if "two-gpus" in e["message"]] or None

    assert eventually(failed, timeout=60.0, what="FailedScheduling naming the claim")
    assert not node_name_of(case.kube.pod(case.namespace, "solo"))
    assert "allocation" not in (get_claim(case, "two-gpus").get("status") or {})


def test_sigkill_mid_burst_and_restart_allocates_no_device_twice(dra_api: None,
                                                                 own_case: Case) -> None:
    """A burst of one-GPU pods, more than there are GPUs; the scheduler is SIGKILLed while the
    burst is being scheduled and another one started. kube-scheduler rebuilds the devices in
    use from the claims' ``status.allocation`` before it schedules (the DynamicResources
    plugin's allocated-devices tracker, fed by the claim informer); so does Lahar: no device
    is in two claims, every bound pod's claim is allocated on its node and reserved for it,
    and the pods beyond the GPUs stay pending."""
    case = own_case
    first = case.start_scheduler(extra_args=GATES)
    first.wait_serving()
    _setup_devices(case, nodes=3, devices=4)
    _template(case, "one-gpu")
    pods = [f"burst-{i:02d}" for i in range(16)]
    uids: dict[str, str] = {}
    for i, pod in enumerate(pods):
        case.kube.create_podgroup(case.namespace, pod, min_member=1)
        uids[pod] = claim_pod(case, pod, group=pod, template="one-gpu")["metadata"]["uid"]
        if i == 7:
            eventually(lambda: case.bound(pods[:8]) or None, timeout=60.0,
                       what="the first pods of the burst bound")
            first.kill()
    second = case.start_scheduler(extra_args=GATES)
    second.wait_serving()
    eventually(lambda: len(case.bound(pods)) == 12 or None, timeout=90.0,
               what="12 pods bound, one per GPU")
    time.sleep(3.0)  # a few more cycles: nothing else may bind
    bound = case.bound(pods)
    assert len(bound) == 12
    held: list[tuple[str, str]] = []
    for pod in pods:
        claim = get_claim(case, claim_name_of(case, pod))
        devices = allocated(claim)
        if pod in bound:
            assert len(devices) == 1 and devices[0][0] == case.node_of(pod)
            assert reserved_for(claim) == [uids[pod]]
        else:
            assert not devices, (pod, devices)
        held += devices
    assert len(held) == len(set(held)) == 12
