"""What a runtime hook injects into a container of a pod with fine-grained devices.

A pure function of the pod's ``scheduling.koordinator.sh/device-allocated`` annotation (and
its isolation label), following koordlet's GPU hook: ``NVIDIA_VISIBLE_DEVICES`` lists the
allocated GPU **minors**; for a shared card (the first GPU's memory ratio below 100) isolated
by HAMi-core (pod label ``koordinator.sh/gpu-isolation-provider: HAMi-core``) the container
also gets ``CUDA_DEVICE_MEMORY_LIMIT`` (bytes, a plain integer) and ``CUDA_DEVICE_SM_LIMIT``
(the ``gpu-core`` percent). Every container of the pod gets the same environment: koordlet
runs the hook at the creation of each container (``PreCreateContainer``, through NRI or its
runtime proxy), with no regard to what the container asks for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from scheduler.devices.finegrained.names import (
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    HAMI_CORE,
    ISOLATION_LABEL,
    TYPE_GPU,
)

if TYPE_CHECKING:  # the ledger pulls in numpy: the node agent imports it only when needed
    from scheduler.devices.finegrained.ledger import Allocation

__all__ = ["container_env"]


def container_env(allocation: Allocation | str, *, labels: Mapping[str, str] | None = None,
                  isolate: bool | None = None) -> dict[str, str]:
    """The environment for ``allocation`` (the annotation text or decoded); ``isolate``
    overrides the pod label. Raises ``ValueError`` for an unreadable annotation."""
    if isinstance(allocation, str):
        from scheduler.devices.finegrained.ledger import decode_allocation

        allocation = decode_allocation(allocation)
    gpus = allocation.get(TYPE_GPU, ())
    if not gpus:
        return {}
    env = {"NVIDIA_VISIBLE_DEVICES": ",".join(str(p.minor) for p in gpus)}
    if isolate is None:
        isolate = (labels or {}).get(ISOLATION_LABEL) == HAMI_CORE
    first = gpus[0].resources
    if isolate and first.get(GPU_MEMORY_RATIO, 100) < 100:
        if GPU_MEMORY in first:
            env["CUDA_DEVICE_MEMORY_LIMIT"] = str(first[GPU_MEMORY])
        if GPU_CORE in first:
            env["CUDA_DEVICE_SM_LIMIT"] = str(first[GPU_CORE])
    return env
