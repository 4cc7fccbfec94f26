"""JobInfo counts its best-effort tasks so readiness checks skip scanning pending tasks when
there are none; with some, pending best-effort tasks still count towards the gang
(Volcano's ``JobInfo.IsReady``: ``ReadyTaskNum() + PendingBestEffortTaskNum()``)."""

from __future__ import annotations

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PodGroup
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, QueueID, TaskID, TaskStatus


def _task(name: str, *, best_effort: bool, status: TaskStatus = TaskStatus.PENDING) -> TaskInfo:
    request = Resource() if best_effort else Resource(1000, 0)
    return TaskInfo(uid=TaskID(name), name=name, namespace="ns", job=JobID("ns/j"),
                    resreq=request, init_resreq=request, status=status, best_effort=best_effort)


def _job() -> JobInfo:
    return JobInfo(uid=JobID("ns/j"), name="j", namespace="ns",
                   podgroup=PodGroup("j", "ns", min_member=2), queue=QueueID("default"),
                   min_available=2)


def test_pending_best_effort_tasks_make_the_gang_as_they_come_and_go() -> None:
    job = _job()
    job.add_task(_task("run", best_effort=False, status=TaskStatus.RUNNING))
    assert job.pending_best_effort_num() == 0 and not job.is_ready()
    best_effort = _task("be", best_effort=True)
    job.add_task(best_effort)
    assert job.best_effort_tasks == 1
    assert job.pending_best_effort_num() == 1 and job.is_ready() and job.is_pipelined()
    assert job.clone().is_ready()
    job.update_task_status(best_effort, TaskStatus.ALLOCATED)  # counted as ready instead
    assert job.pending_best_effort_num() == 0 and job.is_ready()
    job.delete_task(best_effort)
    assert job.best_effort_tasks == 0 and not job.is_ready()
    job.add_task(_task("be2", best_effort=True))
    assert job.is_ready()


def test_a_job_without_best_effort_tasks_counts_none() -> None:
    job = _job()
    for i in range(3):
        job.add_task(_task(f"t{i}", best_effort=False))
    assert job.best_effort_tasks == 0 and job.pending_best_effort_num() == 0
    assert not job.is_ready()
