"""The message of a pending pod with no reason of its own: Volcano HEAD's
``SchedulerCache.RecordJobStatusEvent`` (``pkg/scheduler/cache/cache.go:1641``) gives such a
task (``TaskSchedulingReason`` returned no message: no fit error, no job fit error) the job's
``FitError()`` summary (``pkg/scheduler/api/job_info.go:837``), and "all nodes are
unavailable" only when that is empty, which it never is. Lahar wrote the latter."""

from __future__ import annotations

from scheduler.api.types import JobID, TaskStatus
from scheduler.framework import close
from tests.unit.test_idle_close import REQUESTS, RecordingSink, _job, _session, _task


def test_a_pending_task_without_a_reason_gets_the_jobs_fit_error() -> None:
    job = _job("j", "q", min_member=2)
    for i in range(2):
        job.add_task(_task("j", i, TaskStatus.PENDING, REQUESTS[0]))
    sink = RecordingSink()
    session = _session({JobID("j"): job}, ["q"], sink)
    close._close_job(session, job, "2026-01-02T00:00:00Z")
    messages = {call[3] for call in sink.calls if call[0] == "task"}
    assert messages == {"pod group is not ready, 2 Pending, 2 minAvailable; "
                        "Pending: 2 Unschedulable"}
