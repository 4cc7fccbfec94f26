"""The concurrent write path of ``lahar run`` against the API server double.

Binds leave from a pool of workers as soon as a gang is committed; the cache marks the task
Binding at once, as Volcano's ``SchedulerCache.AddBindTask`` does, and a refused bind is rolled
back and resynced (``SchedulerCache.resyncTask``). Events, pod conditions and PodGroup / Queue
status go through a coalescing writer: latest state per object, one write in flight per object,
flushed at shutdown. No bind is sent once the Lease is lost.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kube_helpers import make_node, make_pod, wait_until

from scheduler.api.types import TaskStatus
from scheduler.cache.binder import BindPool
from scheduler.cache.cache import SchedulerCache
from scheduler.cache.statuswriter import CoalescingWriter
from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.reflector import RESOURCES, Reflector, ReflectorGroup
from scheduler.cluster.kube.retry import RetryPolicy
from scheduler.cluster.kube.writer import KubeClusterWriter
from scheduler.conf import load_conf
from scheduler.loop import Scheduler
from tests.apiserver import ApiServerDouble

PODGROUPS = "scheduling.volcano.sh/v1beta1/podgroups"
QUEUES = "scheduling.volcano.sh/v1beta1/queues"
FAST = RetryPolicy(attempts=3, initial_wait=0.001, max_wait=0.01)


@dataclasses.dataclass
class Clock:
    now: float = 1_767_225_600.0

    def __call__(self) -> float:
        return self.now


class SlowWriter(KubeClusterWriter):
    """The real writer, with a hold on binds or status writes and a count of binds in flight."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bind_delay = 0.0
        self.bind_gate = threading.Event()
        self.bind_gate.set()
        self.status_gate = threading.Event()
        self.status_gate.set()
        self.in_flight = 0
        self.most_in_flight = 0
        self._count = threading.Lock()

    def bind(self, **kwargs: Any) -> None:
        with self._count:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self.bind_gate.wait(10.0)
            time.sleep(self.bind_delay)
            super().bind(**kwargs)
        finally:
            with self._count:
                self.in_flight -= 1

    def update_pod_condition(self, **kwargs: Any) -> None:
        self.status_gate.wait(10.0)
        super().update_pod_condition(**kwargs)

    def update_podgroup_status(self, **kwargs: Any) -> None:
        self.status_gate.wait(10.0)
        super().update_podgroup_status(**kwargs)


@dataclasses.dataclass
class Mirror:
    apiserver: ApiServerDouble
    cache: SchedulerCache
    writer: SlowWriter
    scheduler: Scheduler
    clock: Clock
    leading: threading.Event

    def start(self, *, workers: int = 4) -> None:
        self.cache.start_background(bind_workers=workers, gate=self.leading.is_set)
        self.writer.background = self.cache.enqueue_status
        self.writer.may_bind = self.leading.is_set

    def cycle(self) -> None:
        self.scheduler.run_once()
        self.cache.flush()

    def task(self, name: str) -> Any:
        with self.cache.lock:
            return next((t for t in self.cache.tasks.values() if t.name == name), None)

    def node_of(self, name: str) -> str:
        pod = self.apiserver.get("v1/pods", f"team/{name}") or {}
        return str((pod.get("spec") or {}).get("nodeName") or "")

    def binds_of(self, name: str) -> int:
        return len(self.apiserver.requests_to("POST", rf"/pods/{name}/binding$"))


def podgroup(name: str, min_member: int = 1) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"minMember": min_member, "queue": "default"}}


def pod(name: str, *, group: str, cpu: str = "1") -> dict[str, Any]:
    manifest = make_pod(name, namespace="team", group=group)
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    return manifest


