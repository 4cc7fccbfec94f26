"""priority: higher-priority jobs and tasks first; victims only of strictly lower priority.

Task priority is the pod's ``spec.priority`` (or the ``volcano.sh/task-priority`` annotation);
job priority is the value of the PodGroup's PriorityClass.
"""

from __future__ import annotations

from scheduler.api.job import JobInfo
from scheduler.api.task import TaskInfo
from scheduler.api.types import Vote
from scheduler.framework.gangvictims import EvictionContext, EvictionKind
from scheduler.framework.plugin import NoArgs, PluginBase

__all__ = ["Priority"]


class Priority(PluginBase[NoArgs]):
    NAME = "priority"

    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        return (right.priority > left.priority) - (right.priority < left.priority)

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        return (right.priority > left.priority) - (right.priority < left.priority)

    def job_order_key(self, job: JobInfo) -> int:
        return -job.priority

    def preemptable(
        self, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        jobs = self.ssn.jobs
        preemptor_job = jobs.get(preemptor.job)
        victims = []
        for task in candidates:
            victim_job = jobs.get(task.job)
            if preemptor_job is None or victim_job is None:
                continue
            if victim_job.uid != preemptor_job.uid:
                if victim_job.priority < preemptor_job.priority:
                    victims.append(task)
            elif task.priority < preemptor.priority:
                victims.append(task)
        return victims, Vote.PERMIT

    def unified_evictable(
        self, context: EvictionContext, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        """Gang eviction (Volcano's priority ``UnifiedEvictableFn``): gangpreempt takes only
        jobs of lower priority than the evicting job; gangreclaim is about queue shares and
        lets every candidate through."""
        if context.kind is EvictionKind.GANG_RECLAIM:
            return list(candidates), Vote.PERMIT
        jobs = self.ssn.jobs
        return [task for task in candidates
                if (job := jobs.get(task.job)) is not None and job.priority < context.job.priority
                ], Vote.PERMIT

    def job_starving(self, job: JobInfo) -> bool:
        return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)
