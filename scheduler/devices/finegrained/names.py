"""Koordinator's fine-grained device names: resources, annotations, labels, and old spellings.

These strings are the wire format shared with koordlet and its runtime hooks (a pod's
``scheduling.koordinator.sh/device-allocated`` annotation is what the node side reads), so
they are spelled exactly as Koordinator spells them.
"""

from __future__ import annotations

__all__ = [
    "ALLOCATED", "ALLOCATE_HINT", "CHECKPOINTS", "DEPRECATED", "FPGA", "GPU", "GPU_CORE",
    "GPU_MEMORY", "GPU_MEMORY_RATIO", "GPU_MINORS", "GPU_NAMES", "GPU_PARTITIONS",
    "GPU_SHARED", "HAMI_CORE", "ISOLATION_LABEL", "JOINT_ALLOCATE", "LABEL_GPU_MODEL",
    "LABEL_GPU_VENDOR",
    "LABEL_PARTITION_POLICY", "PARTITION_SPEC", "RDMA", "TYPE_FPGA", "TYPE_GPU", "TYPE_RDMA",
    "VENDOR_GPUS",
]

PREFIX = "koordinator.sh/"

GPU = "koordinator.sh/gpu"
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
GPU_SHARED = "koordinator.sh/gpu.shared"
RDMA = "koordinator.sh/rdma"
FPGA = "koordinator.sh/fpga"
NVIDIA_GPU = "nvidia.com/gpu"
VENDOR_GPUS = ("nvidia.com/gpu", "amd.com/gpu", "dcu.com/gpu")
"""Whole-device vendor names, converted to whole GPUs on nodes that have a Device object."""
HUAWEI_NPU = ("huawei.com/npu-core", "huawei.com/npu-cpu", "huawei.com/npu-dvpp")

GPU_NAMES = frozenset({GPU, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED, *VENDOR_GPUS,
                       *HUAWEI_NPU})

DEPRECATED = {
    "kubernetes.io/gpu": GPU,
    "kubernetes.io/gpu-core": GPU_CORE,
    "kubernetes.io/gpu-memory": GPU_MEMORY,
    "kubernetes.io/gpu-memory-ratio": GPU_MEMORY_RATIO,
    "kubernetes.io/rdma": RDMA,
    "kubernetes.io/fpga": FPGA,
}
"""Legacy name → new name (Koordinator's transformer; the new name wins when both exist)."""

TYPE_GPU = "gpu"
TYPE_RDMA = "rdma"
TYPE_FPGA = "fpga"
TYPES = (TYPE_GPU, TYPE_RDMA, TYPE_FPGA)
UNIT_OF = {TYPE_RDMA: RDMA, TYPE_FPGA: FPGA}
"""The single percent dimension of the non-GPU device types."""

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
ALLOCATE_HINT = "scheduling.koordinator.sh/device-allocate-hint"
JOINT_ALLOCATE = "scheduling.koordinator.sh/device-joint-allocate"
PARTITION_SPEC = "scheduling.koordinator.sh/gpu-partition-spec"
GPU_PARTITIONS = "scheduling.koordinator.sh/gpu-partitions"
GPU_MINORS = "scheduling.koordinator.sh/gpu-minors"
CHECKPOINTS = "node.koordinator.sh/gpu-checkpoints"

LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_PARTITION_POLICY = "node.koordinator.sh/gpu-partition-policy"
ISOLATION_LABEL = "koordinator.sh/gpu-isolation-provider"
"""Pod and Node label: which library isolates a shared GPU (``HAMi-core``)."""
HAMI_CORE = "HAMi-core"
