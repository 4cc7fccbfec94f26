from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PodGroup
from scheduler.api.resource import Resource
from scheduler.api.status import FitErrors
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, QueueID, TaskID, TaskStatus


def test_fit_errors_message_shape() -> None:
    errors = FitErrors(nodes=4)
    errors.add("node(s) had untolerated taint {gpu: true}")
    errors.add("Insufficient cpu", 3)
    assert str(errors) == (
        "0/4 nodes are unavailable: 1 node(s) had untolerated taint {gpu: true}, "
        "3 Insufficient cpu."
    )
    assert str(FitErrors(nodes=2, error="queue q is overused")) == "queue q is overused"


def test_a_reason_about_the_pod_is_said_once_not_counted_per_node() -> None:
    """A failed pre-predicate is about the pod: Volcano's ``allocate.go`` sets it on every node
    and ``FitErrors.Error`` glues the count to it (``2 pod default/x requests …``); it is said
    once here, after the same prefix."""
    errors = FitErrors.for_pod(2, "pod default/x requests both a and b")
    assert str(errors) == "0/2 nodes are unavailable: pod default/x requests both a and b."


def _task(name: str, status: TaskStatus = TaskStatus.PENDING) -> TaskInfo:
    return TaskInfo(
        uid=TaskID(name),
        name=name,
        namespace="ns",
        job=JobID("ns/j"),
        resreq=Resource(1000, 0, {"pods": 1}),
        init_resreq=Resource(1000, 0, {"pods": 1}),
        status=status,
    )


def test_job_counters_follow_status_changes() -> None:
    job = JobInfo(
        uid=JobID("ns/j"),
        name="j",
        namespace="ns",
        podgroup=PodGroup("j", "ns", min_member=2),
        queue=QueueID("default"),
        min_available=2,
    )
    a, b = _task("j-0"), _task("j-1")
    job.add_task(a)
    job.add_task(b)
    assert not job.is_ready() and job.is_starving()
    job.update_task_status(a, TaskStatus.ALLOCATED)
    job.update_task_status(b, TaskStatus.PIPELINED)
    assert job.allocated.milli_cpu == 1000
    assert not job.is_ready() and job.is_pipelined()
    job.update_task_status(b, TaskStatus.BINDING)
    assert job.is_ready() and job.allocated.milli_cpu == 2000
    job.update_task_status(a, TaskStatus.PENDING)
    assert job.allocated.milli_cpu == 1000


def test_job_fit_error_message() -> None:
    job = JobInfo(
        uid=JobID("ns/j"),
        name="j",
        namespace="ns",
        podgroup=PodGroup("j", "ns", min_member=3),
        queue=QueueID("default"),
        min_available=3,
    )
    for i in range(2):
        job.add_task(_task(f"j-w-{i}"))
    errors = FitErrors(nodes=4)
    errors.add("Insufficient nvidia.com/gpu", 4)
    job.nodes_fit_errors[TaskID("j-w-0")] = errors
    assert job.fit_error() == (
        "pod group is not ready, 2 Pending, 3 minAvailable; Pending: 2 Unschedulable. "
        "Origin reason is j-w-0: 0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu."
    )
