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

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from scheduler.api.podclaims import pod_claims, template_claim
from scheduler.cluster.kube.client import MERGE_PATCH, ApiError, KubeClient
from tests.e2e.conftest import (
    Case,
    Settings,
    fake_kubelet_running,
    make_settings,
    open_own_case,
)
from tests.e2e.kube import env_flag, eventually, ignore_missing, make_pod, node_name_of, raw
from tests.e2e.privateapi import missing, private_apiserver

GROUP, VERSION = "resource.k8s.io", "v1"
CRDS = Path(__file__).with_name("dra-test-only-crds.yaml")
PLURALS = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
GATES = ("--feature-gates", "DRAConsumableCapacity=true")


def _keeps_resource_claims(kubeconfig: str) -> bool:
    """Whether the server keeps a pod's ``spec.resourceClaims`` (a dry-run create)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lahar-e2e-probe"},
           "spec": {"containers": [{"name": "main", "image": "busybox",
                                    "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "source": {"resourceClaimName": "x"}}]}}
    client = KubeClient.from_flags(kubeconfig=kubeconfig, qps=50.0, burst=100)
    try:
        made = client.request_json("POST", "/api/v1/namespaces/default/pods",
                                   query={"dryRun": "All"}, body=pod)
        try:  # a server that ignores dryRun (the test double) made it
            client.request_json("DELETE", "/api/v1/namespaces/default/pods/lahar-e2e-probe")
        except ApiError as error:
            if error.status != 404:
                raise
    finally:
        client.close()
    return bool(made["spec"].get("resourceClaims"))


@pytest.fixture(scope="module")
def dra_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """The suite's cluster when it keeps ``spec.resourceClaims``; else a private 1.28 control
    plane with the DynamicResourceAllocation gate (fake nodes), stopped at the end."""
    kubeconfig = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    workdir = tmp_path_factory.mktemp("lahar-e2e-dra")
    if kubeconfig and _keeps_resource_claims(kubeconfig):
        made = make_settings(kubeconfig, workdir, fake_nodes=env_flag("LAHAR_E2E_FAKE_NODES"))
        with fake_kubelet_running(made):
            yield made
        return
    if not kubeconfig and not env_flag("LAHAR_E2E_PRIVATE_APISERVER"):
        pytest.skip("KUBECONFIG is not set: the e2e suite needs a cluster "
                    "(or LAHAR_E2E_PRIVATE_APISERVER=1 for a control plane of its own)")
    why = missing()
    if why:
        pytest.skip(f"the cluster drops spec.resourceClaims and a private control plane with "
                    f"--feature-gates=DynamicResourceAllocation=true cannot be started: {why}")
    with private_apiserver(workdir / "apiserver",
                           extra_flags=["--feature-gates=DynamicResourceAllocation=true"]
                           ) as private:
        made = make_settings(private, workdir, fake_nodes=True)
        with fake_kubelet_running(made):
            yield made


@pytest.fixture
def own_case(dra_settings: Settings) -> Iterator[Case]:
    """The suite's ``own_case`` on this module's cluster."""
    with open_own_case(dra_settings) as made:
        yield made


@pytest.fixture(scope="module")
def dra_api(dra_settings: Settings) -> Iterator[None]:
    """``resource.k8s.io/v1`` served (the stand-in CRDs installed when the server lacks it),
    removed again at the end when this module installed them."""
    kube = dra_settings.kube
    installed: list[str] = []
    if not all(kube.served(GROUP, VERSION, plural) for plural in PLURALS):
        for document in yaml.safe_load_all(CRDS.read_text()):
            if not document:
                continue
            try:
                raw(kube.extensions.create_custom_resource_definition, document)
                installed.append(document["metadata"]["name"])
            except ApiException as error:
                if error.status != 409:
                    raise
        for plural in PLURALS:
            eventually(lambda plural=plural: kube.served(GROUP, VERSION, plural) or None,
                       timeout=60.0, what=f"{plural}.{GROUP} served")
    try:
        yield
    finally:
        for name in installed:
            ignore_missing(kube.extensions.delete_custom_resource_definition, name)


def _objects(case: Case) -> Any:
    return case.kube.custom


def _create(case: Case, plural: str, obj: dict[str, Any], *, namespaced: bool) -> dict[str, Any]:
    """Create ``obj``, deleted again when the case ends (a bare API server has no namespace
    controller to do it)."""
    custom = _objects(case)
    name = obj["metadata"]["name"]
    if namespaced:
        namespace = case.namespace
        made = raw(custom.create_namespaced_custom_object, GROUP, VERSION, namespace, plural,
                   obj)
        case.cleanups.append(lambda: ignore_missing(
            custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, plural, name))
        return made
    made = raw(custom.create_cluster_custom_object, GROUP, VERSION, plural, obj)
    case.cleanups.append(lambda: ignore_missing(
        custom.delete_cluster_custom_object, GROUP, VERSION, plural, name))
    return made


def _claim(case: Case, name: str) -> dict[str, Any]:
    return raw(_objects(case).get_namespaced_custom_object, GROUP, VERSION, case.namespace,
               "resourceclaims", name)


def _driver(case: Case) -> str:
    return f"gpu-{case.case_id}.example.com"


def _setup_devices(case: Case, *, nodes: int, devices: int, shared: str | None = None) -> None:
    """A DeviceClass of this case's driver, and a slice of ``devices`` GPUs per node."""
    driver = _driver(case)
    _create(case, "deviceclasses", {
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
        _create(case, "resourceslices", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": listed}}, namespaced=False)


def _spec(case: Case, memory: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": _driver(case)}
    if memory:
        exactly["capacity"] = {"requests": {"memory": memory}}
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def _claim_pod(case: Case, name: str, *, group: str, claim: str = "",
               template: str = "") -> dict[str, Any]:
    """A pod with one claim entry ``gpu`` in the 1.28 shape; its claim made as the
    resourceclaim controller makes it when it comes from a template."""
    pod = make_pod(name, scheduler=case.scheduler, group=group, run_id=case.settings.run_id,
                   cpu_milli=case.unit, node_selector=case.selector)
    source = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template}
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "source": source}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    with _wire(case) as wire:  # the official client's models no longer know ``source``
        made = wire.request_json("POST", f"/api/v1/namespaces/{case.namespace}/pods",
                                 body=pod)
    if not made["spec"].get("resourceClaims"):
        pytest.skip("this API server drops spec.resourceClaims (Kubernetes 1.28-1.30 keep it "
                    "only with --feature-gates=DynamicResourceAllocation=true)")
    if template:
        _play_claim_controller(case, made, template)
    return made


def _play_claim_controller(case: Case, pod: dict[str, Any], template: str) -> None:
    body = raw(_objects(case).get_namespaced_custom_object, GROUP, VERSION, case.namespace,
               "resourceclaimtemplates", template)
    entry = pod_claims(pod)[0]
    suffix = hashlib.sha256(pod["metadata"]["uid"].encode()).hexdigest()[:5]
    made = _create(case, "resourceclaims", template_claim(pod, entry, body, suffix=suffix),
                   namespaced=True)
    with _wire(case) as wire:
        wire.request_json(
            "PATCH", f"/api/v1/namespaces/{case.namespace}/pods/{pod['metadata']['name']}/status",
            body={"status": {"resourceClaimStatuses": [
                {"name": entry.name, "resourceClaimName": made["metadata"]["name"]}]}},
            content_type=MERGE_PATCH)


@contextlib.contextmanager
def _wire(case: Case) -> Iterator[KubeClient]:
    """Lahar's own client, which sends a pod as written (1.28's ``source`` included)."""
    client = KubeClient.from_flags(kubeconfig=case.settings.kubeconfig, qps=50.0, burst=100)
    try:
        yield client
    finally:
        client.close()


def _claim_name_of(case: Case, pod: str) -> str:
    with _wire(case) as wire:
        obj = wire.request_json("GET", f"/api/v1/namespaces/{case.namespace}/pods/{pod}")
    source = obj["spec"]["resourceClaims"][0]["source"]
    if source.get("resourceClaimName"):
        return str(source["resourceClaimName"])
    return str(obj["status"]["resourceClaimStatuses"][0]["resourceClaimName"])


def _devices(claim: dict[str, Any]) -> list[tuple[str, str]]:
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    return [(r["pool"], r["device"]) for r in results.get("results") or []]


def _reserved(claim: dict[str, Any]) -> list[str]:
    return [r["uid"] for r in (claim.get("status") or {}).get("reservedFor") or []]


def _template(case: Case, name: str, memory: str | None = None) -> None:
    _create(case, "resourceclaimtemplates", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name}, "spec": {"spec": _spec(case, memory)}}, namespaced=True)


