"""gang: all-or-nothing placement of a PodGroup's ``minMember`` tasks.

A job is valid when it has enough schedulable tasks (and per-role ``minTaskMember``), ready
when enough tasks hold resources, pipelined when enough more are reserved. At session close
it writes the ``Unschedulable`` / ``Scheduled`` PodGroup condition with Volcano's messages; an
invalid job (the actions pass it by) gets the ``NotEnoughResources`` condition of any unready
gang, as Volcano writes it since it stopped dropping invalid jobs from the session.

With ``spec.subGroupPolicy`` each partition is a gang of its own (``subGroupSize`` tasks,
:meth:`Gang.sub_job_ready`), and a job is valid, ready or pipelined only when each policy has
``minSubGroups`` partitions (valid / ready / pipelined), as Volcano's gang checks
``CheckSubJobValid``, ``CheckSubJobReady`` and ``CheckSubJobPipelined``.
"""

from __future__ import annotations

from collections import Counter

from scheduler.api.job import JobInfo
from scheduler.api.subjob import SubJob
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, READY_STATUS, TaskStatus, Vote
from scheduler.framework.close import rfc3339
from scheduler.framework.gangvictims import EvictionContext
from scheduler.framework.plugin import NoArgs, PluginBase
from scheduler.framework.session import Session

__all__ = ["Gang"]

_VALID = TaskStatus.PENDING | TaskStatus.PIPELINED | ALLOCATED_STATUS | TaskStatus.SUCCEEDED


def _roles_satisfied(job: JobInfo, status: TaskStatus) -> str | None:
    """The first role below its ``minTaskMember`` counting tasks in ``status``, else None."""
    minimums = job.min_task_member
    if not minimums or job.min_available < sum(minimums.values()):
        return None
    counts: Counter[str] = job.role_counts(status)
    if not status & TaskStatus.PENDING:  # pending best-effort tasks count towards readiness
        for task in job.task_status_index.get(TaskStatus.PENDING, {}).values():
            if task.best_effort:
                counts[task.role] += 1
    for role, minimum in sorted(minimums.items()):
        if counts[role] < minimum:
            return role
    return None


class Gang(PluginBase[NoArgs]):
    NAME = "gang"

    def job_valid(self, job: JobInfo) -> tuple[str, str] | None:
        if job.podgroup.sub_groups and not job.sub_jobs().valid():
            role = _roles_satisfied(job, _VALID)
            if role is None:
                return (
                    "NotEnoughPodsOfTask",
                    "Not enough valid subGroups of each task for gang-scheduling",
                )
        if not job.min_task_member and _running_gang(job):
            return None  # every task is valid (Running), and enough of them
        role = _roles_satisfied(job, _VALID)
        if role is not None:
            valid = job.role_counts(_VALID)[role]
            return (
                "NotEnoughPodsOfTask",
                f"Not enough valid pods of task {role} for gang-scheduling, "
                f"valid: {valid}, min: {job.min_task_member[role]}",
            )
        valid = job.valid_task_num()
        if valid < job.min_available:
            return (
                "NotEnoughTasks",
                "Not enough valid tasks for gang-scheduling, "
                f"valid: {valid}, min: {job.min_available}",
            )
        return None

    def job_ready(self, job: JobInfo) -> bool:
        return (
            job.is_ready()
            and _roles_satisfied(job, READY_STATUS) is None
            and (not job.podgroup.sub_groups or job.sub_jobs().enough(pipelined=False))
        )

    def job_pipelined(self, job: JobInfo) -> Vote:
        if (
            job.is_pipelined()
            and _roles_satisfied(job, READY_STATUS | TaskStatus.PIPELINED) is None
            and (not job.podgroup.sub_groups or job.sub_jobs().enough(pipelined=True))
        ):
            return Vote.PERMIT
        return Vote.REJECT

    def sub_job_ready(self, sub: SubJob) -> bool:
        return sub.is_ready()

    def sub_job_pipelined(self, sub: SubJob) -> Vote:
        return Vote.PERMIT if sub.is_pipelined() else Vote.REJECT

    def job_starving(self, job: JobInfo) -> bool:
        return job.is_starving()

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        # Only the gang count decides, not the per-role minimums (Volcano's JobOrderFn).
        left_ready, right_ready = left.is_ready(), right.is_ready()
        if left_ready == right_ready:
            return 0
        return 1 if left_ready else -1

    def job_order_key(self, job: JobInfo) -> bool:
        """Unready gangs first (``job_order`` as a key)."""
        return job.is_ready()

    def _victims(self, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        occupied: dict[str, int] = {}
        victims = []
        for task in candidates:
            job = self.ssn.jobs.get(task.job)
            if job is None:
                continue
            ready = occupied.setdefault(job.uid, job.ready_task_num())
            if ready > job.min_available:
                occupied[job.uid] = ready - 1
                victims.append(task)
        return victims, Vote.PERMIT

    def preemptable(
        self, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        return self._victims(candidates)

    def reclaimable(
        self, reclaimer: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        return self._victims(candidates)

    def unified_evictable(
        self, context: EvictionContext, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        """Gang eviction: every candidate, as Volcano's gang ``UnifiedEvictableFn``; the
        actions' bundles already keep a victim gang whole or above ``minAvailable``."""
        return list(candidates), Vote.PERMIT

    def on_session_close(self, session: Session) -> None:
        now = rfc3339(session.clock())
        # A settled job is a placed gang whose Scheduled condition is already set.
        for job in session.closing_jobs():
            if not session.is_valid(job):
                if self.job_valid(job) is None:
                    continue  # another plugin's verdict: the session writes it
                # Volcano keeps a job gang finds invalid in the session (since b5a8b2b39): the
                # actions pass it by, enqueue admits it, and here it is one more unready gang.
                session.invalid_jobs.pop(job.uid)
            if _running_gang(job):
                session.update_podgroup_condition(
                    job, "Scheduled", reason="tasks in gang are ready to be scheduled",
                    message="", now=now)
                _clear_unschedulable(job)
                continue
            if job.is_ready():
                if job.task_status_index.get(TaskStatus.PENDING) or job.count(READY_STATUS):
                    session.update_podgroup_condition(
                        job, "Scheduled", reason="tasks in gang are ready to be scheduled",
                        message="", now=now)
                    _clear_unschedulable(job)
                continue
            pending = job.task_status_index.get(TaskStatus.PENDING, {}).values()
            schedulable = job.ready_task_num() + sum(1 for t in pending if t.last_node)
            message = (
                f"{job.min_available - schedulable}/{len(job.tasks)} tasks in gang "
                f"unschedulable: {job.fit_error()}"
            )
            job.job_fit_error = message
            session.update_podgroup_condition(
                job, "Unschedulable", reason="NotEnoughResources", message=message, now=now)


def _running_gang(job: JobInfo) -> bool:
    """All tasks run and make the gang: ready, with ready tasks, known without counting
    (most jobs of a busy cluster, every cycle)."""
    running = len(job.task_status_index.get(TaskStatus.RUNNING, ()))
    return bool(running) and running == len(job.tasks) and running >= job.min_available


def _clear_unschedulable(job: JobInfo) -> None:
    job.podgroup.conditions = [
        c for c in job.podgroup.conditions if c.get("type") != "Unschedulable"
    ]
