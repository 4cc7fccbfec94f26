"""QueueInfo (``scheduling.volcano.sh/v1beta1`` Queue): share weight, bounds and state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.errors import ObjectError
from scheduler.api.resource import (
    UNLIMITED,
    Default,
    QuantityError,
    Resource,
    resource_from_list,
)
from scheduler.api.task import parse_time
from scheduler.api.types import QueueID

__all__ = ["QUEUE_OPEN", "QueueInfo", "queue_from_object"]

QUEUE_OPEN = "Open"


@dataclass(slots=True)
class QueueInfo:
    uid: QueueID
    name: str
    weight: int = 1
    capability: Resource | None = None
    guarantee: Resource | None = None
    deserved: Resource | None = None
    reclaimable: bool = True
    state: str = QUEUE_OPEN
    priority: int = 0
    parent: str = ""
    creation: float = 0.0
    annotations: Mapping[str, str] = field(default_factory=dict)
    allocated_status: Mapping[str, Any] = field(default_factory=dict)
    """``status.allocated`` as last seen, so close-time writes happen only on change."""

    @property
    def is_open(self) -> bool:
        return self.state == QUEUE_OPEN

    def capability_limit(self) -> Resource | None:
        """``spec.capability`` as a limit, or None when the queue sets none.

        cpu or memory that the capability leaves out (or sets to 0) is unlimited, as in
        Volcano's proportion and capacity plugins; a scalar it leaves out is unlimited when
        the limit is applied with ``min_dimension(..., Default.INFINITY)``.
        """
        if self.capability is None:
            return None
        limit = self.capability.clone()
        if limit.milli_cpu <= 0:
            limit.milli_cpu = UNLIMITED
        if limit.memory <= 0:
            limit.memory = UNLIMITED
        return limit

    def real_capability(self, *, total: Resource, total_guarantee: Resource) -> Resource:
        """What the queue can ever hold: the cluster beyond every queue's guarantee, plus its
        own guarantee, capped by its capability.

        The part beyond the guarantees floors at 0 per dimension (guarantees may add up to
        more than the cluster), so a queue always keeps at least its own guarantee.
        """
        real = total.exceeded_part(total_guarantee)
        if self.guarantee is not None:
            real.add(self.guarantee)
        limit = self.capability_limit()
        if limit is not None:
            real.min_dimension(limit, Default.INFINITY)
        return real


def queue_from_object(obj: Mapping[str, Any], *,
                      ignored: frozenset[str] = frozenset()) -> QueueInfo:
    """Build a QueueInfo; a queue without ``status.state`` counts as Open. ``ignored``
    resource names (accounted by device families) are left out of its quantities, as
    Volcano's ``NewResource`` leaves its ``IgnoredDevicesList`` out."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta.get("name") or "")

    def err(field_name: str, problem: str) -> ObjectError:
        return ObjectError(kind="Queue", name=name, field=field_name, problem=problem)

    weight = spec.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 65535:
        raise err("spec.weight", f"must be an integer between 1 and 65535, got {weight!r}")
    priority = spec.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise err("spec.priority", f"must be an integer, got {priority!r}")

    def resources(value: Any, where: str) -> Resource | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise err(where, "must be a resource list")
        try:
            return resource_from_list(value, ignored=ignored)
        except QuantityError as exc:
            raise err(where, str(exc)) from None

    reclaimable = spec.get("reclaimable")
    return QueueInfo(
        uid=QueueID(name),
        name=name,
        weight=weight,
        capability=resources(spec.get("capability"), "spec.capability"),
        guarantee=resources(
            (spec.get("guarantee") or {}).get("resource"), "spec.guarantee.resource"
        ),
        deserved=resources(spec.get("deserved"), "spec.deserved"),
        reclaimable=True if reclaimable is None else bool(reclaimable),
        state=str(status.get("state") or QUEUE_OPEN),
        priority=priority,
        parent=str(spec.get("parent") or ""),
        creation=parse_time(meta.get("creationTimestamp")),
        annotations=dict(meta.get("annotations") or {}),
        allocated_status=dict(status.get("allocated") or {}),
    )
