"""``volcano_unschedule_task_count`` / ``volcano_unschedule_job_count`` moved by what changed.

Volcano's gang ``OnSessionClose`` sets ``UpdateUnscheduleTaskCount(job.Name, …)`` for every job
and ``UpdateUnscheduleJobCount`` to the jobs that are not ready; the cycle metrics here publish
only the names whose count changed since the last cycle and must end with the same series.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from scheduler.api.types import JobID
from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.kube.cyclemetrics import record_cycle
from scheduler.metrics import REGISTRY
from tests.builders import IgnoredWrites


def _cycle(cache: SchedulerCache) -> None:
    record_cycle(SimpleNamespace(seconds=0.01, plugin_open_seconds=0.0, action_seconds={},
                                 plugin_seconds={}), cache)


def _task_count(job: str) -> float | None:
    return REGISTRY.get_sample_value("volcano_unschedule_task_count", {"job_id": job})


def test_only_changed_names_move_and_the_series_match_a_full_recount() -> None:
    cache = SchedulerCache(writer=IgnoredWrites(), clock=time.time)
    cache.set_unready(JobID("a/stuck"), ("stuck-x", 3))
    cache.set_unready(JobID("a/fits"), ("fits-x", 0))
    cache.set_unready(JobID("b/stuck"), ("stuck-x", 2))  # same name, another namespace: adds up
    _cycle(cache)
    assert _task_count("stuck-x") == 5.0 and _task_count("fits-x") == 0.0
    assert REGISTRY.get_sample_value("volcano_unschedule_job_count") == 1.0
    assert not cache.unready_changed

    cache.set_unready(JobID("a/stuck"), ("stuck-x", 0))  # placed in part
    cache.set_unready(JobID("a/fits"), None)  # gone
    cache.set_unready(JobID("c/new"), ("new-x", 1))
    assert cache.unready_changed == {"stuck-x", "fits-x", "new-x"}
    _cycle(cache)
    assert _task_count("stuck-x") == 2.0 and _task_count("new-x") == 1.0
    assert _task_count("fits-x") is None  # its series went with the job
    assert REGISTRY.get_sample_value("volcano_unschedule_job_count") == 2.0

    cache.set_unready(JobID("b/stuck"), None)
    cache.set_unready(JobID("a/stuck"), None)
    cache.set_unready(JobID("c/new"), ("new-x", 0))
    _cycle(cache)
    assert _task_count("stuck-x") is None and _task_count("new-x") == 0.0
    assert REGISTRY.get_sample_value("volcano_unschedule_job_count") == 0.0
    assert cache.unready_positive == 0
