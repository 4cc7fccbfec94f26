"""Sub-jobs: the partitions a PodGroup's ``spec.subGroupPolicy`` cuts a job's tasks into.

Volcano's ``pkg/scheduler/api/sub_job_info.go`` and the sub-job half of ``job_info.go``
(``getOrCreateSubJob``, ``getSubJobMatchValues``, ``CheckSubJobValid``,
``checkSubJobCondition``):

* a task goes to the first policy (in spec order) that selects it: the pod matches the
  policy's ``labelSelector`` (when given) and carries a non-empty value for every key of
  ``matchLabelKeys``; the values name its partition. A policy without ``matchLabelKeys``
  selects no task (Volcano files such pods under the default sub-job, as here);
* every other task is in the job's default sub-job, which needs 1 task (the job's
  ``minMember`` when the PodGroup has no policy) and has the PodGroup's own constraint;
* a partition needs ``subGroupSize`` of its tasks placed to be ready, and has the policy's
  ``networkTopology``; a policy's ``minSubGroups`` partitions must be ready for the job to be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.podgroup import NetworkTopology, PodGroup, SubGroupPolicy
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import READY_STATUS, TaskID, TaskStatus

__all__ = ["SubJob", "SubJobs", "partition_tasks"]


@dataclass(slots=True)
class SubJob:
    uid: str
    gid: str
    """The policy's group (``<job>/<policy>``); the job's uid for the default sub-job."""
    policy: str
    """The policy's name, ``""`` for the default sub-job."""
    min_available: int
    topology: NetworkTopology | None
    match_index: int = 0
    """The first match value when it is an integer (Volcano's ``MatchIndex``), else 0."""
    tasks: dict[TaskID, TaskInfo] = field(default_factory=dict)

    @property
    def priority(self) -> int:
        """The highest priority of its tasks (Volcano's ``SubJobInfo.Priority``)."""
        return max((t.priority for t in self.tasks.values()), default=0)

    def _count(self, status: TaskStatus) -> int:
        return sum(1 for t in self.tasks.values() if t.status & status)

    def _pending_best_effort(self) -> int:
        return sum(
            1 for t in self.tasks.values() if t.status is TaskStatus.PENDING and t.best_effort
        )

    def is_ready(self) -> bool:
        return self._count(READY_STATUS) + self._pending_best_effort() >= self.min_available

    def is_pipelined(self) -> bool:
        held = self._count(READY_STATUS | TaskStatus.PIPELINED)
        return held + self._pending_best_effort() >= self.min_available

    def pending_request(self) -> Resource:
        """What its pending tasks ask for together (Volcano's ``GetMinResources``)."""
        total = Resource()
        for task in self.tasks.values():
            if task.status is TaskStatus.PENDING:
                total.add(task.init_resreq)
        return total


@dataclass(slots=True)
class SubJobs:
    podgroup: PodGroup
    """The PodGroup object the tasks were partitioned by (a new one re-partitions)."""
    by_uid: dict[str, SubJob]
    of_task: dict[TaskID, str]
    min_sub_groups: dict[str, int]
    """Policy group → its ``minSubGroups``."""

    def of(self, task: TaskInfo) -> SubJob | None:
        uid = self.of_task.get(task.uid)
        return None if uid is None else self.by_uid[uid]

    def valid(self) -> bool:
        """Volcano's ``CheckSubJobValid``: each policy has at least ``minSubGroups``
        partitions (with tasks of any status)."""
        counts: dict[str, int] = {}
        for sub in self.by_uid.values():
            counts[sub.gid] = counts.get(sub.gid, 0) + 1
        return all(counts.get(gid, 0) >= need for gid, need in self.min_sub_groups.items())

    def enough(self, *, pipelined: bool) -> bool:
        """Volcano's ``CheckSubJobReady`` / ``CheckSubJobPipelined``: each policy with a
        positive ``minSubGroups`` has that many partitions ready (or pipelined)."""
        counts: dict[str, int] = {}
        for sub in self.by_uid.values():
            if sub.is_pipelined() if pipelined else sub.is_ready():
                counts[sub.gid] = counts.get(sub.gid, 0) + 1
        return all(
            counts.get(gid, 0) >= need for gid, need in self.min_sub_groups.items() if need > 0
        )


def _labels(task: TaskInfo) -> Mapping[str, Any]:
    labels = (task.pod.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _match_values(policy: SubGroupPolicy, labels: Mapping[str, Any]) -> list[str]:
    if policy.label_selector is not None and not policy.label_selector.matches(labels):
        return []
    values: list[str] = []
    for key in policy.match_label_keys:
        value = labels.get(key)
        if not isinstance(value, str) or not value:
            return []
        values.append(value)
    return values


def partition_tasks(
    job_uid: str, podgroup: PodGroup, *, min_available: int, tasks: Iterable[TaskInfo]
) -> SubJobs:
    by_uid: dict[str, SubJob] = {}
    of_task: dict[TaskID, str] = {}
    for task in tasks:
        sub: SubJob | None = None
        if podgroup.sub_groups:
            labels = _labels(task)
            for policy in podgroup.sub_groups:
                values = _match_values(policy, labels)
                if values:
                    uid = f"{job_uid}/{policy.name}-{'-'.join(values)}"
                    sub = by_uid.get(uid)
                    if sub is None:
                        index = int(values[0]) if values[0].lstrip("-").isdigit() else 0
                        sub = by_uid[uid] = SubJob(
                            uid=uid,
                            gid=f"{job_uid}/{policy.name}",
                            policy=policy.name,
                            min_available=policy.sub_group_size,
                            topology=policy.network_topology,
                            match_index=index,
                        )
                    break
        if sub is None:
            sub = by_uid.get(job_uid)
            if sub is None:
                sub = by_uid[job_uid] = SubJob(
                    uid=job_uid,
                    gid=job_uid,
                    policy="",
                    min_available=1 if podgroup.sub_groups else min_available,
                    topology=podgroup.network_topology,
                )
        sub.tasks[task.uid] = task
        of_task[task.uid] = sub.uid
    minimums = {f"{job_uid}/{p.name}": p.min_sub_groups for p in podgroup.sub_groups}
    return SubJobs(podgroup=podgroup, by_uid=by_uid, of_task=of_task, min_sub_groups=minimums)
