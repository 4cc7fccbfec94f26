"""A pod's fine-grained device request: validated and normalised per device type.

Follows Koordinator's DeviceShare PreFilter. The pod's requests are summed the standard way
(max of init containers, sum of app containers, plus overhead; a limit stands in for a missing
request), zero values dropped, legacy ``kubernetes.io/*`` names mapped onto the new ones (the
new name wins). The GPU names present must form one of the allowed combinations and pass the
percent rules; the result is, per device type, the request of one device instance and how many
instances are wanted. A request that breaks a rule raises :class:`DeviceRequestError` naming the
pod, the resource and the rule, so the pod is unschedulable-and-unresolvable with that reason.

One hole is closed: a ``gpu-core`` above 100 combined with a single-card memory request is
accepted by Koordinator and then never fits anywhere; here it is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.api.task import TaskInfo
from scheduler.devices.base import DeviceRequestError, task_annotations
from scheduler.devices.finegrained.hints import parse_joint
from scheduler.devices.finegrained.names import (
    DEPRECATED,
    FPGA,
    GPU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_NAMES,
    GPU_SHARED,
    HUAWEI_NPU,
    JOINT_ALLOCATE,
    RDMA,
    TYPE_FPGA,
    TYPE_GPU,
    TYPE_RDMA,
    VENDOR_GPUS,
)

__all__ = ["TypeRequest", "apply_hint", "normalise", "pod_device_requests", "validate"]

FINE_NAMES = frozenset({*GPU_NAMES, RDMA, FPGA, *DEPRECATED})


@dataclass(frozen=True, slots=True)
class TypeRequest:
    """What one device type asks of each chosen device, and how many devices."""

    type: str
    per_device: Mapping[str, int]
    count: int
    max_count: int = 0
    """Take up to this many when more are free (secondary joint types); 0 = ``count``."""
    shared: bool = False
    """A GPU request for part of a card (``False``: whole cards)."""
    per_device_ratio_only: bool = False
    """The GPU memory was asked as a ratio (bytes are filled in per chosen card)."""
    apply_for_all: bool = False
    """Every (selector-matching) device of the type, each at ``per_device``."""


def _container_list(pod: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    items = (pod.get("spec") or {}).get(key) or []
    return [c for c in items if isinstance(c, Mapping)]


def _container_values(task: TaskInfo, container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    out: dict[str, int] = {}
    for name in {*requests, *limits} & FINE_NAMES:
        raw: Any = requests.get(name, limits.get(name))
        if isinstance(raw, str) and raw.isdigit():  # the common case, without Decimal
            out[name] = int(raw)
            continue
        try:
            value = parse_quantity(raw)
        except QuantityError:
            raise DeviceRequestError(
                f"pod {task.key} container {container.get('name', '?')!r}: {name} {raw!r} is "
                f"not a quantity") from None
        if value < 0:
            raise DeviceRequestError(
                f"pod {task.key} container {container.get('name', '?')!r}: {name} {raw!r} is "
                f"negative")
        out[name] = int(value)
    return out


def pod_device_requests(task: TaskInfo) -> dict[str, int]:
    """The pod's fine-grained quantities (new names, zeros dropped)."""
    total: dict[str, int] = {}
    for container in _container_list(task.pod, "containers"):
        for name, value in _container_values(task, container).items():
            total[name] = total.get(name, 0) + value
    for container in _container_list(task.pod, "initContainers"):
        for name, value in _container_values(task, container).items():
            total[name] = max(total.get(name, 0), value)
    overhead = (task.pod.get("spec") or {}).get("overhead") or {}
    for name in set(overhead) & FINE_NAMES:
        try:
            total[name] = total.get(name, 0) + int(parse_quantity(overhead[name]))
        except QuantityError:
            raise DeviceRequestError(f"pod {task.key}: spec.overhead {name} "
                                     f"{overhead[name]!r} is not a quantity") from None
    out: dict[str, int] = {}
    for name, value in total.items():
        if value and name not in DEPRECATED:
            out[name] = value
    for name, value in total.items():
        if value and name in DEPRECATED:
            out.setdefault(DEPRECATED[name], value)  # the new spelling wins
    return out


def _percent_ok(value: int) -> bool:
    return value <= 100 or value % 100 == 0


def _check_percent(task: TaskInfo, name: str, value: int | None) -> None:
    if value is not None and not _percent_ok(value):
        raise DeviceRequestError(
            f"pod {task.key}: {name} {value} is invalid: a percentage must be at most 100 or a "
            f"multiple of 100 (whole devices)")


