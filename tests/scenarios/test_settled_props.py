"""Property: skipping settled jobs changes nothing the cluster sees.

Two identical clusters run the same random sequence of events and scheduling cycles; one
scheduler settles jobs (:mod:`scheduler.framework.settled`), the other visits every job in
every cycle as Volcano does (its ``SessionSink`` job updater and gang ``OnSessionClose`` in
``pkg/scheduler/framework/job_updater.go`` and ``plugins/gang/gang.go``). After every step
both clusters must hold the same bindings, pod conditions and nominations, PodGroup and
Queue status and events, and the caches the same unready counts. The only allowed
difference is the stamp (``transitionID``, ``lastTransitionTime``) of a condition, which a
settled job keeps from the cycle that last changed it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.conf import DEFAULT_CONF
from tests.builders import conf_of, make_pod, make_podgroup, make_priority_class
from tests.scenarios.test_incremental_props import World

STEPS = ("cycle", "cycle", "cycle", "arrive", "arrive_gpu", "arrive_huge", "run", "run_all",
         "finish", "delete_pod", "change_node", "add_node", "delete_node", "low_priority",
         "high_priority")

# Volcano's default conf with preempt added, so that settled jobs lose pods to preemptors.
PREEMPT_CONF = DEFAULT_CONF.replace('"enqueue, allocate, backfill"',
                                    '"enqueue, allocate, backfill, preempt"')


class Twin(World):
    def __init__(self, seed: int, *, settle: bool, conf: str | None) -> None:
        super().__init__(seed)
        self.cache.pool.settle = settle
        self._add(make_priority_class("high", 1000))
        self._add(make_priority_class("low", 0))
        if conf is not None:
            self.scheduler.set_conf(conf_of(conf))

    def step(self, kind: str) -> None:
        if kind == "run_all":
            for pod in self._pods(bound=True):
                pod.setdefault("status", {})["phase"] = "Running"
                self._modify(pod)
            self.count += 1
        elif kind in ("low_priority", "high_priority"):
            self.count += 1
            name = f"p{self.count}"
            level = "high" if kind == "high_priority" else "low"
            self._add(make_podgroup(name, min_member=1, priority_class=level))
            # Both kinds go to the zone-a node, where a high one needs the lows' room; a low
            # job runs one pod more than its gang needs, which gang lets preempt take.
            for i in range(1 if level == "high" else 2):
                pod = make_pod(f"{name}-{i}", cpu="2" if level == "high" else "1", group=name)
                pod["spec"]["nodeSelector"] = {"zone": "a"}
                pod["spec"]["priorityClassName"] = level
                pod["spec"]["priority"] = 1000 if level == "high" else 0
                self._add(pod)
        else:
            super().step(kind)


def _strip(conditions: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return sorted(
        ({k: v for k, v in c.items() if k not in ("transitionID", "lastTransitionTime")}
         for c in conditions or []),
        key=lambda c: str(c.get("type")),
    )


def outcome(world: World) -> dict[str, Any]:
    objects = world.sim.objects
    pods = {
        key: (pod["spec"].get("nodeName"), (pod.get("status") or {}).get("phase"),
              (pod.get("status") or {}).get("nominatedNodeName"),
              _strip((pod.get("status") or {}).get("conditions")))
        for key, pod in objects.get("Pod", {}).items()
    }
    podgroups = {
        key: ({k: v for k, v in (pg.get("status") or {}).items() if k != "conditions"},
              _strip((pg.get("status") or {}).get("conditions")))
        for key, pg in objects.get("PodGroup", {}).items()
    }
    queues = {key: q.get("status") for key, q in objects.get("Queue", {}).items()}
    events = [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"],
               e["message"], e["count"]) for e in world.sim.events]
    return {"pods": pods, "podgroups": podgroups, "queues": queues, "events": events,
            "unready": dict(world.cache.unready)}


def _run(seed: int, steps: list[str], conf: str | None) -> tuple[int, int]:
    """Run both twins; return how many settled jobs the sessions saw, and evictions."""
    settling = Twin(seed, settle=True, conf=conf)
    visiting = Twin(seed, settle=False, conf=conf)
    settled_seen = 0
    for kind in steps:
        settling.step(kind)
        visiting.step(kind)
        last = settling.cache.pool.last
        if last is not None:
            settled_seen += len(last.settled)
            if last.active is not None:  # what sessions visit, kept in step with the jobs
                assert last.active == [u for u in last.jobs if u not in last.settled]
        assert outcome(settling) == outcome(visiting), kind
    return settled_seen, sum(1 for e in settling.sim.events if e["reason"] == "Evict")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), steps=st.lists(st.sampled_from(STEPS), max_size=30))
def test_settling_matches_visiting_every_job_with_devices(seed: int, steps: list[str]) -> None:
    _run(seed, steps, None)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), steps=st.lists(st.sampled_from(STEPS), max_size=30))
def test_settling_matches_visiting_every_job_with_preemption(seed: int,
                                                             steps: list[str]) -> None:
    _run(seed, steps, PREEMPT_CONF)


def test_preemption_evicts_from_settled_jobs_and_closes_them() -> None:
    """The case the properties must cover: low-priority jobs settle, then a high-priority
    pod evicts one of their pods (Volcano ``preempt.go``); the session that evicts must close
    the settled victims' jobs as visiting every job would."""
    steps = ["low_priority", "low_priority", "cycle", "run_all", "cycle", "cycle",
             "high_priority", "high_priority", "cycle", "cycle", "cycle"]
    settled, evictions = _run(1, steps, PREEMPT_CONF)
    assert settled and evictions


def test_settled_jobs_with_devices_are_exercised() -> None:
    settled, _ = _run(3, ["cycle", "run_all", "cycle", "cycle", "cycle", "finish", "cycle",
                          "arrive_gpu", "cycle", "cycle"], None)
    assert settled
