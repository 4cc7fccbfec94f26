"""The sla plugin: waiting-time order, and admission/pipelining once a job has waited long enough.

Semantics from Volcano's ``pkg/scheduler/plugins/sla/sla.go`` (``OnSessionOpen``: jobOrderFn,
permitableFn registered as JobEnqueueable and JobPipelined) and the waiting-time annotations of
``api.JobInfo.SetPodGroup`` / ``extractWaitingTime``; the scenarios follow the "SLA Test" e2e
suite (``test/e2e/schedulingbase/sla.go``).
"""

from __future__ import annotations

from typing import Any

import pytest

from plugins.sla import Sla, SlaArgs, parse_go_duration
from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PodGroup
from scheduler.api.types import JobID, QueueID, Vote
from scheduler.conf import parse_conf
from scheduler.framework.session import Session
from tests.builders import make_node, make_pod, make_podgroup, simulate

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla{args}
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
"""Volcano's CI conf without the eviction actions and the plugins Lahar skips."""


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("3s", 3.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("300ms", 0.3), ("-2m", -120.0),
     ("1h2m3s4ms5us6ns", 3723.004005006), ("2µs", 2e-6), ("0", 0.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "1d", "1h 2m", "h", "5 s", "--1s"])
def test_not_go_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


@pytest.mark.parametrize("value", ["'soon'", "'0s'", "600"])
def test_bad_waiting_time_argument_is_a_warning_and_no_waiting_time(value: str) -> None:
    """Volcano's ``sla.New`` reads the argument with ``GetString`` and ``time.ParseDuration``:
    a value it cannot use is logged and no waiting time is set (``plugins/sla/sla.go``)."""
    conf = parse_conf(
        f"tiers: [{{plugins: [{{name: sla, arguments: {{sla-waiting-time: {value}}}}}]}}]")
    assert any("(sla): argument 'sla-waiting-time'" in w for w in conf.warnings)
    assert conf.plugin("sla") is not None


def _job(name: str, *, created: float, annotations: dict[str, str] | None = None) -> JobInfo:
    return JobInfo(uid=JobID(f"default/{name}"), name=name, namespace="default",
                   podgroup=PodGroup(name, "default", creation=created,
                                     annotations=dict(annotations or {})),
                   queue=QueueID("default"))


def _open(jobs: list[JobInfo], *, now: float, waiting: str = "") -> Sla:
    class FakeSession:
        def __init__(self) -> None:
            self.jobs = {job.uid: job for job in jobs}
            self.clock = lambda: now

    plugin = Sla(SlaArgs(waiting_time=waiting))
    fake: Any = FakeSession()
    session: Session = fake
    plugin.on_session_open(session)
    return plugin


def test_order_puts_jobs_with_an_sla_first_then_earlier_deadlines() -> None:
    slow = _job("slow", created=0, annotations={"sla-waiting-time": "1h"})
    fast = _job("fast", created=60, annotations={"sla-waiting-time": "30m"})
    none = _job("none", created=-100)
    plugin = _open([slow, fast, none], now=100)
    assert plugin.job_order(fast, slow) == -1 and plugin.job_order(slow, fast) == 1
    assert plugin.job_order(slow, none) == -1 and plugin.job_order(none, fast) == 1
    assert plugin.job_order(none, _job("other", created=0)) == 0


def test_votes_abstain_until_the_waiting_time_has_passed_then_permit() -> None:
    job = _job("j", created=1000, annotations={"sla-waiting-time": "10s"})
    assert _open([job], now=1009.9).job_enqueueable(job) is Vote.ABSTAIN
    assert _open([job], now=1010).job_enqueueable(job) is Vote.PERMIT
    assert _open([job], now=1010).job_pipelined(job) is Vote.PERMIT
    unset = _job("u", created=0)
    assert _open([unset], now=1e9).job_enqueueable(unset) is Vote.ABSTAIN


def test_annotation_precedence_and_fallback_to_the_plugin_argument() -> None:
    both = _job("both", created=0, annotations={"volcano.sh/sla-waiting-time": "10s",
                                                "sla-waiting-time": "1h"})
    broken = _job("broken", created=0, annotations={"volcano.sh/sla-waiting-time": "soon",
                                                    "sla-waiting-time": "20s"})
    bad_only = _job("bad", created=0, annotations={"sla-waiting-time": "-5s"})
    plain = _job("plain", created=0)
    plugin = _open([both, broken, bad_only, plain], now=15, waiting="2m")
    assert plugin.waiting == {both.uid: 10.0, broken.uid: 20.0, bad_only.uid: 120.0,
                              plain.uid: 120.0}
    assert plugin.job_enqueueable(both) is Vote.PERMIT
    assert plugin.job_enqueueable(broken) is Vote.ABSTAIN


def _overlarge(name: str, waiting: str | None) -> list[dict[str, Any]]:
    group = make_podgroup(name, min_member=8, min_resources={"cpu": "8"})
    if waiting is not None:
        group["metadata"]["annotations"] = {"sla-waiting-time": waiting}
    return [group, *(make_pod(f"{name}-{i}", cpu="1", group=name) for i in range(8))]


@pytest.mark.parametrize(("waiting", "phase"), [("3s", "Inqueue"), (None, "Pending")],
                         ids=["waited-past-sla", "no-sla"])
def test_sla_permits_an_overlarge_job_to_be_inqueue(waiting: str | None, phase: str) -> None:
    """e2e "sla permits job to be inqueue": minResources beyond the cluster, so overcommit
    rejects it; once its waiting time is over the sla Permit in the first tier admits it."""
    run = simulate([make_node("n1", cpu="2"), make_node("n2", cpu="2"),
                    *_overlarge("j1-overlarge", waiting)], conf=CONF.format(args=""))
    assert run.phase("j1-overlarge") == phase
    assert run.binds() == {}


def test_plugin_argument_applies_to_jobs_without_the_annotation() -> None:
    conf = CONF.format(args="\n    arguments: {sla-waiting-time: 5m}")
    run = simulate([make_node("n1", cpu="4"), *_overlarge("big", None)], conf=conf)
    assert run.phase("big") == "Inqueue"


def test_sla_adjusts_job_order() -> None:
    """e2e "sla adjusts job order": of two equal jobs that cannot both run, the one with the
    earlier deadline runs, although the other was created first."""
    objs: list[dict[str, Any]] = [make_node("n1", cpu="2"), make_node("n2", cpu="2")]
    for name, waiting in (("j2-slow-sla", "1h"), ("j3-fast-sla", "30m")):
        group = make_podgroup(name, min_member=4)
        group["metadata"]["annotations"] = {"sla-waiting-time": waiting}
        objs += [group, *(make_pod(f"{name}-{i}", cpu="1", group=name) for i in range(4))]
    run = simulate(objs, conf=CONF.format(args=""))
    assert sorted(run.binds()) == [f"j3-fast-sla-{i}" for i in range(4)]
    without_sla = simulate(objs, conf=CONF.format(args="").replace("  - name: sla\n", ""))
    assert sorted(without_sla.binds()) == [f"j2-slow-sla-{i}" for i in range(4)]
