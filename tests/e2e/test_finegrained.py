"""Fine-grained devices through the API server: a Device object, shared and whole GPUs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.conftest import Case
from tests.e2e.kube import KOORDINATOR, ROOT, annotations, eventually, ignore_missing, raw

CONF = (ROOT / "conf" / "finegrained.conf").read_text()
ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def _gpu(minor: int, pcie: str) -> dict[str, Any]:
    return {"type": "gpu", "minor": minor, "id": f"GPU-e2e-{minor}", "health": True,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi",
                          "koordinator.sh/gpu-memory-ratio": "100"},
            "topology": {"socketID": 0, "nodeID": 0, "pcieID": pcie,
                         "busID": f"0000:{16 + minor:02x}:00.0"}}


def test_shared_and_whole_gpus_are_chosen_from_the_device_object(own_case: Case) -> None:
    """Koordinator's DeviceShare (``PreFilter``/``Filter``/``Reserve``/``PreBind``): two pods of
    60% of a GPU cannot share a card, a whole-GPU pod takes a card of its own, and a fourth
    pod finds no card left; the choice is written as ``device-allocated``."""
    case = own_case
    if not case.settings.fake_nodes:
        pytest.skip("needs a node with a Device object of known GPUs (LAHAR_E2E_FAKE_NODES=1)")
    reason = case.kube.ensure_device_crd()
    if reason:
        pytest.skip(reason)
    (node,) = case.add_nodes(1, units=8, extra={
        "nvidia.com/gpu": "3", "koordinator.sh/gpu": "300", "koordinator.sh/gpu-core": "300",
        "koordinator.sh/gpu-memory-ratio": "300", "koordinator.sh/gpu-memory": "240Gi"})
    raw(case.kube.custom.create_cluster_custom_object, *KOORDINATOR, "devices",
        {"apiVersion": "/".join(KOORDINATOR), "kind": "Device", "metadata": {"name": node},
         "spec": {"devices": [_gpu(0, "pci0000:00"), _gpu(1, "pci0000:00"),
                              _gpu(2, "pci0000:20")]}})
    case.cleanups.append(lambda: ignore_missing(
        case.kube.custom.delete_cluster_custom_object, *KOORDINATOR, "devices", node))
    share = {"koordinator.sh/gpu-core": "60", "koordinator.sh/gpu-memory-ratio": "60"}
    pods = [*case.job("share-a", pods=1, limits=share),
            *case.job("share-b", pods=1, limits=share),
            *case.job("whole", pods=1, limits={"nvidia.com/gpu": "1"})]
    scheduler = case.start_scheduler(conf=CONF)
    scheduler.wait_serving()
    eventually(lambda: len(case.bound(pods)) == 3, what="three GPU pods bound")
    minors: list[int] = []
    for pod in pods:
        allocated = json.loads(annotations(case.kube.pod(case.namespace, pod))[ALLOCATED])
        minors += [entry["minor"] for entry in allocated["gpu"]]
    assert sorted(minors) == [0, 1, 2], minors  # every pod on a card of its own
    extra = case.job("share-c", pods=1, limits=share)
    eventually(lambda: case.kube.events(case.namespace, name=extra[0],
                                        reason="FailedScheduling"),
               what="FailedScheduling on the pod no card can hold")
    time.sleep(1.0)
    assert case.bound(extra) == []
