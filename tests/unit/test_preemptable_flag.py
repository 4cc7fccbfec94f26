"""``volcano.sh/preemptable`` read as Volcano reads it: ``strconv.ParseBool`` on the annotation,
else the label (``GetPodPreemptable`` in ``pkg/scheduler/api/pod_info.go``; for a PodGroup,
``JobInfo.extractPreemptable`` in ``job_info.go``), an unreadable value being false."""

from __future__ import annotations

import time

import pytest

from scheduler.api.task import preemptable_flag, task_from_pod
from scheduler.cache.cache import SchedulerCache
from tests.builders import IgnoredWrites, make_pod, make_podgroup


@pytest.mark.parametrize("value", ["1", "t", "T", "true", "TRUE", "True"])
def test_what_parsebool_reads_as_true(value: str) -> None:
    assert preemptable_flag({"volcano.sh/preemptable": value}, {}, False)


@pytest.mark.parametrize("value", ["0", "f", "F", "false", "FALSE", "False", "tRUE", "yes", ""])
def test_false_and_unreadable_values_are_false(value: str) -> None:
    assert not preemptable_flag({"volcano.sh/preemptable": value}, {}, True)


def test_the_annotation_wins_over_the_label_and_the_default_applies_without_either() -> None:
    assert not preemptable_flag({"volcano.sh/preemptable": "0"},
                                {"volcano.sh/preemptable": "1"}, True)
    assert preemptable_flag({}, {"volcano.sh/preemptable": "t"}, False)
    assert preemptable_flag({}, {}, True) and not preemptable_flag({}, {}, False)


def test_a_pod_annotated_with_1_is_preemptable() -> None:
    pod = make_pod("p", group="g")
    pod["metadata"]["annotations"]["volcano.sh/preemptable"] = "1"
    assert task_from_pod(pod).preemptable


def test_a_podgroup_labelled_preemptable_makes_a_preemptable_job() -> None:
    cache = SchedulerCache(writer=IgnoredWrites(), clock=time.time)
    cache.apply("ADDED", "Queue", {"apiVersion": "scheduling.volcano.sh/v1beta1",
                                   "kind": "Queue", "metadata": {"name": "default"},
                                   "spec": {"weight": 1}})
    group = make_podgroup("g")
    group["metadata"]["labels"] = {"volcano.sh/preemptable": "T"}
    cache.apply("ADDED", "PodGroup", group)
    cache.apply("ADDED", "Pod", make_pod("p", group="g"))
    job = next(iter(cache.snapshot().jobs.values()))
    assert job.preemptable
