"""End to end, the node half of DRA on a real API server: ``lahar node-agent --dra --dra-mode
shared --fake-gpus 4`` as a process, the fake DRA kubelet, and ResourceClaims allocated as the
scheduler writes them.

Works on the shared 1.28 test server: the test-only ``resource.k8s.io/v1`` CRDs of
``test_dra.py`` are installed when the server lacks the group (and removed again), and no pod
carries ``spec.resourceClaims`` (which a 1.28 server without the ``DynamicResourceAllocation``
gate drops): the test writes each claim's ``status.allocation`` itself, as ``lahar run``'s DRA
allocator does, and calls the plugin as kubelet would for the pod. The whole flow, with
``lahar run`` allocating the claims of plain pods, is ``test_dra_node_run.py``'s, which needs a
server that keeps pod claims (the gated private control plane). Peers: kubelet's DRA manager
(``pkg/kubelet/cm/dra/manager.go`` ``PrepareResources`` / ``UnprepareResources``), HAMi's DRA
driver for the shared limits.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from kubernetes.client.exceptions import ApiException

from tests.devices.nodeagent.drakubelet import FakeDraKubelet
from tests.e2e.dra import (
    AGENT_DRIVER,
    GROUP,
    VERSION,
    NodeAgentProcess,
    dra_api_served,
    node_slices,
)
from tests.e2e.kube import Kube, eventually, ignore_missing, raw, short_id

DRIVER = AGENT_DRIVER


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        pytest.skip("KUBECONFIG is not set: the e2e suite needs a cluster")
    made = Kube(kubeconfig)
    with dra_api_served(made):
        yield made


def _allocated_claim(kube: Kube, namespace: str, name: str, node: str, device: str,
                     memory: str) -> str:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "shared-gpu.lahar.dev",
                "capacity": {"requests": {"memory": memory}}}}]}}}
    claim = raw(kube.custom.create_namespaced_custom_object, GROUP, VERSION, namespace,
                "resourceclaims", body)
    claim["status"] = {"allocation": {"devices": {"results": [{
        "request": "gpu", "driver": DRIVER, "pool": node, "device": device,
        "shareID": f"share-{name}", "consumedCapacity": {"memory": memory, "cores": "50"}}]}}}
    try:
        kube.custom.replace_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "resourceclaims", name, claim)
    except ApiException as error:  # a CRD without the status subresource keeps it on update
        if error.status != 404:
            raise
        kube.custom.replace_namespaced_custom_object(
            GROUP, VERSION, namespace, "resourceclaims", name, claim)
    return str(claim["metadata"]["uid"])


def test_slices_appear_shares_are_prepared_and_a_freed_claim_is_unprepared(kube: Kube) -> None:
    node, namespace = f"dra-{short_id()}", f"dra-{short_id()}"
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    raw(kube.core.create_node, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                                "status": {"capacity": resources, "allocatable": resources}})
    raw(kube.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": namespace}})
    agent = NodeAgentProcess(kubeconfig=os.environ["KUBECONFIG"], node=node, args=(
        "--dra-mode", "shared", "--fake-gpus", "4", "--fake-gpu-memory", "16Gi",
        "--dra-delete-slices"))
    kubelet = FakeDraKubelet(agent.registry)
    try:
        slices = eventually(lambda: node_slices(kube, node) or None, timeout=60.0,
                            what="the node's ResourceSlices")
        gpus = sorted(d["name"] for s in slices for d in s["spec"]["devices"])
        assert gpus == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
        kubelet.discover(timeout=30.0)
        a = _allocated_claim(kube, namespace, "a", node, "gpu-0", "6Gi")
        b = _allocated_claim(kube, namespace, "b", node, "gpu-0", "10Gi")
        answers = kubelet.prepare((namespace, "a", a), (namespace, "b", b))
        limits = []
        for uid in (a, b):
            assert answers[uid].error == ""
            env = dict(e.split("=", 1) for e in
                       agent.cdi_spec(uid)["devices"][0]["containerEdits"]["env"])
            assert env["CUDA_DEVICE_SM_LIMIT"] == "50"
            limits.append(int(env["CUDA_DEVICE_MEMORY_LIMIT_0"].rstrip("m")))
        assert limits == [6144, 10240] and sum(limits) <= 16384  # no more than the card
        # the pod of claim a is deleted: kubelet unprepares its claim
        ignore_missing(kube.custom.delete_namespaced_custom_object, GROUP, VERSION, namespace,
                       "resourceclaims", "a")
        assert kubelet.unprepare((namespace, "a", a))[a].error == ""
        assert not os.path.exists(agent.cdi_path(a))
        assert os.path.exists(agent.cdi_path(b))
    except BaseException:
        print(agent.log_tail())
        raise
    finally:
        kubelet.close()
        agent.stop()
        for name in ("a", "b"):
            ignore_missing(kube.custom.delete_namespaced_custom_object, GROUP, VERSION,
                           namespace, "resourceclaims", name)
        for found in node_slices(kube, node):
            ignore_missing(kube.custom.delete_cluster_custom_object, GROUP, VERSION,
                           "resourceslices", found["metadata"]["name"])
        ignore_missing(kube.core.delete_namespace, namespace)
        ignore_missing(kube.core.delete_node, node)
