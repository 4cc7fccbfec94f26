"""Properties: the per-job shortcuts of an idle-ish cycle give what a full computation gives.

* ``JobInfo.allocated_exact``: whenever it holds, the job's running ``allocated`` total equals
  (fields and scalar names) a fresh sum of its allocated tasks, after any sequence of task
  additions, status changes and deletions.
* Close's queue ``status.allocated`` (``queue_allocations``) and proportion's per-queue
  allocated/request totals, computed per job, equal the task-by-task sums of Volcano's
  ``proportion.OnSessionOpen`` (``pkg/scheduler/plugins/proportion/proportion.go``) and of the
  queue status update in ``pkg/scheduler/framework/job_updater.go``.
* drf's shares derived on demand order jobs as shares derived at open.
* Gang's close and close's shortcut for jobs whose tasks all run writes the same PodGroup status, event,
  ``unready`` count and pod conditions as the general path (Volcano's ``getPodGroupPhase`` and
  ``jobStatus`` in ``pkg/scheduler/framework/session.go``).
"""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from plugins import gang as gang_module
from plugins.drf import Drf, dominant_share
from plugins.gang import Gang
from plugins.proportion import Proportion, ProportionArgs
from scheduler.api.job import JobInfo
from scheduler.api.podgroup import (
    PHASE_INQUEUE,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_UNKNOWN,
    PodGroup,
)
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import ALLOCATED_STATUS, JobID, QueueID, TaskID, TaskStatus
from scheduler.framework import close
from scheduler.framework.plugin import NoArgs
from scheduler.framework.session import Session
from scheduler.framework.snapshot import Snapshot

STATUSES = [
    TaskStatus.PENDING,
    TaskStatus.ALLOCATED,
    TaskStatus.PIPELINED,
    TaskStatus.BINDING,
    TaskStatus.BOUND,
    TaskStatus.RUNNING,
    TaskStatus.RELEASING,
    TaskStatus.SUCCEEDED,
    TaskStatus.FAILED,
]
REQUESTS = [
    Resource(1000, 2**30, {"pods": 1}),
    Resource(500, 3 * 2**20, {"pods": 1, "nvidia.com/gpu": 1}),
    Resource(100.5, 7, {"pods": 1}),  # a non-integral total must not take the shortcut
    Resource(250, 0, {"pods": 1, "example.com/fpga": 0}),  # a scalar requested at 0
    Resource(0.1, 0, {"pods": 1}),
]


class RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def bind(self, tasks: Any) -> None:
        self.calls.append(("bind", [t.uid for t in tasks]))

    def evict(self, task: Any, reason: str) -> None:
        self.calls.append(("evict", task.uid, reason))

    def update_podgroup(self, job: JobInfo, event: Any, *, unready: int | None = None) -> None:
        self.calls.append(("podgroup", job.uid, job.podgroup.status_dict(), event, unready))

    def update_task_condition(self, task: TaskInfo, *, reason: str, message: str,
                              nominated_node: str = "") -> None:
        self.calls.append(("task", task.uid, reason, message, nominated_node))

    def update_queue_allocated(self, queue: QueueInfo, allocated: Resource) -> None:
        self.calls.append(("queue", queue.uid, allocated.to_quantities()))


def _task(job: str, i: int, status: TaskStatus, request: Resource) -> TaskInfo:
    return TaskInfo(uid=TaskID(f"{job}-{i}"), name=f"{job}-{i}", namespace="ns",
                    job=JobID(job), resreq=request.clone(), init_resreq=request.clone(),
                    status=status, node_name="n1" if status is not TaskStatus.PENDING else "")


def _job(name: str, queue: str, *, min_member: int = 1) -> JobInfo:
    return JobInfo(uid=JobID(name), name=name, namespace="ns",
                   podgroup=PodGroup(name, "ns", min_member=min_member, queue=queue),
                   queue=QueueID(queue), min_available=min_member)


def _fresh_sum(job: JobInfo) -> Resource:
    total = Resource()
    for task in job.tasks.values():
        if task.status & ALLOCATED_STATUS:
            total.add(task.resreq)
    return total


def _session(jobs: dict[JobID, JobInfo], queues: list[str], sink: RecordingSink) -> Session:
    snapshot = Snapshot(jobs=jobs, queues={QueueID(q): QueueInfo(uid=QueueID(q), name=q)
                                           for q in queues})
    return Session(snapshot, tiers=[], sink=sink, clock=lambda: 1_700_000_000.0,
                   rng=random.Random(7))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "status", "delete"]),
                          st.integers(0, 7), st.integers(0, len(STATUSES) - 1),
                          st.integers(0, len(REQUESTS) - 1)), max_size=40))
def test_running_total_is_exact_whenever_it_says_so(steps: list[tuple[str, int, int, int]]) -> None:
    job = _job("j", "q")
    for kind, slot, status, request in steps:
        uid = TaskID(f"j-{slot}")
        existing = job.tasks.get(uid)
        if kind == "add" and existing is None:
            job.add_task(_task("j", slot, STATUSES[status], REQUESTS[request]))
        elif kind == "status" and existing is not None:
            job.update_task_status(existing, STATUSES[status])
        elif kind == "delete" and existing is not None:
            job.delete_task(existing)
        if job.allocated_exact():
            fresh = _fresh_sum(job)
            assert job.allocated == fresh
            assert job.allocated.to_quantities() == fresh.to_quantities()


