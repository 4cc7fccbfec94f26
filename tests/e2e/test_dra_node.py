"""End to end, the node half of DRA on a real API server: ``lahar node-agent --dra --dra-mode
shared --fake-gpus 4`` as a process, the fake DRA kubelet, and ResourceClaims allocated as the
scheduler writes them.

Works on the shared 1.28 test server: the test-only ``resource.k8s.io/v1`` CRDs of
``test_dra.py`` are installed when the server lacks the group (and removed again), and no pod
carries ``spec.resourceClaims`` (which a 1.28 server without the ``DynamicResourceAllocation``
gate drops): the test writes each claim's ``status.allocation`` itself, as ``lahar run``'s DRA
allocator does, and calls the plugin as kubelet would for the pod. The scheduler's half of the
flow (a gang's pods getting their claims allocated) is ``test_dra.py``'s, which needs a gated
server. Peers: kubelet's DRA manager (``pkg/kubelet/cm/dra/manager.go`` ``PrepareResources``
/ ``UnprepareResources``), HAMi's DRA driver for the shared limits.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.devices.nodeagent.drakubelet import FakeDraKubelet
from tests.e2e.kube import Kube, eventually, ignore_missing, raw, short_id

GROUP, VERSION = "resource.k8s.io", "v1"
CRDS = Path(__file__).with_name("dra-test-only-crds.yaml")
PLURALS = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
ROOT = Path(__file__).resolve().parents[2]
DRIVER = "gpu.lahar.dev"


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        pytest.skip("KUBECONFIG is not set: the e2e suite needs a cluster")
    made = Kube(kubeconfig)
    installed: list[str] = []
    if not all(made.served(GROUP, VERSION, plural) for plural in PLURALS):
        for document in yaml.safe_load_all(CRDS.read_text()):
            if not document:
                continue
            try:
                raw(made.extensions.create_custom_resource_definition, document)
                installed.append(document["metadata"]["name"])
            except ApiException as error:
                if error.status != 409:
                    raise
        for plural in PLURALS:
            eventually(lambda plural=plural: made.served(GROUP, VERSION, plural) or None,
                       timeout=60.0, what=f"{plural}.{GROUP} served")
    try:
        yield made
    finally:
        for name in installed:
            ignore_missing(made.extensions.delete_custom_resource_definition, name)


def _slices(kube: Kube, node: str) -> list[dict[str, Any]]:
    found = kube.custom.list_cluster_custom_object(GROUP, VERSION, "resourceslices")
    return [s for s in found.get("items") or [] if s["spec"].get("nodeName") == node]


def _allocated_claim(kube: Kube, namespace: str, name: str, node: str, device: str,
                     memory: str) -> str:
    claim = kube.custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "resourceclaims", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "shared-gpu.lahar.dev",
                "capacity": {"requests": {"memory": memory}}}}]}}})
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
    workdir = tempfile.mkdtemp(prefix="la-", dir="/tmp")
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    raw(kube.core.create_node, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                                "status": {"capacity": resources, "allocatable": resources}})
    raw(kube.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": namespace}})
    registry, cdi = os.path.join(workdir, "reg"), os.path.join(workdir, "cdi")
    log = open(os.path.join(workdir, "agent.log"), "wb")  # noqa: SIM115
    agent = subprocess.Popen(
        [sys.executable, "-m", "scheduler", "node-agent", "--kubeconfig",
         os.environ["KUBECONFIG"], "--node-name", node, "--dra", "--dra-mode", "shared",
         "--fake-gpus", "4", "--fake-gpu-memory", "16Gi", "--kubelet-plugins-registry-dir",
         registry, "--kubelet-plugins-dir", os.path.join(workdir, "plugins"), "--cdi-root", cdi,
         "--dra-delete-slices"], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=log, stderr=subprocess.STDOUT)
    kubelet = FakeDraKubelet(registry)
    try:
        slices = eventually(lambda: _slices(kube, node) or None, timeout=60.0,
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
            with open(os.path.join(cdi, f"k8s.{DRIVER}-claim_{uid}.json"),
                      encoding="utf-8") as f:
                env = dict(e.split("=", 1) for e in
                           json.load(f)["devices"][0]["containerEdits"]["env"])
            assert env["CUDA_DEVICE_SM_LIMIT"] == "50"
            limits.append(int(env["CUDA_DEVICE_MEMORY_LIMIT_0"].rstrip("m")))
        assert limits == [6144, 10240] and sum(limits) <= 16384  # no more than the card
        # the pod of claim a is deleted: kubelet unprepares its claim
        ignore_missing(kube.custom.delete_namespaced_custom_object, GROUP, VERSION, namespace,
                       "resourceclaims", "a")
        assert kubelet.unprepare((namespace, "a", a))[a].error == ""
        assert not os.path.exists(os.path.join(cdi, f"k8s.{DRIVER}-claim_{a}.json"))
        assert os.path.exists(os.path.join(cdi, f"k8s.{DRIVER}-claim_{b}.json"))
    except BaseException:
        log.flush()
        print(Path(log.name).read_text(errors="replace")[-3000:])
        raise
    finally:
        kubelet.close()
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(15)
        except subprocess.TimeoutExpired:
            agent.kill()
        log.close()
        for name in ("a", "b"):
            ignore_missing(kube.custom.delete_namespaced_custom_object, GROUP, VERSION,
                           namespace, "resourceclaims", name)
        for found in _slices(kube, node):
            ignore_missing(kube.custom.delete_cluster_custom_object, GROUP, VERSION,
                           "resourceslices", found["metadata"]["name"])
        ignore_missing(kube.core.delete_namespace, namespace)
        ignore_missing(kube.core.delete_node, node)
        shutil.rmtree(workdir, ignore_errors=True)
