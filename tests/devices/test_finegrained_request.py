"""Fine-grained request validation (Koordinator §1.3) and normalisation (§1.4), row by row.

Matches ``ValidateDeviceRequest`` / ``isValidGPUResources`` and the per-type handlers'
``CalcDesiredRequestsAndCount`` of ``koordinator-sh/koordinator``
(``pkg/scheduler/plugins/deviceshare/utils.go``, ``device_handler_gpu.go``,
``device_handler_default.go``).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.task import task_from_pod
from scheduler.devices.base import DeviceRequestError
from scheduler.devices.finegrained.request import normalise, pod_device_requests, validate
from tests.builders import make_pod
from tests.devices.finegrained_helpers import GIB

CORE, MEM, RATIO = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory", \
    "koordinator.sh/gpu-memory-ratio"
SHARED, GPU, RDMA, FPGA = "koordinator.sh/gpu.shared", "koordinator.sh/gpu", \
    "koordinator.sh/rdma", "koordinator.sh/fpga"


def task_of(limits: dict[str, str], **kwargs: Any) -> Any:
    return task_from_pod(make_pod("p", limits=limits, **kwargs))


def check(limits: dict[str, str]) -> dict[str, Any]:
    task = task_of(limits)
    requests = pod_device_requests(task)
    validate(task, requests)
    return normalise(task, requests)


@pytest.mark.parametrize("limits", [
    pytest.param({"nvidia.com/gpu": "2"}, id="nvidia-alone"),
    pytest.param({"amd.com/gpu": "1"}, id="amd-alone"),
    pytest.param({"dcu.com/gpu": "1"}, id="dcu-alone"),
    pytest.param({GPU: "50"}, id="koord-gpu-at-most-100"),
    pytest.param({GPU: "300"}, id="koord-gpu-multiple-of-100"),
    pytest.param({MEM: "8Gi"}, id="memory-alone"),
    pytest.param({RATIO: "50"}, id="ratio-alone"),
    pytest.param({CORE: "50", MEM: "8Gi"}, id="core-and-memory"),
    pytest.param({CORE: "200", RATIO: "200"}, id="core-and-ratio-whole-cards"),
    pytest.param({SHARED: "2", MEM: "16Gi"}, id="shared-memory"),
    pytest.param({SHARED: "2", RATIO: "100", CORE: "100"}, id="shared-ratio-core"),
    pytest.param({RDMA: "100"}, id="rdma-alone"),
    pytest.param({RDMA: "300"}, id="rdma-multiple-of-100"),
    pytest.param({FPGA: "50"}, id="fpga-alone"),
])
def test_allowed_combinations(limits: dict[str, str]) -> None:
    assert check(limits)


@pytest.mark.parametrize(("limits", "words"), [
    pytest.param({CORE: "50"}, "GPU compute alone", id="core-alone"),
    pytest.param({MEM: "8Gi", RATIO: "50"}, "cannot be requested together", id="memory+ratio"),
    pytest.param({"nvidia.com/gpu": "1", CORE: "50", RATIO: "50"}, "vendor GPU name",
                 id="vendor-mixed-with-koord"),
    pytest.param({"nvidia.com/gpu": "1", "amd.com/gpu": "1"}, "vendor GPU name",
                 id="two-vendors"),
    pytest.param({GPU: "50", CORE: "50"}, "cannot be combined", id="koord-gpu-plus-anything"),
    pytest.param({GPU: "150"}, "multiple of 100", id="koord-gpu-150"),
    pytest.param({RATIO: "150"}, "multiple of 100", id="ratio-150"),
    pytest.param({CORE: "150", RATIO: "100"}, "multiple of 100", id="core-150"),
    pytest.param({SHARED: "2", RATIO: "51"}, "multiple of 2", id="shared-ratio-not-multiple"),
    pytest.param({SHARED: "2", RATIO: "300"}, "at most 200", id="shared-ratio-over"),
    pytest.param({SHARED: "2", CORE: "100"}, "without", id="shared-without-memory"),
    pytest.param({RDMA: "150"}, "multiple of 100", id="rdma-150"),
    pytest.param({FPGA: "101"}, "multiple of 100", id="fpga-101"),
    pytest.param({CORE: "200", RATIO: "50"}, "more than one GPU has",
                 id="core-200-single-card-fixed-hole"),
    pytest.param({"huawei.com/npu-core": "2", RATIO: "50"}, "not supported",
                 id="huawei-templates"),
])
def test_rejected_requests_name_the_resource_and_rule(limits: dict[str, str],
                                                      words: str) -> None:
    with pytest.raises(DeviceRequestError) as info:
        check(limits)
    assert words in str(info.value)
    assert "pod default/p" in str(info.value)


@pytest.mark.parametrize(("limits", "per_device", "count", "shared"), [
    pytest.param({"nvidia.com/gpu": "3"}, {CORE: 100, RATIO: 100}, 3, False, id="vendor-N"),
    pytest.param({GPU: "50"}, {CORE: 50, RATIO: 50}, 1, True, id="koord-gpu-50"),
    pytest.param({GPU: "200"}, {CORE: 100, RATIO: 100}, 2, False, id="koord-gpu-200"),
    pytest.param({GPU: "100"}, {CORE: 100, RATIO: 100}, 1, False, id="koord-gpu-100"),
    pytest.param({SHARED: "2", MEM: "16Gi", CORE: "100"}, {CORE: 50, MEM: 8 * GIB}, 2, True,
                 id="shared-2-bytes"),
    pytest.param({SHARED: "2", RATIO: "200"}, {RATIO: 100}, 2, False, id="shared-2-whole"),
    pytest.param({SHARED: "4", RATIO: "100", CORE: "40"}, {RATIO: 25, CORE: 10}, 4, True,
                 id="shared-4-ratio"),
    pytest.param({RATIO: "300", CORE: "300"}, {RATIO: 100, CORE: 100}, 3, False,
                 id="ratio-whole-cards"),
    pytest.param({RATIO: "60", CORE: "30"}, {RATIO: 60, CORE: 30}, 1, True, id="ratio-part"),
    pytest.param({MEM: "10Gi"}, {MEM: 10 * GIB}, 1, True, id="bytes-always-shared"),
])
def test_gpu_normalisation(limits: dict[str, str], per_device: dict[str, int], count: int,
                           shared: bool) -> None:
    gpu = check(limits)["gpu"]
    assert dict(gpu.per_device) == per_device
    assert gpu.count == count
    assert gpu.shared is shared


@pytest.mark.parametrize(("quantity", "per", "count"), [
    pytest.param("50", 50, 1, id="part"), pytest.param("100", 100, 1, id="one"),
    pytest.param("200", 100, 2, id="two-whole"), pytest.param("1", 1, 1, id="one-unit"),
])
@pytest.mark.parametrize(("kind", "name"), [("rdma", RDMA), ("fpga", FPGA)])
def test_unit_normalisation(kind: str, name: str, quantity: str, per: int, count: int) -> None:
    request = check({name: quantity})[kind]
    assert dict(request.per_device) == {name: per}
    assert request.count == count


def test_deprecated_names_map_and_the_new_name_wins() -> None:
    task = task_of({"kubernetes.io/gpu-core": "30", "kubernetes.io/gpu-memory-ratio": "40",
                    RATIO: "50"})
    assert pod_device_requests(task) == {CORE: 30, RATIO: 50}


def test_requests_sum_app_containers_and_take_the_largest_init_container() -> None:
    pod = make_pod("p", limits={RATIO: "20"})
    pod["spec"]["containers"].append({"name": "side", "resources": {"requests": {RATIO: "30"}}})
    pod["spec"]["initContainers"] = [{"name": "init", "resources": {"limits": {RATIO: "70"}}}]
    assert pod_device_requests(task_from_pod(pod)) == {RATIO: 70}
    pod["spec"]["initContainers"][0]["resources"]["limits"][RATIO] = "40"
    assert pod_device_requests(task_from_pod(pod)) == {RATIO: 50}
