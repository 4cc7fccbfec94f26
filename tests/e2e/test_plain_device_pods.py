"""Plain device pods (no PodGroup made by the test) bind through the API server.

``lahar run``'s podgroup controller writes each plain pod a PodGroup whose ``minResources``
are the pod's requests, device amounts included, as Volcano's controller does
(``pkg/controllers/podgroup/pg_controller_handler.go`` ``createNormalPodPGIfNotExist``,
``CalTaskRequests``). The scheduler must read those amounts as Volcano's ``NewResource`` does,
without the names of ``IgnoredDevicesList`` (``pkg/scheduler/api/resource_info.go``), or
``overcommit`` rejects the job for ever because no node total carries a per-device name
(``nvidia.com/gpumem``, ``volcano.sh/vgpu-memory``, ``koordinator.sh/gpu.shared``, ...).
One case per family: GPU share, GPU number, vGPU with Volcano's and with HAMi's names, and
Koordinator's fine-grained GPUs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.e2e.conftest import Case
from tests.e2e.kube import (
    KOORDINATOR,
    ROOT,
    eventually,
    ignore_missing,
    make_pod,
    node_name_of,
    raw,
)
from tests.e2e.test_devices import conf_with

FINEGRAINED_CONF = (ROOT / "conf" / "finegrained.conf").read_text()
VOLCANO_REGISTER = ("GPU-e2e0,10,40000,NVIDIA-A100,true,hami-core:"
                    "GPU-e2e1,10,40000,NVIDIA-A100,true,hami-core:")
HAMI_REGISTER = json.dumps([{"id": f"GPU-e2eh{i}", "index": i, "count": 10, "devmem": 24000,
                             "devcore": 100, "type": "NVIDIA-L4", "health": True,
                             "mode": "hami-core"} for i in range(2)])


def _koord_gpu(minor: int) -> dict[str, Any]:
    return {"type": "gpu", "minor": minor, "id": f"GPU-e2ef-{minor}", "health": True,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi",
                          "koordinator.sh/gpu-memory-ratio": "100"},
            "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0000:00",
                         "busID": f"0000:{16 + minor:02x}:00.0"}}


@dataclass(frozen=True)
class Family:
    conf: str
    capacity: dict[str, str]
    limits: dict[str, str]
    node_annotations: dict[str, str] = field(default_factory=dict)
    device_object: bool = False


FAMILIES = {
    "gpu-share": Family(
        conf_with({"deviceshare.GPUSharingEnable": True}),
        {"volcano.sh/gpu-memory": "32000", "volcano.sh/gpu-number": "2"},
        {"volcano.sh/gpu-memory": "10000"}),
    "gpu-number": Family(
        conf_with({"deviceshare.GPUNumberEnable": True}),
        {"volcano.sh/gpu-memory": "32000", "volcano.sh/gpu-number": "2"},
        {"volcano.sh/gpu-number": "1"}),
    "vgpu-volcano": Family(
        conf_with({"deviceshare.VGPUEnable": True, "deviceshare.VGPUProfile": "volcano"}),
        {"volcano.sh/vgpu-number": "20", "volcano.sh/vgpu-memory": "80000",
         "volcano.sh/vgpu-cores": "200"},
        {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "8000",
         "volcano.sh/vgpu-cores": "30"},
        node_annotations={"volcano.sh/node-vgpu-register": VOLCANO_REGISTER}),
    "vgpu-hami": Family(
        conf_with({"deviceshare.VGPUEnable": True, "deviceshare.VGPUProfile": "hami"}),
        {"nvidia.com/gpu": "20"},
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"},
        node_annotations={"hami.io/node-nvidia-register": HAMI_REGISTER}),
    "fine-grained": Family(
        FINEGRAINED_CONF,
        {"nvidia.com/gpu": "2", "koordinator.sh/gpu": "200", "koordinator.sh/gpu-core": "200",
         "koordinator.sh/gpu-memory-ratio": "200", "koordinator.sh/gpu-memory": "160Gi"},
        {"koordinator.sh/gpu.shared": "2", "koordinator.sh/gpu-core": "100",
         "koordinator.sh/gpu-memory-ratio": "100"},
        device_object=True),
}


def _plain_pod(case: Case, name: str, limits: dict[str, str]) -> dict[str, Any]:
    pod = make_pod(name, scheduler=case.scheduler, group="", run_id=case.settings.run_id,
                   cpu_milli=case.unit, node_selector=case.selector, limits=limits)
    del pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
    return pod


@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES.keys())
def test_a_plain_device_pod_gets_its_podgroup_and_binds(own_case: Case, family: Family) -> None:
    case = own_case
    if not case.settings.fake_nodes:
        pytest.skip("needs nodes advertising known device capacity (LAHAR_E2E_FAKE_NODES=1)")
    if family.device_object:
        reason = case.kube.ensure_device_crd()
        if reason:
            pytest.skip(reason)
    (node,) = case.add_nodes(1, units=8, extra=family.capacity,
                             annotations=family.node_annotations)
    if family.device_object:
        raw(case.kube.custom.create_cluster_custom_object, *KOORDINATOR, "devices",
            {"apiVersion": "/".join(KOORDINATOR), "kind": "Device", "metadata": {"name": node},
             "spec": {"devices": [_koord_gpu(0), _koord_gpu(1)]}})
        case.cleanups.append(lambda: ignore_missing(
            case.kube.custom.delete_cluster_custom_object, *KOORDINATOR, "devices", node))
    pod = _plain_pod(case, "plain", family.limits)
    case.kube.create_pod(case.namespace, pod)
    scheduler = case.start_scheduler(conf=family.conf)
    scheduler.wait_serving()
    eventually(lambda: node_name_of(case.kube.pod(case.namespace, "plain")) == node,
               timeout=30.0, what="the plain device pod bound")
    uid = case.kube.pod(case.namespace, "plain")["metadata"]["uid"]

    def podgroup() -> dict[str, Any] | None:  # written off the scheduling path, maybe later
        found = raw(case.kube.custom.list_namespaced_custom_object, "scheduling.volcano.sh",
                    "v1beta1", case.namespace, "podgroups").get("items") or []
        return next((g for g in found if g["metadata"]["name"] == f"podgroup-{uid}"), None)

    group = eventually(podgroup, timeout=30.0, what="the PodGroup lahar run wrote")
    # written as Volcano's controller writes it: the device amounts are in minResources
    assert set(family.limits) <= set(group["spec"]["minResources"])