def validate(task: TaskInfo, requests: Mapping[str, int]) -> None:
    """Koordinator's allowed GPU combinations and percent rules, and the form of the
    joint-allocate annotation (raises on a violation)."""
    gpu = {name for name in requests if name in GPU_NAMES}
    where = f"pod {task.key}"
    if gpu & set(HUAWEI_NPU):
        raise DeviceRequestError(f"{where}: {', '.join(sorted(gpu & set(HUAWEI_NPU)))} "
                                 f"(Ascend vNPU templates) are not supported by lahar")
    vendor = gpu & set(VENDOR_GPUS)
    if (vendor and gpu != vendor) or len(vendor) > 1:
        raise DeviceRequestError(f"{where}: {', '.join(sorted(gpu))} cannot be combined: a "
                                 f"vendor GPU name must be the only GPU resource of the pod")
    if GPU in gpu:
        if gpu != {GPU}:
            raise DeviceRequestError(f"{where}: {GPU} cannot be combined with "
                                     f"{', '.join(sorted(gpu - {GPU}))}")
        _check_percent(task, GPU, requests[GPU])
    elif not vendor and gpu:
        core = requests.get(GPU_CORE)
        ratio = requests.get(GPU_MEMORY_RATIO)
        memory = requests.get(GPU_MEMORY)
        if memory and ratio:
            raise DeviceRequestError(f"{where}: {GPU_MEMORY} and {GPU_MEMORY_RATIO} cannot be "
                                     f"requested together: ask GPU memory one way")
        if not memory and not ratio:
            raise DeviceRequestError(f"{where}: {', '.join(sorted(gpu))} without "
                                     f"{GPU_MEMORY} or {GPU_MEMORY_RATIO}: GPU compute alone "
                                     f"is not a valid request")
        shared = requests.get(GPU_SHARED)
        if shared:
            for name, value in ((GPU_CORE, core), (GPU_MEMORY_RATIO, ratio)):
                if value is not None and (value % shared or value > 100 * shared):
                    raise DeviceRequestError(
                        f"{where}: {name} {value} is invalid with {GPU_SHARED} {shared}: it "
                        f"must be a multiple of {shared} and at most {100 * shared}")
        else:
            _check_percent(task, GPU_CORE, core)
            _check_percent(task, GPU_MEMORY_RATIO, ratio)
    for name in (RDMA, FPGA):
        _check_percent(task, name, requests.get(name))
    # Koordinator's preparePod parses the joint annotation for every pod with a device request
    # (parsePodDeviceShareExtensions), so a malformed one leaves even a GPU-only pod pending.
    joint = task_annotations(task).get(JOINT_ALLOCATE)
    if joint is not None:
        parse_joint(task, joint)


def _gpu_request(task: TaskInfo, requests: Mapping[str, int]) -> TypeRequest | None:
    vendor = [name for name in VENDOR_GPUS if name in requests]
    if vendor:
        count = requests[vendor[0]]
        return TypeRequest(TYPE_GPU, {GPU_CORE: 100, GPU_MEMORY_RATIO: 100}, count)
    if GPU in requests:
        value = requests[GPU]
        count = value // 100 if value > 100 else 1
        share = value // count
        return TypeRequest(TYPE_GPU, {GPU_CORE: share, GPU_MEMORY_RATIO: share}, count,
                           shared=share < 100, per_device_ratio_only=True)
    core = requests.get(GPU_CORE, 0)
    ratio = requests.get(GPU_MEMORY_RATIO, 0)
    memory = requests.get(GPU_MEMORY, 0)
    if not (core or ratio or memory):
        return None
    shared = requests.get(GPU_SHARED, 0)
    if shared:
        count = shared
    elif ratio:
        count = ratio // 100 if ratio > 100 and ratio % 100 == 0 else 1
    else:
        count = 1
    per: dict[str, int] = {}
    if core:
        per[GPU_CORE] = core // count
    if ratio:
        per[GPU_MEMORY_RATIO] = ratio // count
    if memory:
        per[GPU_MEMORY] = memory // count
    if per.get(GPU_CORE, 0) > 100:
        raise DeviceRequestError(
            f"pod {task.key}: {GPU_CORE} {core} asks for {per[GPU_CORE]}% of each of {count} "
            f"GPU(s), more than one GPU has; ask {GPU_MEMORY_RATIO} in whole GPUs too or use "
            f"{GPU_SHARED}")
    whole = not memory and per.get(GPU_MEMORY_RATIO, 0) >= 100
    return TypeRequest(TYPE_GPU, per, count, shared=not whole,
                       per_device_ratio_only=not memory)


def _unit_request(kind: str, name: str, value: int | None) -> TypeRequest | None:
    if not value:
        return None
    if value > 100 and value % 100 == 0:
        return TypeRequest(kind, {name: 100}, value // 100)
    return TypeRequest(kind, {name: value}, 1)


def apply_hint(request: TypeRequest, *, strategy: str, exclusive: str) -> TypeRequest:
    """A hint's ``allocateStrategy`` on an RDMA/FPGA request of at most 100 (§2.2)."""
    if request.type == TYPE_GPU or request.count != 1:
        return request  # larger quantities take the whole-device path first
    name, quantity = next(iter(request.per_device.items()))
    if strategy == "ApplyForAll":
        return replace(request, apply_for_all=True)
    if strategy == "RequestsAsCount":
        per = 100 if exclusive == "DeviceLevel" else 1
        return replace(request, per_device={name: per}, count=quantity)
    return request


def normalise(task: TaskInfo, requests: Mapping[str, int]) -> dict[str, TypeRequest]:
    """Per device type: the per-instance request and desired count (Koordinator §1.4)."""
    out: dict[str, TypeRequest] = {}
    gpu = _gpu_request(task, requests)
    if gpu is not None:
        out[TYPE_GPU] = gpu
    for kind, name in ((TYPE_RDMA, RDMA), (TYPE_FPGA, FPGA)):
        unit = _unit_request(kind, name, requests.get(name))
        if unit is not None:
            out[kind] = unit
    return out