@pytest.fixture
def mirror_of(apiserver: ApiServerDouble, client: KubeClient,
              stop: threading.Event) -> Iterator[Callable[[int], Mirror]]:
    """A cache mirroring the double with ``pods`` one-pod gangs pending on two 16-cpu nodes."""
    made: list[tuple[SchedulerCache, ReflectorGroup]] = []

    def build(pods: int) -> Mirror:
        apiserver.create(QUEUES, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                  "metadata": {"name": "default"}, "spec": {"weight": 1}})
        for node in ("n1", "n2"):
            apiserver.create("v1/nodes", make_node(node, cpu="16"))
        for index in range(pods):
            apiserver.create(PODGROUPS, podgroup(f"g{index}"))
            apiserver.create("v1/pods", pod(f"p{index}", group=f"g{index}"))
        clock = Clock()
        writer = SlowWriter(client, scheduler_name="volcano", retry=FAST, clock=clock)
        cache = SchedulerCache(writer=writer, clock=clock)
        reflectors = ReflectorGroup([
            Reflector(client=client, resource=spec,
                      handler=lambda event, obj, kind=spec.kind: cache.apply(event, kind, obj))
            for spec in RESOURCES])
        reflectors.start(stop)
        assert reflectors.wait_for_sync(stop, timeout=5.0)
        made.append((cache, reflectors))
        scheduler = Scheduler(cache=cache, conf=load_conf(None), clock=clock)
        leading = threading.Event()
        leading.set()
        state = Mirror(apiserver, cache, writer, scheduler, clock, leading)
        wait_until(lambda: len(cache.tasks) == pods and bool(cache.queues),
                   message="objects in the cache")
        return state

    yield build
    stop.set()
    for cache, reflectors in made:
        cache.stop_background(send_binds=False, timeout=2.0)
        reflectors.interrupt()
        reflectors.join(timeout=5.0)


def test_binds_go_out_concurrently_and_tasks_are_binding_at_once(
        mirror_of: Callable[[int], Mirror]) -> None:
    """Volcano ``SchedulerCache.AddBindTask``: the cache's task is Binding, on its node, the
    moment the session commits; the Binding itself is sent by a worker."""
    mirror = mirror_of(12)
    mirror.start(workers=4)
    mirror.writer.bind_gate.clear()  # every bind waits in a worker
    mirror.scheduler.run_once()
    with mirror.cache.lock:
        statuses = {t.name: t.status for t in mirror.cache.tasks.values()}
        used = sum(16000 - n.idle.milli_cpu for n in mirror.cache.nodes.values())
    assert set(statuses.values()) == {TaskStatus.BINDING}
    assert used == 12 * 1000  # the next session sees the nodes taken
    wait_until(lambda: mirror.writer.in_flight == 4, message="four binds in flight")
    assert mirror.cache.binds is not None and mirror.cache.binds.backlog == 12
    mirror.writer.bind_delay = 0.02
    mirror.writer.bind_gate.set()
    assert mirror.cache.binds.drain(10.0)
    assert mirror.writer.most_in_flight == 4
    assert all(mirror.node_of(f"p{i}") for i in range(12))
    assert all(mirror.binds_of(f"p{i}") == 1 for i in range(12))


