"""Reusing parsed pod specs (``PodParseMemo``): a hit gives exactly what parsing gives, any
change of a parsed field misses, and errors still name the pod that carries them."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from scheduler.api.errors import ObjectError
from scheduler.api.pod import PodParseMemo
from scheduler.api.task import task_from_pod
from scheduler.cache.cache import SchedulerCache
from tests.builders import make_pod


def _fields(pod: dict[str, Any], memo: PodParseMemo | None) -> tuple[object, ...]:
    task = task_from_pod(pod, memo=memo)
    return (task.resreq, task.init_resreq, task.spec, task.name, task.uid, task.priority)


def _variants() -> list[tuple[str, Any]]:
    def set_path(*path: str, value: object) -> Any:
        def change(pod: dict[str, Any]) -> None:
            target = pod
            for key in path[:-1]:
                target = target.setdefault(key, {})
            target[path[-1]] = value
        return change

    return [
        ("cpu", set_path("spec", "containers", value=[
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}])),
        ("cpu-int-vs-str", set_path("spec", "containers", value=[
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": 1}}}])),
        ("selector", set_path("spec", "nodeSelector", value={"zone": "b"})),
        ("labels", set_path("metadata", "labels", value={"app": "x"})),
        ("namespace", set_path("metadata", "namespace", value="other")),
        ("deleting", set_path("metadata", "deletionTimestamp", value="2026-01-01T00:00:00Z")),
        ("tolerations", set_path("spec", "tolerations", value=[
            {"key": "k", "operator": "Exists"}])),
        ("overhead", set_path("spec", "overhead", value={"cpu": "100m"})),
        ("init", set_path("spec", "initContainers", value=[
            {"name": "i", "image": "x", "resources": {"requests": {"cpu": "3"}}}])),
    ]


@pytest.mark.parametrize(("change",), [(c,) for _, c in _variants()],
                         ids=[name for name, _ in _variants()])
def test_a_changed_parsed_field_is_parsed_again(change: Any) -> None:
    memo = PodParseMemo()
    pod = make_pod("p1", cpu="1", node_selector={"zone": "a"})
    _fields(pod, memo)
    changed = copy.deepcopy(pod)
    change(changed)
    assert _fields(changed, memo) == _fields(changed, None)


def test_an_update_that_parses_the_same_reuses_the_parse() -> None:
    """A bind (``nodeName``, annotations, status) changes nothing the parsers read."""
    memo = PodParseMemo()
    pod = make_pod("p1", cpu="1", memory="1Gi", group="pg")
    first = task_from_pod(pod, memo=memo)
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = "n1"
    bound["metadata"]["annotations"]["x"] = "y"
    bound["status"] = {"phase": "Running"}
    second = task_from_pod(bound, memo=memo)
    assert second.spec is first.spec and second.resreq is first.resreq
    assert (second.node_name, second.status) != (first.node_name, first.status)
    assert len(memo) == 1


def test_errors_are_not_remembered_and_name_their_pod() -> None:
    memo = PodParseMemo()
    good = make_pod("good", cpu="1")
    task_from_pod(good, memo=memo)
    bad = make_pod("bad", cpu="lots")
    for _ in range(2):
        with pytest.raises(ObjectError, match="bad"):
            task_from_pod(bad, memo=memo)
    assert len(memo) == 1


def test_objects_shown_by_address_are_not_remembered() -> None:
    class Opaque:
        pass

    memo = PodParseMemo()
    pod = make_pod("p1")
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1"}
    pod["spec"]["affinity"] = {"x": Opaque()}
    task_from_pod(pod, memo=memo)
    assert len(memo) == 0


def test_the_memo_starts_afresh_past_its_limit() -> None:
    memo = PodParseMemo(limit=2)
    for cpu in ("1", "2", "3"):
        task_from_pod(make_pod("p", cpu=cpu), memo=memo)
    assert len(memo) == 1


def test_cache_in_place_update_of_a_pod_is_seen() -> None:
    """The embedded cluster updates its objects in place: the cache must still notice."""

    class Writer:
        def __getattr__(self, name: str) -> Any:
            return lambda *args, **kwargs: None

    cache = SchedulerCache(writer=Writer(), clock=time.time)
    pod = make_pod("p1", cpu="1")
    pod["metadata"]["uid"] = "u1"
    cache.apply("ADDED", "Pod", pod)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    cache.apply("MODIFIED", "Pod", pod)
    assert cache.tasks["u1"].resreq.milli_cpu == 3000  # type: ignore[index]


@pytest.mark.parametrize(("value", "other"), [
    (1, 1.0), (1, "1"), (1, True), (0, False), (float("nan"), None), (float("inf"), None),
    (2**70, float(2**70)), ("1", "1 "), ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
])
def test_keys_tell_apart_what_parses_differently(value: object, other: object) -> None:
    """The key written by orjson or by ``repr``: values JSON alone would confuse (NaN and
    null, big integers and floats) still make different keys."""
    def key(item: object) -> object:
        pod = make_pod("p1", cpu="1")
        pod["spec"]["nodeSelector"] = {"zone": item}
        return PodParseMemo.key(pod, frozenset())

    assert key(value) != key(other)
    assert key(value) == key(copy.deepcopy(value))


def test_an_api_servers_pod_is_keyed_without_repr() -> None:
    pod = make_pod("p1", cpu="1")
    assert isinstance(PodParseMemo.key(pod, frozenset())[1], bytes)
    pod["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "value": None}]
    assert isinstance(PodParseMemo.key(pod, frozenset())[1], str)  # null: repr's key
