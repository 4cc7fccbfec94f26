"""Property: a gang whose binds are still in flight settles, and that changes nothing seen.

A gang placed in one cycle stays ``Inqueue`` with ``Binding`` tasks until its binds show in
the cluster; cycles in between (``hold``: a cycle whose writes are not performed yet, as when
the bind workers lag behind the loop) close it the same way each time, so it is settled
(:func:`scheduler.framework.close._scheduled`). As in ``test_settled_props``, two twins run
the same steps, one settling and one visiting every job, and must show the same cluster.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.podgroup import PHASE_INQUEUE
from scheduler.api.types import TaskStatus
from tests.scenarios.test_settled_props import PREEMPT_CONF, Twin, outcome

STEPS = ("cycle", "hold", "hold", "hold", "arrive", "arrive_huge", "run", "run_all", "finish",
         "delete_pod", "change_node", "low_priority", "high_priority")


class Holding(Twin):
    def step(self, kind: str) -> None:
        if kind == "hold":  # the writes of this cycle (binds first) wait for a later flush
            self.count += 1
            self.scheduler.run_once()
            self.sim.clock.advance(1.0)
        else:
            super().step(kind)


def _binding_settled(world: Holding) -> int:
    last = world.cache.pool.last
    if last is None:
        return 0
    return sum(1 for uid in last.settled
               if last.jobs[uid].podgroup.phase == PHASE_INQUEUE
               and last.jobs[uid].count(TaskStatus.BINDING))


def _run(seed: int, steps: list[str], conf: str | None) -> int:
    settling = Holding(seed, settle=True, conf=conf)
    visiting = Holding(seed, settle=False, conf=conf)
    seen = 0
    for kind in steps:
        settling.step(kind)
        visiting.step(kind)
        seen += _binding_settled(settling)
        assert outcome(settling) == outcome(visiting), kind
    return seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), steps=st.lists(st.sampled_from(STEPS), max_size=30))
def test_settling_binding_gangs_matches_visiting_every_job(seed: int, steps: list[str]) -> None:
    _run(seed, steps, None)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), steps=st.lists(st.sampled_from(STEPS), max_size=30))
def test_settling_binding_gangs_matches_visiting_with_preemption(seed: int,
                                                                 steps: list[str]) -> None:
    _run(seed, steps, PREEMPT_CONF)


def test_gangs_with_binds_in_flight_settle_until_the_binds_arrive() -> None:
    steps = ["arrive", "arrive", "hold", "hold", "hold", "cycle", "cycle", "cycle"]
    assert _run(2, steps, None)