def test_bind_conflicts_and_server_errors_under_concurrency(
        apiserver: ApiServerDouble, mirror_of: Callable[[int], Mirror]) -> None:
    """Volcano ``resyncTask``: a bind that fails is rolled back, reported with
    ``PodScheduled=False/SchedulerError`` and a ``FailedScheduling`` event, and retried after a
    per-pod backoff; a 409 "already bound" is no failure."""
    mirror = mirror_of(10)
    mirror.start(workers=4)
    with apiserver.watches_held():  # the cache learns nothing from the watch meanwhile
        taken = apiserver.get("v1/pods", "team/p3")
        assert taken is not None
        taken["spec"]["nodeName"] = "n2"  # bound by someone else: our bind answers 409
        apiserver.update("v1/pods", taken)
        for name in ("p5", "p6"):
            apiserver.fail("POST", rf"/pods/{name}/binding$", 500, times=FAST.attempts)
        mirror.cycle()
        assert mirror.cache.binds is not None and mirror.cache.binds.drain(10.0)
        assert mirror.cache.background is not None and mirror.cache.background.flush(10.0)
        assert mirror.binds_of("p3") == 1
        assert mirror.binds_of("p5") == mirror.binds_of("p6") == FAST.attempts
        with mirror.cache.lock:
            assert mirror.task("p3").status is TaskStatus.BINDING  # kept, not rolled back
            for name in ("p5", "p6"):
                assert mirror.task(name) is None  # back out, resynced after its backoff
                assert mirror.cache.resync.waiting(f"team/{name}")
            used = sum(16000 - n.idle.milli_cpu for n in mirror.cache.nodes.values())
        assert used == 8 * 1000
        for name in ("p5", "p6"):
            (condition,) = [r.body["status"]["conditions"][0]
                            for r in apiserver.requests_to("PATCH", rf"/pods/{name}/status$")]
            assert condition["reason"] == "SchedulerError"
            assert condition["message"].startswith("failed to bind to node n")
        others = [f"p{i}" for i in range(10) if i not in (3, 5, 6)]
        assert all(mirror.binds_of(name) == 1 and mirror.node_of(name) for name in others)
    mirror.clock.now += 1.0  # past the first backoff
    mirror.cache.flush()  # the resync brings them back ...
    mirror.cycle()  # ... and the next cycle binds them
    assert mirror.cache.binds.drain(10.0)
    assert mirror.node_of("p5") and mirror.node_of("p6")
    assert mirror.binds_of("p5") == mirror.binds_of("p6") == FAST.attempts + 1


def test_no_bind_is_sent_after_the_lease_is_lost(
        apiserver: ApiServerDouble, mirror_of: Callable[[int], Mirror]) -> None:
    """Binds queued or about to be sent when the Lease goes are never sent, and their tasks
    give their nodes back."""
    mirror = mirror_of(10)
    mirror.start(workers=2)
    mirror.writer.bind_gate.clear()
    mirror.scheduler.run_once()
    wait_until(lambda: mirror.writer.in_flight == 2, message="two binds in the workers")
    mirror.leading.clear()  # the Lease is lost
    mirror.writer.bind_gate.set()
    mirror.cache.stop_background(send_binds=False, timeout=5.0)
    assert apiserver.requests_to("POST", r"/binding$") == []
    assert not any(mirror.node_of(f"p{i}") for i in range(10))
    assert mirror.cache.binds is not None and mirror.cache.binds.discarded == 8
    with mirror.cache.lock:
        assert not [t.name for t in mirror.cache.tasks.values() if t.node_name]
        assert all(mirror.cache.resync.waiting(f"team/p{i}") for i in range(10))
        assert all(n.idle.milli_cpu == 16000 for n in mirror.cache.nodes.values())


def test_a_bind_retrying_when_the_lease_is_lost_is_not_tried_again(
        apiserver: ApiServerDouble, mirror_of: Callable[[int], Mirror]) -> None:
    """Retries are sends too: after the loss not even the bind in flight tries again, and
    nothing is reported about it (the next leader will bind the pod)."""
    mirror = mirror_of(1)
    mirror.start(workers=1)
    mirror.writer.retry = RetryPolicy(attempts=50, initial_wait=0.05, max_wait=0.05)
    apiserver.fail("POST", r"/pods/p0/binding$", 500, times=50)
    mirror.scheduler.run_once()
    wait_until(lambda: mirror.binds_of("p0") >= 2, message="the bind retrying")
    mirror.leading.clear()
    assert mirror.cache.binds is not None and mirror.cache.binds.drain(5.0)
    tried = mirror.binds_of("p0")
    time.sleep(0.2)
    assert mirror.binds_of("p0") == tried < 50
    assert not mirror.node_of("p0")
    with mirror.cache.lock:
        assert mirror.task("p0") is None and mirror.cache.resync.waiting("team/p0")
    assert mirror.cache.background is not None and mirror.cache.background.flush(5.0)
    assert apiserver.requests_to("PATCH", r"/pods/p0/status$") == []
    with apiserver.cond:
        assert not [e for e in apiserver.objects["v1/events"].values()
                    if e["involvedObject"]["name"] == "p0"]