def test_a_gang_gets_four_distinct_devices_from_a_template(dra_api: None,
                                                           own_case: Case) -> None:
    case = own_case
    case.start_scheduler(extra_args=GATES).wait_serving()
    _setup_devices(case, nodes=2, devices=2)
    _template(case, "one-gpu")
    case.kube.create_podgroup(case.namespace, "train", min_member=4)
    pods = [f"train-{i}" for i in range(4)]
    uids = {p: _claim_pod(case, p, group="train", template="one-gpu")["metadata"]["uid"]
            for p in pods}
    eventually(lambda: len(case.bound(pods)) == 4 or None, timeout=60.0, what="gang bound")
    seen = []
    for pod in pods:
        claim = _claim(case, _claim_name_of(case, pod))
        devices = _devices(claim)
        assert len(devices) == 1 and devices[0][0] == case.node_of(pod)
        assert _reserved(claim) == [uids[pod]]
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
        _claim_pod(case, f"infer-{i}", group=f"infer-{i}", template="half")
    pods = ["infer-0", "infer-1"]
    eventually(lambda: len(case.bound(pods)) == 2 or None, timeout=60.0, what="pair bound")
    claims = [_claim(case, _claim_name_of(case, pod)) for pod in pods]
    assert _devices(claims[0]) == _devices(claims[1]) == [(case.nodes[0], "gpu-0")]


