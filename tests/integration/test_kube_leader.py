"""Lease election against the API server double: one leader at a time, hand-over, step-down."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kube_helpers import wait_until

from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.leader import LeaderElector, LeaseConfig, micro_time
from tests.apiserver import ApiServerDouble

CONFIG = LeaseConfig(name="volcano", namespace="volcano-system", lease_duration=2.0,
                     renew_deadline=1.2, retry_period=0.1)
LEASES = "coordination.k8s.io/v1/leases"


@dataclass
class Candidate:
    elector: LeaderElector
    started: list[float] = field(default_factory=list)
    stopped: list[float] = field(default_factory=list)
    thread: threading.Thread | None = None

    def campaign(self) -> None:
        self.thread = threading.Thread(
            target=self.elector.run, daemon=True,
            args=(lambda: self.started.append(time.monotonic()),
                  lambda: self.stopped.append(time.monotonic())))
        self.thread.start()


@pytest.fixture
def candidates(apiserver: ApiServerDouble) -> Iterator[list[Candidate]]:
    made: list[Candidate] = []
    for name in ("a", "b"):
        client = KubeClient.for_host(apiserver.url)
        client.user_agent = f"elector-{name}"
        made.append(Candidate(LeaderElector(client, CONFIG, identity=f"host-{name}_{name}")))
    yield made
    for candidate in made:
        candidate.elector.stop()
    for candidate in made:
        if candidate.thread is not None:
            candidate.thread.join(2.0)


def sample_leaders(candidates: list[Candidate], seconds: float) -> list[int]:
    """How many candidates claim leadership, sampled every few milliseconds."""
    counts = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        counts.append(sum(c.elector.is_leader() for c in candidates))
        time.sleep(0.005)
    return counts


def holder(apiserver: ApiServerDouble) -> str:
    lease = apiserver.get(LEASES, "volcano-system/volcano")
    return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")


def test_only_one_of_two_electors_leads_and_a_release_hands_over(
        apiserver: ApiServerDouble, candidates: list[Candidate]) -> None:
    """``is_leader()`` turns true inside the elector's thread *before* it starts the
    ``on_started_leading`` thread, so the test waits for the callbacks it then reads, never
    for ``is_leader()`` (reading ``started`` right after ``is_leader()`` raced that thread)."""
    for candidate in candidates:
        candidate.campaign()
    wait_until(lambda: any(c.started for c in candidates), message="a leader")
    counts = sample_leaders(candidates, 2.5)  # longer than a lease duration: renewals happen
    # Never two leaders; a loaded machine may delay a renewal past the deadline now and then.
    assert max(counts) == 1 and counts.count(1) > 0.8 * len(counts)
    leader = next(c for c in candidates if c.started)
    standby = next(c for c in candidates if c is not leader)
    assert holder(apiserver) == leader.elector.identity
    assert len(leader.started) == 1 and standby.started == []
    lease = apiserver.get(LEASES, "volcano-system/volcano")
    assert lease is not None and lease["spec"]["leaseDurationSeconds"] == 2

    leader.elector.stop()
    wait_until(lambda: bool(standby.started), timeout=4.0, message="hand-over")
    assert len(leader.stopped) == 1
    assert not leader.elector.is_leader()
    assert holder(apiserver) == standby.elector.identity
    assert standby.started[0] >= leader.stopped[0]
    spec = apiserver.get(LEASES, "volcano-system/volcano")["spec"]  # type: ignore[index]
    assert spec["leaseTransitions"] == 1 and spec["leaseDurationSeconds"] == 2


def test_partitioned_leader_steps_down_before_the_standby_takes_over(
        apiserver: ApiServerDouble, candidates: list[Candidate]) -> None:
    first, second = candidates
    first.campaign()
    wait_until(lambda: first.elector.is_leader(), message="first leads")
    second.campaign()
    time.sleep(0.3)
    assert not second.elector.is_leader()

    apiserver.fail("GET", "leases", 503, times=10_000, user_agent="elector-a")
    apiserver.fail("PUT", "leases", 503, times=10_000, user_agent="elector-a")
    counts = sample_leaders(candidates, 3.5)
    assert max(counts) == 1
    assert first.stopped and second.started, "leadership should have moved"
    assert first.stopped[0] < second.started[0]
    assert second.started[0] - first.stopped[0] >= 0.4  # lease 2.0 s vs renew deadline 1.2 s
    assert holder(apiserver) == second.elector.identity
    lease = apiserver.get(LEASES, "volcano-system/volcano")
    assert lease is not None and lease["spec"]["leaseTransitions"] == 1


def test_expired_lease_of_a_dead_holder_is_taken_after_its_duration(
        apiserver: ApiServerDouble, candidates: list[Candidate]) -> None:
    apiserver.create(LEASES, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "volcano", "namespace": "volcano-system"},
        "spec": {"holderIdentity": "gone_0", "leaseDurationSeconds": 1,
                 "renewTime": micro_time(0.0), "leaseTransitions": 3}})
    began = time.monotonic()
    candidates[0].campaign()
    wait_until(lambda: candidates[0].elector.is_leader(), timeout=3.0, message="takeover")
    # The old renewTime is decades ago, but only local observation counts.
    assert time.monotonic() - began >= 0.9
    lease = apiserver.get(LEASES, "volcano-system/volcano")
    assert lease is not None and lease["spec"]["leaseTransitions"] == 4


def test_micro_time_has_six_fraction_digits() -> None:
    assert micro_time(0.0) == "1970-01-01T00:00:00.000000Z"
    assert micro_time(1.2345675) == "1970-01-01T00:00:01.234568Z"
    assert micro_time(1.9999999) == "1970-01-01T00:00:02.000000Z"
    with pytest.raises(ValueError):
        LeaseConfig(lease_duration=5, renew_deadline=10, retry_period=2)