def _random_jobs(rng: random.Random, queues: list[str]) -> dict[JobID, JobInfo]:
    jobs: dict[JobID, JobInfo] = {}
    for j in range(rng.randint(1, 8)):
        name = f"ns/job-{j}"
        job = _job(name, rng.choice([*queues, "missing"]), min_member=rng.randint(1, 4))
        if rng.random() < 0.3:
            job.podgroup.min_resources = Resource(rng.choice([0, 700, 2500]), 2**30,
                                                  {"pods": rng.randint(0, 3)})
            job.podgroup.phase = rng.choice([PHASE_PENDING, PHASE_INQUEUE, PHASE_RUNNING])
        for i in range(rng.randint(0, 5)):
            job.add_task(_task(name, i, rng.choice(STATUSES), rng.choice(REQUESTS)))
        for task in list(job.tasks.values()):
            if rng.random() < 0.3:
                job.update_task_status(task, rng.choice(STATUSES))
        jobs[job.uid] = job
    return jobs


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32))
def test_queue_totals_match_task_by_task_sums(seed: int) -> None:
    rng = random.Random(seed)
    queues = ["q1", "q2", "q3"]
    jobs = _random_jobs(rng, queues)
    session = _session(jobs, queues, RecordingSink())
    expected_allocated = {QueueID(q): Resource() for q in queues}
    expected_request = {QueueID(q): Resource() for q in queues}
    for job in jobs.values():
        if job.queue not in expected_allocated:
            continue
        for task in job.tasks.values():
            if task.status & ALLOCATED_STATUS:
                expected_allocated[job.queue].add(task.resreq)
                expected_request[job.queue].add(task.resreq)
            elif task.status is TaskStatus.PENDING:
                expected_request[job.queue].add(task.resreq)
    # Close added tasks in status-index order, proportion in task order.
    expected_status = {QueueID(q): Resource() for q in queues}
    for job in jobs.values():
        if job.queue in expected_status:
            for task in job.tasks_in(ALLOCATED_STATUS):
                expected_status[job.queue].add(task.resreq)
    allocated = close.queue_allocations(session)
    for uid in expected_status:
        assert allocated[uid] == expected_status[uid]
        assert allocated[uid].to_quantities() == expected_status[uid].to_quantities()
    expected_elastic = {QueueID(q): Resource() for q in queues}
    expected_inqueue = {QueueID(q): Resource() for q in queues}
    for job in jobs.values():
        if job.queue in expected_elastic:
            demand = job.inqueue_demand()
            if demand is not None:
                expected_inqueue[job.queue].add(demand)
            expected_elastic[job.queue].add(job.elastic_resources())
    proportion = Proportion(ProportionArgs())
    proportion.on_session_open(session)
    for uid, attr in proportion.attrs.items():
        assert attr.allocated == expected_allocated[uid]
        assert attr.request == expected_request[uid]
        assert attr.elastic == expected_elastic[uid]
        assert attr.inqueue == expected_inqueue[uid]