def test_shutdown_sends_queued_binds_and_flushes_status(
        apiserver: ApiServerDouble, mirror_of: Callable[[int], Mirror]) -> None:
    """A graceful stop sends what was committed and writes every queued condition and status
    before it returns."""
    mirror = mirror_of(6)
    apiserver.create(PODGROUPS, podgroup("huge"))
    apiserver.create("v1/pods", pod("too-big", group="huge", cpu="64"))
    wait_until(lambda: mirror.task("too-big") is not None, message="the big pod cached")
    mirror.start(workers=2)
    mirror.writer.bind_delay = 0.02
    mirror.writer.status_gate.clear()  # status writes wait until the stop
    mirror.scheduler.run_once()
    assert mirror.cache.background is not None and mirror.cache.background.backlog > 0
    threading.Timer(0.2, mirror.writer.status_gate.set).start()
    mirror.cache.stop_background(send_binds=True, timeout=10.0)
    assert all(mirror.node_of(f"p{i}") for i in range(6))
    assert mirror.cache.pending_writes == 0
    big = apiserver.get("v1/pods", "team/too-big") or {}
    (condition,) = big["status"]["conditions"]
    assert (condition["type"], condition["reason"]) == ("PodScheduled", "Unschedulable")
    assert ((apiserver.get(PODGROUPS, "team/huge") or {}).get("status") or {}).get("phase")
    allocated = (((apiserver.get(QUEUES, "default") or {}).get("status") or {})
                 .get("allocated") or {})
    assert allocated.get("cpu") == "6"


def test_many_changes_of_one_condition_become_one_write_of_the_latest(
        apiserver: ApiServerDouble, mirror_of: Callable[[int], Mirror]) -> None:
    """While the writer is busy, ten changes of a pod's condition coalesce: one PATCH and one
    ``FailedScheduling`` event, both carrying the last message."""
    mirror = mirror_of(1)
    mirror.cache.background = CoalescingWriter(workers=1, lost=mirror.cache.status.lost).start()
    mirror.writer.status_gate.clear()
    task = mirror.task("p0")
    # The PodGroup's status write holds the only worker while the condition changes.
    mirror.cache.update_podgroup(mirror.scheduler.open_session().jobs[task.job], None)
    wait_until(lambda: mirror.cache.background is not None
               and mirror.cache.background.backlog == 1, message="the PodGroup write in flight")
    for attempt in range(10):
        mirror.cache.update_task_condition(task, reason="Unschedulable",
                                           message=f"attempt {attempt}")
    assert mirror.cache.background.coalesced == 9
    mirror.writer.status_gate.set()
    assert mirror.cache.background.flush(5.0)
    patches = apiserver.requests_to("PATCH", r"/pods/p0/status$")
    assert [p.body["status"]["conditions"][0]["message"] for p in patches] == ["attempt 9"]
    with apiserver.cond:
        stored = [e for e in apiserver.objects["v1/events"].values()
                  if e["involvedObject"]["name"] == "p0"]
    assert [(e["reason"], e["message"]) for e in stored] == [("FailedScheduling", "attempt 9")]


def test_status_writes_of_one_object_never_overlap() -> None:
    """At most one write per object in flight, even with several workers."""
    writer = CoalescingWriter(workers=4).start()
    active: dict[str, int] = {}
    most: dict[str, int] = {}
    lock = threading.Lock()

    def write(key: str) -> Callable[[], None]:
        def run() -> None:
            with lock:
                active[key] = active.get(key, 0) + 1
                most[key] = max(most.get(key, 0), active[key])
            time.sleep(0.005)
            with lock:
                active[key] -= 1
        return run

    for round_ in range(20):
        for key in ("a", "b"):
            writer.put(("pod", key), write(key))
        time.sleep(0.002 * (round_ % 3))
    assert writer.stop(timeout=5.0)
    assert most == {"a": 1, "b": 1}
    assert writer.written + writer.coalesced == 40


