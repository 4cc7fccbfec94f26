"""conformance: never evict critical system pods or anything in ``kube-system``."""

from __future__ import annotations

from scheduler.api.task import TaskInfo
from scheduler.api.types import Vote
from scheduler.framework.gangvictims import EvictionContext
from scheduler.framework.plugin import NoArgs, PluginBase

__all__ = ["Conformance"]

_CRITICAL = {"system-cluster-critical", "system-node-critical"}


def _evictable(task: TaskInfo) -> bool:
    class_name = (task.pod.get("spec") or {}).get("priorityClassName")
    return task.namespace != "kube-system" and class_name not in _CRITICAL


class Conformance(PluginBase[NoArgs]):
    NAME = "conformance"

    def preemptable(
        self, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        return [t for t in candidates if _evictable(t)], Vote.PERMIT

    def reclaimable(
        self, reclaimer: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        return [t for t in candidates if _evictable(t)], Vote.PERMIT

    def unified_evictable(
        self, context: EvictionContext, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        """Gang eviction: the same answer as :meth:`preemptable`, which does not depend on the
        evictor (critical and kube-system pods stay)."""
        return self.preemptable(context.task, candidates)