def _condition(kind: str, uid: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "transitionID": uid,
            "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "r", "message": "m"}


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32))
def test_running_job_shortcut_closes_as_the_general_path(seed: int) -> None:
    rng = random.Random(seed)
    name = "ns/j"
    # Mostly jobs whose tasks all run (the shortcut's case), some mixed ones around it.
    job = _job(name, "q1", min_member=rng.randint(1, 5))
    job.min_available = rng.choice([job.podgroup.min_member, rng.randint(1, 5)])
    mixed = rng.random() < 0.3
    for i in range(rng.randint(0, 5)):
        status = rng.choice(STATUSES) if mixed else TaskStatus.RUNNING
        job.add_task(_task(name, i, status, REQUESTS[0]))
    job.podgroup.phase = rng.choice([PHASE_PENDING, PHASE_INQUEUE, PHASE_RUNNING, PHASE_UNKNOWN])
    job.podgroup.running = rng.randint(0, 5)
    job.podgroup.succeeded = rng.randint(0, 1)

    def run(shortcut: bool) -> list[tuple[Any, ...]]:
        sink = RecordingSink()
        copy_of_job = copy.deepcopy(job)
        session = _session({copy_of_job.uid: copy_of_job}, ["q1"], sink)
        if rng_conditions < 0.25:
            copy_of_job.podgroup.conditions.append(_condition("Unschedulable", session.uid))
        elif rng_conditions < 0.4:
            copy_of_job.podgroup.conditions.append(_condition("Unschedulable", "older"))
        elif rng_conditions < 0.7:
            copy_of_job.podgroup.conditions.append(_condition("Scheduled", session.uid))
        if invalid:
            session.invalid_jobs[copy_of_job.uid] = ("NotEnoughTasks", "too few tasks")
        original = close._close_running_job
        if not shortcut:
            close._close_running_job = lambda session, job: False  # type: ignore[assignment]
        try:
            close._close_job(session, copy_of_job, "2026-01-02T00:00:00Z")
        finally:
            close._close_running_job = original
        state = copy_of_job.podgroup.status_dict()
        for condition in state.get("conditions") or []:
            condition.pop("transitionID", None)  # the session uid differs between the runs
        return [*sink.calls, ("state", state, copy_of_job.job_fit_error)]

    rng_conditions = rng.random()
    invalid = rng.random() < 0.15
    with_shortcut, without = run(True), run(False)
    for calls in (with_shortcut, without):
        for call in calls:
            if call[0] == "podgroup":
                for condition in call[2].get("conditions") or []:
                    condition.pop("transitionID", None)
    assert with_shortcut == without


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32))
def test_gang_close_shortcut_matches_counting(seed: int) -> None:
    """Gang's close (Volcano's ``gang.OnSessionClose``) with and without the shortcut for
    jobs whose tasks all run leaves the same conditions and fit errors."""
    rng = random.Random(seed)
    queues = ["q1"]
    jobs = _random_jobs(rng, queues)
    for job in jobs.values():
        if rng.random() < 0.6:  # mostly all-running jobs, some below their minimum
            for task in list(job.tasks.values()):
                job.update_task_status(task, TaskStatus.RUNNING)
        job.min_available = rng.randint(0, 5)
        if rng.random() < 0.3:
            job.podgroup.conditions.append(_condition("Unschedulable", "older"))

    def run(shortcut: bool) -> list[Any]:
        copies = copy.deepcopy(jobs)
        session = _session(copies, queues, RecordingSink())
        plugin = Gang(NoArgs())
        plugin.on_session_open(session)
        original = gang_module._running_gang
        if not shortcut:
            gang_module._running_gang = lambda job: False  # type: ignore[assignment]
        try:
            plugin.on_session_close(session)
        finally:
            gang_module._running_gang = original
        return [(job.podgroup.conditions, job.job_fit_error) for job in copies.values()]

    assert run(True) == run(False)


class _EagerDrf(Drf):
    """drf as before: every job's allocation copied and share computed at open."""

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        for uid, job in session.jobs.items():
            self.allocated[uid] = job.allocated.clone()
            self.shares[uid] = dominant_share(self.allocated[uid], session.total_resource)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32))
def test_drf_shares_on_demand_order_jobs_as_shares_at_open(seed: int) -> None:
    """drf's job order (Volcano's ``drf.jobOrderFn``) with shares derived when first needed
    equals the order with every share derived at open, across allocations and evictions."""
    rng = random.Random(seed)
    jobs = _random_jobs(rng, ["q1"])
    session = _session(jobs, ["q1"], RecordingSink())
    session.total_resource = Resource(8000, 2**34, {"pods": 110, "nvidia.com/gpu": 4})
    lazy, eager = Drf(NoArgs()), _EagerDrf(NoArgs())
    lazy.on_session_open(session)
    eager.on_session_open(session)
    tasks = [task for job in jobs.values() for task in job.tasks.values()]
    uids = list(jobs)
    for _ in range(30):
        if tasks and rng.random() < 0.4:
            # What Session.place / unplace do: the job changes first, then the handlers run.
            task = rng.choice(tasks)
            job = jobs[task.job]
            session._keep_allocated_at_open(job)
            if task.status is TaskStatus.PENDING:
                job.update_task_status(task, rng.choice([TaskStatus.ALLOCATED,
                                                         TaskStatus.PIPELINED]))
                handlers = [lazy.on_allocate, eager.on_allocate]
            else:
                job.update_task_status(task, TaskStatus.PENDING)
                handlers = [lazy.on_deallocate, eager.on_deallocate]
            for handler in handlers:
                handler(task)
        if rng.random() < 0.2:
            left, right = jobs[rng.choice(uids)], jobs[rng.choice(uids)]
            assert lazy.job_order(left, right) == eager.job_order(left, right)
    for uid in uids:
        assert lazy.share(uid) == eager.share(uid)
        assert lazy.allocation(uid) == eager.allocation(uid)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32))
def test_gang_validity_shortcut_matches_counting(seed: int) -> None:
    """Gang's ``job_valid`` (Volcano's ``gang.validJobFn``) with and without the shortcut for
    jobs whose tasks all run gives the same verdict."""
    rng = random.Random(seed)
    jobs = _random_jobs(rng, ["q1"])
    plugin = Gang(NoArgs())
    for job in jobs.values():
        if rng.random() < 0.6:
            for task in list(job.tasks.values()):
                job.update_task_status(task, TaskStatus.RUNNING)
        job.min_available = rng.randint(0, 5)
        if rng.random() < 0.2:
            job.podgroup.min_task_member = {"worker": rng.randint(0, 3)}
        verdict = plugin.job_valid(job)
        original = gang_module._running_gang
        gang_module._running_gang = lambda job: False  # type: ignore[assignment]
        try:
            assert verdict == plugin.job_valid(job)
        finally:
            gang_module._running_gang = original
