"""Builders for fine-grained device tests: Device objects, nodes, pods and the conf."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tests.builders import make_node, make_pod
from tests.devices.conftest import deviceshare_conf

Obj = dict[str, Any]
GIB = 2**30
ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def finegrained_conf(*, scoring: str = "LeastAllocated", weight: int = 10,
                     **extra: Any) -> str:
    return deviceshare_conf(FineGrainedDeviceEnable=True, FineGrainedScoring=scoring,
                            ScheduleWeight=weight, **extra)


def gpu(minor: int, *, numa: int = 0, pcie: str = "pci0", memory: int = 16 * GIB,
        healthy: bool = True, labels: Mapping[str, str] | None = None,
        topology: bool = True) -> Obj:
    device: Obj = {"type": "gpu", "minor": minor, "id": f"GPU-{minor:04d}", "health": healthy,
                   "resources": {"koordinator.sh/gpu-core": "100",
                                 "koordinator.sh/gpu-memory": str(memory),
                                 "koordinator.sh/gpu-memory-ratio": "100"}}
    if topology:
        device["topology"] = {"socketID": numa, "nodeID": numa, "pcieID": pcie,
                              "busID": f"0000:{minor:02x}:00.0"}
    if labels:
        device["labels"] = dict(labels)
    return device


def nic(minor: int, *, numa: int = 0, pcie: str = "pci0", vfs: int = 0, healthy: bool = True,
        vf_labels: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None
        ) -> Obj:
    bus = f"0000:{0x50 + minor:02x}:00"
    device: Obj = {"type": "rdma", "minor": minor, "id": f"{bus}.0", "health": healthy,
                   "resources": {"koordinator.sh/rdma": "100"},
                   "topology": {"socketID": numa, "nodeID": numa, "pcieID": pcie,
                                "busID": f"{bus}.0"}}
    if vfs:
        device["vfGroups"] = [{"labels": dict(vf_labels or {}),
                               "vfs": [{"minor": -1, "busID": f"{bus}.{i + 1}"}
                                       for i in range(vfs)]}]
    if labels:
        device["labels"] = dict(labels)
    return device


def device_object(node: str, devices: Sequence[Obj], *, labels: Mapping[str, str] | None = None,
                  annotations: Mapping[str, str] | None = None) -> Obj:
    meta: Obj = {"name": node}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
            "metadata": meta, "spec": {"devices": list(devices)}}


def fg_node(name: str, *, gpus: int = 8, nics: int = 0, cpu: str = "64",
            labels: Mapping[str, str] | None = None) -> Obj:
    extra = {"nvidia.com/gpu": str(gpus), "koordinator.sh/gpu-core": str(100 * gpus),
             "koordinator.sh/gpu-memory-ratio": str(100 * gpus),
             "koordinator.sh/gpu-memory": f"{16 * gpus}Gi", "koordinator.sh/gpu": str(100 * gpus),
             "koordinator.sh/rdma": str(100 * max(nics, 1))}
    return make_node(name, cpu=cpu, memory="512Gi", extra=extra, labels=labels)


def fg_pod(name: str, *, annotations: Mapping[str, str] | None = None, **resources: str | int
           ) -> Obj:
    """``fg_pod("p", gpu_core=50, gpu_memory_ratio=50)``: underscores become dashes;
    ``nvidia=2`` is ``nvidia.com/gpu``; ``gpu_shared`` is ``koordinator.sh/gpu.shared``."""
    limits: dict[str, str] = {}
    for key, value in resources.items():
        if key == "nvidia":
            limits["nvidia.com/gpu"] = str(value)
        elif key == "gpu_shared":
            limits["koordinator.sh/gpu.shared"] = str(value)
        elif key.startswith("legacy_"):
            limits["kubernetes.io/" + key.removeprefix("legacy_").replace("_", "-")] = str(value)
        else:
            limits["koordinator.sh/" + key.replace("_", "-")] = str(value)
    return make_pod(name, limits=limits, annotations=annotations)


def allocated(run: Any, name: str) -> dict[str, list[Obj]]:
    text = run.pod(name)["metadata"].get("annotations", {}).get(ALLOCATED)
    return json.loads(text) if text else {}


def minors(run: Any, name: str, kind: str = "gpu") -> list[int]:
    return [entry["minor"] for entry in allocated(run, name).get(kind, [])]


def bound_pod(name: str, *, node: str, allocation: Mapping[str, Any], **resources: str | int
              ) -> Obj:
    pod = fg_pod(name, annotations={ALLOCATED: json.dumps(allocation)}, **resources)
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running"}
    return pod


def pcie_of(root: int) -> str:
    return f"pci0000:{root * 0x20:02x}"


def topo_gpus(*, gpus_per_root: int = 2, roots: int = 4, numas: int = 2) -> list[Obj]:
    """GPUs ``gpus_per_root`` to a PCIe root, roots spread evenly over NUMA nodes; minors in
    root order (root r holds minors r*g .. r*g+g-1)."""
    per_numa = roots // numas
    return [gpu(r * gpus_per_root + i, numa=r // per_numa, pcie=pcie_of(r))
            for r in range(roots) for i in range(gpus_per_root)]


def topo_nics(nics_per_root: Sequence[int], *, numas: int = 2, vfs: int = 0,
              first_minor: int = 0) -> list[Obj]:
    """``nics_per_root[r]`` NICs on PCIe root r (same NUMA layout as :func:`topo_gpus`)."""
    per_numa = max(len(nics_per_root) // numas, 1)
    out: list[Obj] = []
    minor = first_minor
    for root, count in enumerate(nics_per_root):
        for _ in range(count):
            out.append(nic(minor, numa=root // per_numa, pcie=pcie_of(root), vfs=vfs))
            minor += 1
    return out


def shared_gpu(minor: int, percent: int = 50) -> dict[str, Any]:
    """A device-allocated entry holding ``percent`` of GPU ``minor`` (16 GiB cards)."""
    return {"minor": minor, "resources": {
        "koordinator.sh/gpu-core": str(percent), "koordinator.sh/gpu-memory-ratio": str(percent),
        "koordinator.sh/gpu-memory": str(percent * 16 * GIB // 100)}}