def test_a_full_status_queue_drops_events_and_forgets_them() -> None:
    """Events are best effort past the bound, as client-go's event broadcaster drops what its
    queue cannot take (``tools/events/event_broadcaster.go``: ``watch.DropIfChannelFull``)."""
    lost: list[Any] = []
    writer = CoalescingWriter(workers=1, capacity=2, lost=lost.append)  # not started
    assert writer.put(("event", "a"), lambda: None)
    assert writer.put(("pod", "b"), lambda: None)
    assert writer.put(("event", "a"), lambda: None)  # same key: replaces, needs no room
    assert not writer.put(("event", "c"), lambda: None)
    assert not writer.put(("podgroup-event", "d"), lambda: None)
    assert lost == [("event", "c"), ("podgroup-event", "d")] and writer.dropped == 2


def test_state_writes_are_a_dirty_set_that_never_drops() -> None:
    """40,000 PodGroups needing a first status after a restart, twice the bound: every one is
    queued (latest status wins per PodGroup) and written once, none dropped."""
    lost: list[Any] = []
    written: dict[str, int] = {}

    def write(key: str, version: int) -> Callable[[], None]:
        return lambda: written.__setitem__(key, version)

    writer = CoalescingWriter(workers=2, capacity=20_000, lost=lost.append)  # not started
    for version in (1, 2):
        for index in range(40_000):
            key = f"ns/pg-{index}"
            assert writer.put(("podgroup", key), write(key, version))
    assert writer.put(("queue", "default"), write("queue", 1))
    assert not writer.put(("event", "x"), lambda: None)  # events still keep to the bound
    assert writer.dropped == 1 and lost == [("event", "x")]
    assert writer.coalesced == 40_000
    writer.start()
    assert writer.stop(timeout=30.0)
    assert len(written) == 40_001 and set(written.values()) == {1, 2}
    assert all(written[f"ns/pg-{index}"] == 2 for index in range(40_000))
    assert writer.written == 40_001


def test_a_full_bind_queue_makes_the_session_wait() -> None:
    sent: list[int] = []
    release = threading.Event()

    def send(item: int) -> None:
        release.wait(5.0)
        sent.append(item)

    pool: BindPool[int] = BindPool(send=send, workers=1, capacity=2).start()
    assert pool.submit(0)  # taken by the worker
    assert pool.submit(1) and pool.submit(2)  # the queue is full now
    third = threading.Thread(target=pool.submit, args=(3,))
    third.start()
    third.join(0.2)
    assert third.is_alive()  # waiting for room
    release.set()
    third.join(5.0)
    assert pool.drain(5.0)
    pool.stop(drain=True)
    assert sent == [0, 1, 2, 3]


def test_the_client_rate_limit_governs_concurrent_binds(apiserver: ApiServerDouble) -> None:
    """``--kube-api-qps`` / ``--kube-api-burst`` bound the total: eight bind workers sharing
    a 20-per-second bucket (burst 1) send 11 binds in no less than half a second."""
    for index in range(11):
        apiserver.create("v1/pods", make_pod(f"q{index}", namespace="team"))
    limited = KubeClient.for_host(apiserver.url, qps=20.0, burst=1)
    writer = KubeClusterWriter(limited, retry=FAST)
    pool: BindPool[str] = BindPool(
        send=lambda name: writer.bind(namespace="team", name=name, uid="", node="n1",
                                      annotations={}),
        workers=8).start()
    started = time.monotonic()
    try:
        for index in range(11):
            pool.submit(f"q{index}")
        assert pool.drain(10.0)
    finally:
        pool.stop(drain=True)
        limited.close()
    assert time.monotonic() - started >= 0.45
    assert pool.sent == 11
    assert all((apiserver.get("v1/pods", f"team/q{i}") or {})["spec"].get("nodeName") == "n1"
               for i in range(11))


