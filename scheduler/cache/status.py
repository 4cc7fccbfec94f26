"""Close-time writes, deduplicated: PodGroup status, pod conditions, events, queue status.

Volcano re-derives these every cycle; writing them every cycle floods the API server
(volcano#3852). This recorder remembers what was last written per object and queues a write
only when the content changed (conditions compare without their timestamps). Each write is
queued under a key naming the object it writes (:data:`StatusKey`), so an asynchronous writer
can coalesce writes per object; a write that was lost (dropped or failed) is reported back
through :meth:`StatusRecorder.lost` and is then written again when a later cycle derives it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from scheduler.api.job import JobInfo
from scheduler.api.podgroup import PodGroup
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.cache.interface import ClusterWriter, ObjectRef

__all__ = ["StatusKey", "StatusRecorder", "condition_key"]

Write = Callable[[], None]
StatusKey = tuple[str, str]
"""``(what, object)``: ``("pod", "ns/name")`` (condition, nomination and its event),
``("podgroup", "ns/name")``, ``("podgroup-event", "ns/name")``, ``("queue", name)``."""


def condition_key(conditions: Sequence[Mapping[str, Any]]) -> tuple[tuple[Any, ...], ...]:
    return tuple(
        sorted(
            (str(c.get("type")), str(c.get("status")), str(c.get("reason")), str(c.get("message")))
            for c in conditions
        )
    )


def _status_key(status: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        status.get("phase"),
        condition_key(status.get("conditions") or []),
        status.get("running", 0),
        status.get("succeeded", 0),
        status.get("failed", 0),
    )


def podgroup_status_key(podgroup: PodGroup) -> tuple[Any, ...]:
    """``_status_key(podgroup.status_dict())`` without building the status: a cycle compares
    every job's status with the last one written, and most have not changed."""
    return (
        podgroup.phase,
        condition_key(podgroup.conditions),
        podgroup.running or 0,
        podgroup.succeeded or 0,
        podgroup.failed or 0,
    )


class StatusRecorder:
    def __init__(
        self,
        *,
        writer: ClusterWriter,
        enqueue: Callable[[StatusKey, Write], None],
        clock: Callable[[], float],
        now_text: Callable[[], str],
        on_lost_podgroup: Callable[[str], None] | None = None,
    ) -> None:
        self.writer = writer
        self.on_lost_podgroup = on_lost_podgroup
        """Told the PodGroup of a lost status write: a settled job would not derive it again."""
        self.enqueue = enqueue
        self.clock = clock
        self.now_text = now_text
        self.podgroup_status: dict[str, tuple[Any, ...]] = {}
        self.podgroup_events: dict[str, tuple[str, str]] = {}
        self.pod_conditions: dict[str, tuple[str, str]] = {}
        self.pod_nominations: dict[str, str] = {}
        """Pod key → its ``status.nominatedNodeName`` as last seen or written."""
        self.queue_allocated: dict[str, dict[str, str]] = {}

    def seen_podgroup(self, key: str, status: Mapping[str, Any]) -> None:
        self.podgroup_status[key] = _status_key(status)

    def seen_pod(self, key: str, pod: Mapping[str, Any]) -> None:
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if nominated:
            self.pod_nominations[key] = str(nominated)
        else:
            self.pod_nominations.pop(key, None)
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                self.pod_conditions[key] = (
                    str(condition.get("reason")),
                    str(condition.get("message")),
                )
                return
        self.pod_conditions.pop(key, None)

    def seen_queue(self, name: str, allocated: Mapping[str, Any]) -> None:
        self.queue_allocated[name] = {str(k): str(v) for k, v in allocated.items()}

    # -- SessionSink parts ----------------------------------------------------------------
    def update_podgroup(self, job: JobInfo, event: tuple[str, str, str] | None) -> None:
        podgroup = job.podgroup
        key = f"{podgroup.namespace}/{podgroup.name}"
        digest = podgroup_status_key(podgroup)
        if self.podgroup_status.get(key) != digest:
            status = podgroup.status_dict()
            self.podgroup_status[key] = digest
            self.enqueue(
                ("podgroup", key),
                lambda: self.writer.update_podgroup_status(
                    namespace=podgroup.namespace, name=podgroup.name, status=status
                )
            )
        if event is not None and self.podgroup_events.get(key) != (event[1], event[2]):
            self.podgroup_events[key] = (event[1], event[2])
            ref = ObjectRef(
                kind="PodGroup",
                name=podgroup.name,
                namespace=podgroup.namespace,
                uid=podgroup.uid,
                api_version="scheduling.volcano.sh/v1beta1",
            )
            self.enqueue(
                ("podgroup-event", key),
                lambda: self.writer.record_event(
                    involved=ref, type=event[0], reason=event[1], message=event[2]
                ),
            )

    def update_task_condition(
        self, task: TaskInfo, *, reason: str, message: str, nominated_node: str = ""
    ) -> None:
        """Queue the condition (and nomination) write when either changed, as Volcano's
        ``taskUnschedulable``: an empty ``nominated_node`` never clears an earlier one, since a
        preemptor still waiting for its victims to go is pipelined again without evicting."""
        key = task.key
        nominate = bool(nominated_node) and self.pod_nominations.get(key) != nominated_node
        if self.pod_conditions.get(key) == (reason, message) and not nominate:
            return
        self.pod_conditions[key] = (reason, message)
        if nominate:
            self.pod_nominations[key] = nominated_node
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": self.now_text(),
        }
        ref = ObjectRef(kind="Pod", name=task.name, namespace=task.namespace, uid=str(task.uid))

        def write() -> None:
            self.writer.update_pod_condition(
                namespace=task.namespace,
                name=task.name,
                condition=condition,
                nominated_node=nominated_node if nominate else None,
            )
            self.writer.record_event(
                involved=ref, type="Warning", reason="FailedScheduling", message=message
            )

        self.enqueue(("pod", key), write)

    def update_queue_allocated(self, queue: QueueInfo, allocated: Resource) -> None:
        # ``pods`` too, as Volcano's ConvertRes2ResList writes it
        quantities = allocated.to_quantities(include_pods=True)
        if self.queue_allocated.get(queue.name) == quantities:
            return
        self.queue_allocated[queue.name] = quantities
        self.enqueue(
            ("queue", queue.name),
            lambda: self.writer.update_queue_status(
                name=queue.name, status={"allocated": quantities}
            )
        )

    def lost(self, key: Hashable) -> None:
        """A write queued under ``key`` never reached the cluster: forget what it wrote, so the
        next cycle that derives the same state writes it again."""
        if not isinstance(key, tuple) or len(key) != 2:
            return
        what, name = key
        if what == "pod":
            self.pod_conditions.pop(name, None)
            self.pod_nominations.pop(name, None)
        elif what == "podgroup":
            self.podgroup_status.pop(name, None)
            if self.on_lost_podgroup is not None:
                self.on_lost_podgroup(name)
        elif what == "podgroup-event":
            self.podgroup_events.pop(name, None)
            if self.on_lost_podgroup is not None:
                self.on_lost_podgroup(name)
        elif what == "queue":
            self.queue_allocated.pop(name, None)

    def forget_pod(self, key: str) -> None:
        self.pod_conditions.pop(key, None)
        self.pod_nominations.pop(key, None)
