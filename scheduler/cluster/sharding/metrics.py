"""Per-node allocation rates, as Volcano's sharding controller computes them.

``calculateMetricsFromPodsAndNode`` (pkg/controllers/sharding/node_utilization.go): the CPU
(and memory) requests of the node's containers, summed over its pods that are neither
Succeeded nor Failed nor mirror pods, divided by the node's *capacity* (not allocatable),
capped at 1. Init containers and overhead are not counted. A change of either rate by more
than 0.5 (``nodeUsageChangeThreshold``), or a node seen for the first time, is significant
(``isUtilizationSignificantlyChanged``) and asks for a new assignment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.resource import parse_quantity

__all__ = ["CHANGE_THRESHOLD", "NodeMetrics", "node_metrics", "pod_load", "significant_change"]

CHANGE_THRESHOLD = 0.5
_MIRROR = "kubernetes.io/config.mirror"


@dataclass(frozen=True, slots=True)
class NodeMetrics:
    cpu: float
    """CPU requests / CPU capacity, in [0, 1]."""
    memory: float
    pods: int


def _quantity(values: Mapping[str, Any] | None, key: str) -> float:
    if not values or values.get(key) in (None, ""):
        return 0.0
    return float(parse_quantity(str(values[key])))


def pod_load(pod: Mapping[str, Any]) -> tuple[float, float] | None:
    """A pod's (CPU, memory) requests as its node's rate counts them; None when it does not
    count (Succeeded, Failed, or a mirror pod)."""
    phase = (pod.get("status") or {}).get("phase")
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if phase in ("Succeeded", "Failed") or _MIRROR in annotations:
        return None
    cpu = memory = 0.0
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests")
        cpu += _quantity(requests, "cpu")
        memory += _quantity(requests, "memory")
    return cpu, memory


def node_metrics(node: Mapping[str, Any],
                 loads: Iterable[tuple[float, float]]) -> NodeMetrics:
    """The rates of ``node`` given the loads (:func:`pod_load`) of the pods counted there."""
    cpu = memory = 0.0
    count = 0
    for pod_cpu, pod_memory in loads:
        cpu += pod_cpu
        memory += pod_memory
        count += 1
    capacity = (node.get("status") or {}).get("capacity") or {}
    cpu_capacity = _quantity(capacity, "cpu")
    memory_capacity = _quantity(capacity, "memory")
    return NodeMetrics(cpu=min(1.0, cpu / cpu_capacity) if cpu_capacity > 0 else 0.0,
                       memory=min(1.0, memory / memory_capacity) if memory_capacity > 0 else 0.0,
                       pods=count)


def significant_change(old: NodeMetrics | None, new: NodeMetrics) -> bool:
    if old is None:
        return True
    return (abs(new.cpu - old.cpu) > CHANGE_THRESHOLD
            or abs(new.memory - old.memory) > CHANGE_THRESHOLD)
