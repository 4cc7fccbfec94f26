"""Plain pods scheduled at once, under the PodGroup their controller is about to create.

A pod of ours that names no PodGroup gets one from the podgroup controller of ``lahar run``
(``podgroup-<controller UID>``, :mod:`scheduler.api.implied`). Waiting for that write before
scheduling the pod puts an API write (and its retries) on the path of every decision: a burst
of plain pods would wait for their PodGroups one by one, and a stalled API server would stop
scheduling. Instead the cache gives such a pod the PodGroup it implies, in memory, the moment
the pod arrives: the job has the name, queue, priority and ``minResources`` the controller will
write. When the real PodGroup arrives from the watch it takes the place of the implied one (and
its status is written from then on); an implied PodGroup whose last pod is gone is dropped.

Nothing is written for an implied PodGroup itself: its status and events wait for the real
object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from scheduler.api.errors import ObjectError
from scheduler.api.implied import implied_podgroup, implied_podgroup_name
from scheduler.api.podgroup import PodGroup, podgroup_from_object
from scheduler.api.task import GROUP_NAME_ANNOTATION, TaskInfo, group_of
from scheduler.api.types import JobID, TaskID
from scheduler.cache.jobs import JobChanges

__all__ = ["ImpliedGroups"]


class _Pool(Protocol):
    @property
    def job_changes(self) -> JobChanges: ...

    @property
    def dirty_jobs(self) -> set[JobID]: ...


class ImpliedGroups:
    """The implied PodGroups a cache holds (see the module docstring)."""

    __slots__ = ("default_queue", "enabled", "ignored", "uids")

    def __init__(self, *, enabled: bool, default_queue: str,
                 ignored: frozenset[str] = frozenset()) -> None:
        self.enabled = enabled
        self.default_queue = default_queue
        self.ignored = ignored
        """Resource names the device families account: the implied ``minResources`` keeps
        them (the controller writes them, as Volcano's), the job reads it without them."""
        self.uids: set[JobID] = set()

    def adopt(self, task: TaskInfo, pod: Mapping[str, Any], *,
              podgroups: dict[JobID, PodGroup], pool: _Pool) -> None:
        """Put ``task`` (of a pod naming no PodGroup) in the PodGroup its pod implies, made
        in memory unless it exists already (only then is the whole PodGroup built: a pod's
        every update comes through here)."""
        meta = pod.get("metadata") or {}
        uid = JobID(f"{meta.get('namespace', 'default')}/{implied_podgroup_name(pod)}")
        if uid in podgroups:
            task.job = uid
            return
        try:
            document = implied_podgroup(pod)
        except (ObjectError, ValueError):
            return  # the controller reports it on the pod; the pod stays out of scheduling
        document["metadata"]["creationTimestamp"] = meta.get("creationTimestamp")
        task.job = uid
        podgroups[uid] = podgroup_from_object(document, default_queue=self.default_queue,
                                              ignored=self.ignored)
        pool.job_changes.podgroup(uid, deleted=False, known=False)
        pool.dirty_jobs.add(uid)
        self.uids.add(uid)

    def name_on_bind(self, task: TaskInfo) -> None:
        """Let the Binding of a pod that names no PodGroup carry the name of the one it is
        scheduled under: the API server applies a Binding's annotations to the pod, so the pod
        is annotated with its bind and the controller need not patch it."""
        if not self.enabled or not task.job or group_of(task.pod.get("metadata") or {}):
            return
        task.bind_annotations[GROUP_NAME_ANNOTATION] = task.job.partition("/")[2]

    def arrived(self, uid: JobID) -> None:
        """The real PodGroup ``uid`` came from the watch."""
        self.uids.discard(uid)

    def release(self, uid: JobID, *, members: Mapping[TaskID, TaskInfo] | None,
                podgroups: dict[JobID, PodGroup], pool: _Pool) -> None:
        """Drop the implied PodGroup ``uid`` once it has no pod left."""
        if uid not in self.uids or members:
            return
        self.uids.discard(uid)
        podgroups.pop(uid, None)
        pool.job_changes.podgroup(uid, deleted=True, known=True)
        pool.dirty_jobs.add(uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self.uids