def test_an_unsatisfiable_claim_leaves_the_pod_pending_with_an_event(dra_api: None,
                                                                     own_case: Case) -> None:
    case = own_case
    case.start_scheduler(extra_args=GATES).wait_serving()
    _setup_devices(case, nodes=1, devices=1)
    _create(case, "resourceclaims", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
        "metadata": {"name": "two-gpus"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": _driver(case), "allocationMode": "ExactCount", "count": 2}}]}}},
        namespaced=True)
    case.kube.create_podgroup(case.namespace, "solo", min_member=1)
    _claim_pod(case, "solo", group="solo", claim="two-gpus")

    def failed() -> list[dict[str, Any]] | None:
        events = case.kube.events(case.namespace, name="solo", reason="FailedScheduling")
        return [e for e in events if "two-gpus" in e["message"]] or None

    assert eventually(failed, timeout=60.0, what="FailedScheduling naming the claim")
    assert not node_name_of(case.kube.pod(case.namespace, "solo"))
    assert "allocation" not in (_claim(case, "two-gpus").get("status") or {})


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
        uids[pod] = _claim_pod(case, pod, group=pod, template="one-gpu")["metadata"]["uid"]
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
        claim = _claim(case, _claim_name_of(case, pod))
        devices = _devices(claim)
        if pod in bound:
            assert len(devices) == 1 and devices[0][0] == case.node_of(pod)
            assert _reserved(claim) == [uids[pod]]
        else:
            assert not devices, (pod, devices)
        held += devices
    assert len(held) == len(set(held)) == 12
