"""``SchedulerCache.arrived``: raised by a pod's first arrival only, which is what lets
``lahar run --schedule-on-arrival`` start a cycle early without spinning on pods that wait."""

from __future__ import annotations

import copy
import time

from scheduler.cache.cache import SchedulerCache
from tests.builders import IgnoredWrites, make_pod, make_podgroup


def test_only_a_pending_pod_of_ours_seen_for_the_first_time_raises_it() -> None:
    cache = SchedulerCache(writer=IgnoredWrites(), clock=time.time)
    cache.apply("ADDED", "Pod", make_pod("elsewhere", scheduler="default-scheduler"))
    cache.apply("ADDED", "Pod", make_pod("running", node="n1", phase="Running"))
    assert not cache.arrived.is_set()
    pod = make_pod("p1")
    cache.apply("ADDED", "Pod", pod)
    assert cache.arrived.is_set()
    cache.arrived.clear()
    changed = copy.deepcopy(pod)
    changed["metadata"]["annotations"]["note"] = "updated"
    cache.apply("MODIFIED", "Pod", changed)  # still waiting: not a new arrival
    bound = copy.deepcopy(changed)
    bound["spec"]["nodeName"] = "n1"
    cache.apply("MODIFIED", "Pod", bound)
    cache.apply("DELETED", "Pod", bound)
    assert not cache.arrived.is_set()
    cache.apply("ADDED", "Pod", make_pod("p1"))  # a new pod under the old name
    assert cache.arrived.is_set()


def test_a_podgroup_raises_it_only_when_its_pods_came_first() -> None:
    cache = SchedulerCache(writer=IgnoredWrites(), clock=time.time)
    cache.apply("ADDED", "PodGroup", make_podgroup("early"))
    assert not cache.arrived.is_set()
    cache.apply("ADDED", "Pod", make_pod("p1", group="late"))
    cache.arrived.clear()
    cache.apply("ADDED", "PodGroup", make_podgroup("late"))
    assert cache.arrived.is_set()
    cache.arrived.clear()
    cache.apply("MODIFIED", "PodGroup", make_podgroup("late", min_member=2))
    assert not cache.arrived.is_set()
