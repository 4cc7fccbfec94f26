"""A malformed ``scheduling.koordinator.sh/device-joint-allocate`` leaves the pod pending
whatever device types it asks for, with a reason naming the annotation (Koordinator).
"""

from __future__ import annotations

import pytest

from tests.builders import simulate
from tests.devices.finegrained_helpers import (
    device_object,
    fg_node,
    fg_pod,
    finegrained_conf,
    gpu,
    minors,
    nic,
)

JOINT = "scheduling.koordinator.sh/device-joint-allocate"


def cluster(*pods: dict) -> list[dict]:
    return [fg_node("n1", gpus=2, nics=1), device_object("n1", [gpu(0), gpu(1), nic(0)]), *pods]


@pytest.mark.parametrize(
    ("resources", "text", "why"),
    [
        pytest.param({"nvidia": 1}, '{"deviceTypes": ["gpu", "rdma"',
                     "is not JSON: Expecting ',' delimiter", id="gpu-only-not-json"),
        pytest.param({"gpu_core": 50, "gpu_memory_ratio": 50}, '{"deviceTypes": "gpu"}',
                     ": field deviceTypes: must list gpu, rdma or fpga", id="shared-gpu-not-list"),
        pytest.param({"rdma": 1}, '["gpu", "rdma"]', " must be an object", id="rdma-only-array"),
        pytest.param({"nvidia": 1, "rdma": 1}, "{", "is not JSON", id="two-types"),
    ],
)
def test_malformed_joint_annotation_keeps_the_pod_pending(resources: dict[str, int], text: str,
                                                          why: str) -> None:
    """Koordinator's ``preparePod`` (deviceshare/utils.go) calls
    ``parsePodDeviceShareExtensions`` for every pod with a device request; its
    ``GetDeviceJointAllocate`` error is returned as UnschedulableAndUnresolvable ("invalid
    DeviceJointAllocate annotation"), however many device types the pod asks for. Lahar read
    the annotation only for pods asking for two types or more, so a GPU-only pod was placed."""
    run = simulate(cluster(fg_pod("p", annotations={JOINT: text}, **resources)),
                   conf=finegrained_conf())
    assert run.node_of("p") is None
    reason = run.reason("p")
    assert reason.startswith(f"0/1 nodes are unavailable: pod default/p: annotation {JOINT}")
    assert why in reason
    assert any(reason == e["message"] for e in run.events("FailedScheduling"))


def test_well_formed_joint_annotation_on_a_one_type_pod_is_placed() -> None:
    """A joint annotation that parses, on a GPU-only pod, is kept to the types it asks for
    (``parsePodDeviceShareExtensions`` drops types without a request): a plain GPU choice."""
    run = simulate(cluster(fg_pod("p", nvidia=1,
                                  annotations={JOINT: '{"deviceTypes": ["gpu", "rdma"]}'})),
                   conf=finegrained_conf())
    assert minors(run, "p") == [0]


def test_pod_without_device_request_ignores_the_annotation() -> None:
    """``preparePod`` skips a pod without a device request before reading any annotation."""
    run = simulate(cluster(fg_pod("p", annotations={JOINT: "{"})), conf=finegrained_conf())
    assert run.node_of("p") == "n1"