def test_a_task_still_binding_is_counted_as_scheduled_once(
        mirror_of: Callable[[int], Mirror]) -> None:
    """``volcano_schedule_attempts_total{result="scheduled"}`` counts a bind when the cycle
    commits it, not again in every cycle while its Binding is still being sent."""
    from scheduler import metrics
    from scheduler.cluster.kube.cyclemetrics import record_cycle

    def scheduled() -> float:
        line = next((line for line in metrics.exposition().decode().splitlines()
                     if line.startswith('volcano_schedule_attempts_total{result="scheduled"}')),
                    "absent 0")  # no series before the first count
        return float(line.split()[1])

    mirror = mirror_of(3)
    mirror.start(workers=1)
    mirror.writer.bind_gate.clear()  # the binds wait
    before = scheduled()
    record_cycle(mirror.scheduler.run_once(), mirror.cache)
    record_cycle(mirror.scheduler.run_once(), mirror.cache)
    assert scheduled() == before + 3
    mirror.writer.bind_gate.set()


def test_a_new_leader_rewrites_conditions_its_predecessor_left_stale_or_unwritten(
        apiserver: ApiServerDouble, mirror_of: Callable[[int], Mirror]) -> None:
    """Conditions are state: a replica that takes over after a SIGKILL writes what each pod's
    condition must say now, whatever the last leader wrote or failed to write. ``wait`` carries
    a condition from a cluster that no longer exists; ``huge`` never got one."""
    stale = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/5 nodes are unavailable: 5 Insufficient memory."}
    mirror = mirror_of(2)
    apiserver.create(PODGROUPS, podgroup("huge"))
    apiserver.create("v1/pods", pod("too-big", group="huge", cpu="64"))
    apiserver.create(PODGROUPS, podgroup("wait"))
    waiting = pod("also-too-big", group="wait", cpu="32")
    waiting["status"] = {"phase": "Pending", "conditions": [stale]}
    apiserver.create("v1/pods", waiting)
    wait_until(lambda: mirror.task("also-too-big") is not None, message="pods cached")
    mirror.start(workers=1)
    mirror.cycle()
    mirror.cache.background.flush(5.0)  # type: ignore[union-attr]
    for name in ("too-big", "also-too-big"):
        (condition,) = (apiserver.get("v1/pods", f"team/{name}") or {})["status"]["conditions"]
        assert condition["reason"] == "Unschedulable"
        assert "Insufficient cpu" in condition["message"], condition
        assert condition["message"] != stale["message"]
    assert ((apiserver.get(PODGROUPS, "team/huge") or {}).get("status") or {}).get("phase")


def test_queued_binds_leave_in_the_order_the_pods_arrived(
        apiserver: ApiServerDouble, mirror_of: Callable[[int], Mirror]) -> None:
    """The session places jobs in Volcano's job order (``JobInfo`` creation time, then UID,
    which is ``namespace/name``); the bind pool sends queued binds oldest pod first. Here the
    pods arrive p0 … p7 while their PodGroups run the other way (p7's is the oldest and first by
    name), so the session commits p7 first and p0 last; the one worker takes whichever bind is
    queued first when it wakes, and the rest leave p0 first."""
    mirror = mirror_of(0)
    for index in reversed(range(8)):
        apiserver.create(PODGROUPS, podgroup(f"g{9 - index}"))
    for index in range(8):
        apiserver.create("v1/pods", pod(f"p{index}", group=f"g{9 - index}"))
        wait_until(lambda index=index: mirror.task(f"p{index}") is not None,
                   message=f"p{index} in the cache")
    assert [mirror.cache.arrivals[f"team/p{i}"] for i in range(8)] == sorted(
        mirror.cache.arrivals.values())
    mirror.start(workers=1)
    mirror.writer.bind_gate.clear()  # the one worker holds the first bind
    mirror.scheduler.run_once()
    wait_until(lambda: mirror.writer.in_flight == 1, message="the first bind in flight")
    mirror.writer.bind_gate.set()
    assert mirror.cache.binds is not None and mirror.cache.binds.drain(10.0)
    order = [r.path.split("/")[-2] for r in apiserver.requests_to("POST", r"/binding$")]
    taken, queued = order[0], order[1:]
    assert queued == [f"p{i}" for i in range(8) if f"p{i}" != taken]
    wait_until(lambda: not mirror.cache.arrivals, message="bound pods leave the arrival order")
