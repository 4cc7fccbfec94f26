"""The seam between the scheduler cache and wherever objects live.

A cluster adapter (the real API server in ``scheduler.cluster.kube``, the embedded simulator in
``scheduler.cluster.sim``) feeds raw object dicts into the cache with
``SchedulerCache.apply(event, kind, obj)`` and receives the scheduler's decisions through a
:class:`ClusterWriter`. Everything the scheduler writes goes through this Protocol, so the
scheduling logic is tested against in-memory implementations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["BindError", "ClusterWriter", "EventKind", "Fenced", "ObjectRef", "WriteError"]

EventKind = str
"""``"ADDED"``, ``"MODIFIED"`` or ``"DELETED"`` (watch event types)."""


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an Event is about (``involvedObject``)."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"


class WriteError(Exception):
    """A write the API refused or could not take; ``status`` is the HTTP code (0 = transport)."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class BindError(WriteError):
    """A Binding that did not take. ``status == 409`` means the pod is already bound."""


class Fenced(BindError):
    """A bind not sent because this replica may no longer write (its leader Lease is gone).

    Not a failure of the pod: the task is only given back, with nothing reported, since
    reporting would be a write too.
    """


class ClusterWriter(Protocol):
    """What the scheduler writes. Implementations raise :class:`WriteError` on failure."""

    def bind(
        self, *, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> None:
        """POST the pod's ``binding`` subresource with ``annotations`` inside the Binding."""

    def evict(
        self,
        *,
        namespace: str,
        name: str,
        uid: str,
        reason: str,
        message: str,
        preemptor: ObjectRef | None = None,
    ) -> None:
        """Evict a pod (Eviction API / graceful delete) after marking its conditions.

        ``preemptor`` is the pod the eviction makes room for, when known; it becomes the
        ``related`` object of the pod's ``Evict`` event, as kube-scheduler's preemption does.
        """

    def update_pod_condition(
        self,
        *,
        namespace: str,
        name: str,
        condition: Mapping[str, Any],
        nominated_node: str | None = None,
    ) -> None:
        """Set (replace by type) one pod status condition, optionally ``nominatedNodeName``."""

    def update_podgroup_status(
        self, *, namespace: str, name: str, status: Mapping[str, Any]
    ) -> None:
        """Replace a PodGroup's ``status`` (Volcano's CRD has no status subresource)."""

    def update_queue_status(self, *, name: str, status: Mapping[str, Any]) -> None:
        """Merge the given fields (``allocated`` …) into a Queue's ``status``."""

    def record_event(self, *, involved: ObjectRef, type: str, reason: str, message: str) -> None:
        """Create a core/v1 Event from the scheduler."""
