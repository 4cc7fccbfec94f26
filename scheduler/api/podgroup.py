"""PodGroup (``scheduling.volcano.sh/v1beta1``): the gang a job's pods belong to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.errors import ObjectError
from scheduler.api.resource import QuantityError, Resource, resource_from_list
from scheduler.api.task import parse_time

__all__ = [
    "PHASE_COMPLETED",
    "PHASE_INQUEUE",
    "PHASE_PENDING",
    "PHASE_RUNNING",
    "PHASE_UNKNOWN",
    "PodGroup",
    "podgroup_from_object",
]

PHASE_PENDING = "Pending"
PHASE_INQUEUE = "Inqueue"
PHASE_RUNNING = "Running"
PHASE_UNKNOWN = "Unknown"
PHASE_COMPLETED = "Completed"


@dataclass(slots=True)
class PodGroup:
    name: str
    namespace: str
    uid: str = ""
    min_member: int = 1
    min_task_member: dict[str, int] = field(default_factory=dict)
    min_resources: Resource | None = None
    queue: str = "default"
    priority_class_name: str = ""
    creation: float = 0.0
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    phase: str = PHASE_PENDING
    conditions: list[dict[str, Any]] = field(default_factory=list)
    running: int = 0
    succeeded: int = 0
    failed: int = 0

    def clone(self) -> PodGroup:
        return PodGroup(
            self.name,
            self.namespace,
            self.uid,
            self.min_member,
            self.min_task_member,
            self.min_resources,
            self.queue,
            self.priority_class_name,
            self.creation,
            self.annotations,
            self.labels,
            self.phase,
            [dict(c) for c in self.conditions],
            self.running,
            self.succeeded,
            self.failed,
        )

    def status_dict(self) -> dict[str, Any]:
        """The ``status`` object as written to the API."""
        status: dict[str, Any] = {"phase": self.phase}
        if self.conditions:
            status["conditions"] = [dict(c) for c in self.conditions]
        for key in ("running", "succeeded", "failed"):
            value = getattr(self, key)
            if value:
                status[key] = value
        return status


def _int(value: object, *, err: Any, field_name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise err(field_name, f"must be an integer >= {minimum}, got {value!r}")
    return value


def podgroup_from_object(obj: Mapping[str, Any], *, default_queue: str = "default") -> PodGroup:
    """Build a PodGroup from its object; raises :class:`ObjectError` naming the field."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")

    def err(field_name: str, problem: str) -> ObjectError:
        return ObjectError(
            kind="PodGroup", name=name, namespace=namespace, field=field_name, problem=problem
        )

    min_member = _int(spec.get("minMember", 1), err=err, field_name="spec.minMember")
    min_task_member = {}
    raw_task_member = spec.get("minTaskMember") or {}
    if not isinstance(raw_task_member, Mapping):
        raise err("spec.minTaskMember", "must be a map of role to integer")
    for role, value in raw_task_member.items():
        min_task_member[str(role)] = _int(value, err=err, field_name=f"spec.minTaskMember[{role}]")
    min_resources = None
    if spec.get("minResources") is not None:
        if not isinstance(spec["minResources"], Mapping):
            raise err("spec.minResources", "must be a resource list")
        try:
            min_resources = resource_from_list(spec["minResources"])
        except QuantityError as exc:
            raise err("spec.minResources", str(exc)) from None
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    return PodGroup(
        name=name,
        namespace=namespace,
        uid=str(meta.get("uid") or ""),
        min_member=min_member,
        min_task_member=min_task_member,
        min_resources=min_resources,
        queue=str(spec.get("queue") or default_queue),
        priority_class_name=str(spec.get("priorityClassName") or ""),
        creation=parse_time(meta.get("creationTimestamp")),
        annotations=dict(meta.get("annotations") or {}),
        labels=dict(meta.get("labels") or {}),
        phase=str(status.get("phase") or PHASE_PENDING),
        conditions=conditions,
        running=int(status.get("running") or 0),
        succeeded=int(status.get("succeeded") or 0),
        failed=int(status.get("failed") or 0),
    )
