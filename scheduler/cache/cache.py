"""SchedulerCache: the long-lived mirror of cluster state, and the bind/evict queue.

Cluster adapters feed raw objects through :meth:`SchedulerCache.apply`; every object is
converted once into the scheduler's dataclasses. :meth:`snapshot` hands each session a private
copy, renewing only the copies that changed since the last one (:mod:`scheduler.cache.snapshot`:
every change to a cached task or node passes through a handler here that marks it).
Decisions come back through the :class:`~scheduler.framework.interface.SessionSink` methods,
are applied to the cache at once (a bound task holds its node's resources from that moment) and
written to the cluster by :meth:`flush`, or, once :meth:`start_background` ran (as ``lahar run``
does), by a pool of bind workers and a coalescing status writer while the scheduler goes on. A
bind the cluster refuses is rolled back and the pod is resynced from the cluster after a
per-pod backoff (:mod:`scheduler.cache.resync`).
An object that cannot be read is reported by a log line and an event naming it; a broken update
of a pod keeps its last readable version. What scheduling leaves out is explained once on the
objects it affects (:meth:`SchedulerCache.report_orphans`): the pods of a PodGroup that is
unreadable or was deleted and of a PodGroup whose queue does not exist get a ``PodScheduled``
condition naming it; a Queue a plugin leaves out (:meth:`report_left_out`) and a ``Device``
object whose node does not exist get a Warning event and one log line.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog

from scheduler.api.errors import ObjectError
from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo, node_from_object
from scheduler.api.pod import PodParseMemo
from scheduler.api.podgroup import PodGroup, podgroup_from_object
from scheduler.api.queue import QueueInfo, queue_from_object
from scheduler.api.resource import Resource
from scheduler.api.task import GROUP_NAME_ANNOTATION, TaskInfo, task_from_pod
from scheduler.api.types import (
    ALLOCATED_STATUS,
    COMPLETED_STATUS,
    JobID,
    QueueID,
    TaskID,
    TaskStatus,
)
from scheduler.cache.binder import BindPool
from scheduler.cache.dra import DRA_KINDS, DraStore
from scheduler.cache.hypernodes import HyperNodeStore, warn_unacted_topology
from scheduler.cache.implied import ImpliedGroups
from scheduler.cache.interface import ClusterWriter, ObjectRef
from scheduler.cache.intern import StringTable
from scheduler.cache.jobs import assemble_jobs
from scheduler.cache.queueusage import QueueUsage
from scheduler.cache.resync import ResyncQueue
from scheduler.cache.shards import NodeShardStore
from scheduler.cache.snapshot import PoolRefresh, SnapshotPool
from scheduler.cache.status import StatusRecorder
from scheduler.cache.statuswriter import CoalescingWriter
from scheduler.cache.writes import CacheWrites
from scheduler.framework.close import rfc3339
from scheduler.framework.snapshot import Snapshot

__all__ = ["NodeDevicesBuilder", "SchedulerCache"]

_ALLOCATED = ALLOCATED_STATUS._value_
_COMPLETED = COMPLETED_STATUS._value_
_HANDLERS = {
    "Node": "_node",
    "Pod": "_pod",
    "PodGroup": "_podgroup",
    "Queue": "_queue",
    "PriorityClass": "_priority_class",
    "Device": "_device",
    "Namespace": "_namespace",
    "HyperNode": "_hypernode",
    "NodeShard": "_node_shard",
}
"""The handler method of each kind (looked up per event: no bound methods built for the rest)."""

log = structlog.get_logger("lahar.cache")

_API_VERSIONS = {
    "PodGroup": "scheduling.volcano.sh/v1beta1",
    "Queue": "scheduling.volcano.sh/v1beta1",
    "Device": "scheduling.koordinator.sh/v1alpha1",
    "HyperNode": "topology.volcano.sh/v1alpha1",
    "NodeShard": "shard.volcano.sh/v1alpha1",
}

NodeDevicesBuilder = Callable[[NodeInfo, Mapping[str, Any] | None], dict[str, Any]]
"""Builds ``NodeInfo.others`` (device family → device object) for a freshly built node, given
the node's Koordinator ``Device`` object when there is one."""


class SchedulerCache(CacheWrites):
    def __init__(
        self,
        *,
        writer: ClusterWriter,
        scheduler_names: Sequence[str] = ("volcano",),
        default_queue: str = "default",
        clock: Callable[[], float],
        node_selector: Mapping[str, str] | None = None,
        ignored_resources: Iterable[str] = (),
        node_devices: NodeDevicesBuilder | None = None,
        device_dims: Iterable[str] = (),
        implied_groups: bool = False,
        sharding_mode: str = "none",
        sharding_name: str = "volcano",
    ) -> None:
        self.writer = writer
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        self.clock = clock
        self.node_selector = dict(node_selector or {})
        self.ignored = frozenset(ignored_resources)
        self.parsed_pods = PodParseMemo()
        """Pod specs parsed before: a pod's updates rarely change what the scheduler parses."""
        self.node_devices = node_devices
        self.device_dims = frozenset(device_dims)
        self.lock = threading.RLock()
        self.node_objects: dict[str, Mapping[str, Any]] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self.tasks: dict[TaskID, TaskInfo] = {}
        self.pods: dict[str, Mapping[str, Any]] = {}
        self.arrivals: dict[str, int] = {}
        """Unbound pods of the cache → a number counting up in the order they were first seen;
        binds leave in this order (:class:`BindPool`)."""
        self._arrival_numbers = itertools.count()
        self.arrived = threading.Event()
        """Set when a pod first joins :attr:`arrivals`, or a PodGroup its pods wait for comes;
        ``lahar run --schedule-on-arrival`` waits on it to start a cycle early and clears it
        before each cycle."""
        self.strings = StringTable()
        """One copy of each short string the cached pods share (namespaces, nodes, phases)."""
        self.tasks_by_node: dict[str, dict[TaskID, TaskInfo]] = {}
        self.tasks_by_job: dict[JobID, dict[TaskID, TaskInfo]] = {}
        self.podgroups: dict[JobID, PodGroup] = {}
        self.implied = ImpliedGroups(enabled=implied_groups, default_queue=default_queue,
                                     ignored=self.ignored)
        """Plain pods' PodGroups not yet on the API server (:mod:`scheduler.cache.implied`)."""
        self.queues: dict[QueueID, QueueInfo] = {}
        self.priority_classes: dict[str, tuple[int, bool]] = {}
        self.namespace_labels: dict[str, dict[str, str]] = {}
        """Namespace name → labels (read by pod affinity terms' namespaceSelector)."""
        self.device_objects: dict[str, Mapping[str, Any]] = {}
        self.hypernodes = HyperNodeStore()
        """HyperNode objects and the network-topology tree built from them."""
        """Koordinator ``Device`` objects (one per node, named after it), kept raw."""
        self.shards = NodeShardStore(mode=sharding_mode, name=sharding_name)
        """NodeShards and the nodes this scheduler may use (``--scheduler-sharding-*``)."""
        self.resync = ResyncQueue(clock=clock)
        self.orphans: list[JobID] = []
        """Jobs left out of the last snapshot because their queue does not exist."""
        self.broken: dict[str, str] = {}
        """``Kind ns/name`` → the problem, for objects that could not be converted."""
        self.left_out: dict[str, dict[str, str]] = {}
        """Kind → name → why, for readable objects scheduling leaves out, as last reported."""
        self.unreadable_groups: dict[JobID, str] = {}
        """PodGroups with no readable version here → what their pending pods are told (until
        the PodGroup is fixed or deleted)."""
        self.deleted_groups: dict[JobID, str] = {}
        """PodGroups deleted while pods named them → what those pods are told (until none is
        left)."""
        self.unselected_nodes: set[str] = set()
        """Nodes outside ``node_selector`` (a Device object naming one names a real node)."""
        self.unmatched_devices: set[str] = set()
        """Device objects named after no node the cache holds or leaves out by selector."""
        self.pre_bind_hooks: list[Callable[[TaskInfo], None]] = []
        """Run before each bind write (e.g. taking a device node lock); raising
        :class:`WriteError` fails the bind, which is rolled back and retried next cycle."""
        self.post_bind_hooks: list[Callable[[TaskInfo, Exception | None], None]] = []
        """Run after each bind attempt with the error that failed it (None on success), e.g.
        to give back a device node lock a failed bind no longer needs."""
        self.dra = DraStore()
        """DRA objects and the claim writes decided but not yet sent (:mod:`.dra`)."""
        self.pre_bind_hooks.append(lambda task: self.dra.before_bind(self.writer, task))
        self.post_bind_hooks.append(
            lambda task, failure: self.dra.after_bind(self.writer, task, failure))
        self.nominated: dict[str, list[ObjectRef]] = {}
        """Node → the pods this cycle's session nominated to it (preemptors whose victims
        there are being evicted); names the preemptor on the victims' Evict events."""
        self.unready: dict[JobID, tuple[str, int]] = {}
        """Job → (PodGroup name, tasks its gang still lacks) as of its last close (a settled
        job keeps its entry); a deleted or orphaned PodGroup or an invalid job has none.
        Changed through :meth:`set_unready` only."""
        self.unready_by_name: dict[str, int] = {}
        """PodGroup name → the sum of ``unready`` over the jobs of that name (Volcano labels
        the metric by name alone), for every name some job in ``unready`` has."""
        self._unready_jobs: dict[str, int] = {}
        """PodGroup name → how many jobs of that name ``unready`` holds."""
        self.unready_changed: set[str] | None = None
        """Names whose entry in ``unready_by_name`` changed or went since the cycle metrics
        last took them (they publish what changed, not every job each cycle); None until they
        first read ``unready_by_name`` whole (a cache nobody publishes keeps no changes)."""
        self.unready_positive = 0
        """How many names in ``unready_by_name`` have a sum above 0."""
        self.usage = QueueUsage()
        """Per-queue requests and allocations of the cached pods, moved on every change once
        the cycle metrics first read them."""
        self._writes: deque[Callable[[], None]] = deque()
        self.committed_binds = 0
        """Tasks committed for binding since the cycle metrics last took the count."""
        self.binds: BindPool[TaskInfo] | None = None
        """Bind workers; None = binds are written by :meth:`flush`."""
        self.background: CoalescingWriter | None = None
        """Status and event writer; None = written by :meth:`flush`."""
        self.pool = SnapshotPool()
        """The copies the last snapshot handed out, renewed where marked dirty."""
        self.status = StatusRecorder(
            writer=writer,
            enqueue=self.enqueue_status,
            clock=clock,
            now_text=lambda: rfc3339(self.clock()),
            on_lost_podgroup=self._lost_podgroup,
        )

    # -- events from the cluster ----------------------------------------------------------
    def apply(self, event: str, kind: str, obj: Mapping[str, Any]) -> None:
        """Take one watch event (``ADDED``/``MODIFIED``/``DELETED``) for a raw object."""
        handler: Callable[[bool, Mapping[str, Any]], None]
        if kind in DRA_KINDS:
            handler = functools.partial(self._dra, kind)
        else:
            name = _HANDLERS.get(kind)
            if name is None:
                return
            handler = getattr(self, name)
        with self.lock:
            try:
                handler(event == "DELETED", obj)
            except ObjectError as exc:
                self._report_broken(kind, obj, str(exc))
            except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
                self._report_broken(kind, obj, f"cannot read the object: {exc!r}")

    def _report_broken(self, kind: str, obj: Mapping[str, Any], problem: str) -> None:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        meta = meta if isinstance(meta, Mapping) else {}
        key = f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}".replace(" /", " ")
        if kind == "PodGroup":
            uid = JobID(f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}")
            if uid not in self.podgroups:  # else its last readable version stands
                self.unreadable_groups[uid] = (f"{problem}; the PodGroup is ignored until it "
                                               "is fixed")
        if self.broken.get(key) == problem:
            return
        self.broken[key] = problem
        log.warning("object ignored", object=key, error=problem)
        ref = ObjectRef(
            kind=kind,
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            uid=str(meta.get("uid", "")),
        )
        self.enqueue_status(
            ("broken", key),
            lambda: self.writer.record_event(
                involved=ref,
                type="Warning",
                reason="FailedScheduling" if kind == "Pod" else "Invalid",
                message=problem,
            ),
        )

    def _report_notes(self, obj: Mapping[str, Any], notes: tuple[str, ...]) -> None:
        """A pod kept although part of it could not be read (or is ignored, as Volcano
        ignores it): one Warning event naming the pod and each field, once per change."""
        meta = obj.get("metadata") or {}
        key = f"Pod {meta.get('namespace') or 'default'}/{meta.get('name', '')} (read in part)"
        message = "; ".join(notes)
        if self.broken.get(key) == message:
            return
        self.broken[key] = message
        log.warning("pod read in part", object=key.removesuffix(" (read in part)"),
                    problems=message)
        ref = ObjectRef(kind="Pod", name=str(meta.get("name", "")),
                        namespace=str(meta.get("namespace") or "default"),
                        uid=str(meta.get("uid", "")))
        self.enqueue_status(
            ("broken", key),
            lambda: self.writer.record_event(
                involved=ref, type="Warning", reason="InvalidPodField", message=message),
        )

    def _lost_podgroup(self, key: str) -> None:
        """A PodGroup status write was lost: its job must be closed (and written) again."""
        with self.lock:
            self.pool.dirty_jobs.add(JobID(key))

    def _hypernode(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        self.hypernodes.apply(deleted, obj)
        self.broken.pop(f"HyperNode {(obj.get('metadata') or {}).get('name', '')}", None)

    def _node_shard(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        status = self.shards.apply(deleted, obj)
        self.broken.pop(f"NodeShard {(obj.get('metadata') or {}).get('name', '')}", None)
        write = getattr(self.writer, "update_node_shard_status", None)
        if status is not None and write is not None:
            name = self.shards.name
            self.enqueue_status(("NodeShard", name),
                                lambda: write(name=name, status=status))

    def _node(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        self.pool.mark_node(name)
        old = self.nodes.get(name)
        try:
            self._node_update(deleted, obj, name=name, old=old)
        finally:
            self.hypernodes.node_changed(old, self.nodes.get(name))

    def _node_update(
        self, deleted: bool, obj: Mapping[str, Any], *, name: str, old: NodeInfo | None
    ) -> None:
        if old is not None and old.others:
            # What a queue counts for a task on a device node reads the node's devices.
            self.pool.dirty_jobs.update(t.job for t in self.tasks_by_node.get(name, {}).values())
        if deleted:
            self.node_objects.pop(name, None)
            self.nodes.pop(name, None)
            self.unselected_nodes.discard(name)
            self._match_device(name)
            return
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            self.unselected_nodes.add(name)
            self._match_device(name)
            return
        self.unselected_nodes.discard(name)
        node = node_from_object(obj, ignored=self.ignored)
        if self.node_devices is not None:
            node.others = self.node_devices(node, self.device_objects.get(name))
        self.node_objects[name] = obj
        for task in self.tasks_by_node.get(name, {}).values():
            node.add_task(task)
        self.nodes[name] = node
        self._match_device(name)

    def _pod(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        if deleted:
            old = self._task_by_key(key)
            if old is not None:
                self._remove_task(old)
                self.implied.release(old.job, members=self.tasks_by_job.get(old.job),
                                     podgroups=self.podgroups, pool=self.pool)
            self.pods.pop(key, None)
            self.arrivals.pop(key, None)
            self.status.forget_pod(key)
            self.resync.forget(key)
            return
        spec = obj.get("spec") or {}
        ours = spec.get("schedulerName") in self.scheduler_names
        task = (
            task_from_pod(obj, ignored=self.ignored, memo=self.parsed_pods)
            if ours or spec.get("nodeName")
            else None
        )
        # Only a readable version replaces the cached one: a broken update keeps the last good.
        old = self._task_by_key(key)
        if (old is not None and old.status._value_ & _ALLOCATED and not spec.get("nodeName")
                and str(old.uid) == (meta.get("uid") or key)):
            # Placed here (Binding) but not yet bound there: an update from before the bind
            # (an annotation, a condition) must not make the pod Pending again, or the next
            # cycle would place it twice (Volcano's updatePod ignores it the same way).
            self.pods[key] = obj
            return
        if old is not None:
            self._remove_task(old)
        if task is None:
            self.pods.pop(key, None)
            self.arrivals.pop(key, None)
            return
        if not task.job and ours and self.implied.enabled:
            self.implied.adopt(task, obj, podgroups=self.podgroups, pool=self.pool)
        if isinstance(obj, dict) and (old is None or old.pod is not obj):
            # an object updated in place (the embedded cluster's) was interned when added
            self.strings.add(obj)
        self.pods[key] = obj
        self.broken.pop(f"Pod {key}", None)
        if task.notes:
            self._report_notes(obj, task.notes)
        else:
            self.broken.pop(f"Pod {key} (read in part)", None)
        if task.node_name:
            self.resync.forget(key)  # bound: a past bind failure no longer matters
            self.arrivals.pop(key, None)
        else:
            if key not in self.arrivals:
                self.arrivals[key] = next(self._arrival_numbers)
                self.arrived.set()
            if self.resync.waiting(key):
                return  # held back until its resync is due
        self.status.seen_pod(key, obj)
        self._add_task(task)

    def intern_deferred(self, count: int = 1000) -> bool:
        """Intern up to ``count`` pods whose strings were left for later
        (:mod:`scheduler.cache.intern`); False when none were waiting."""
        if not self.strings.waiting:  # the loop asks between cycles: no lock for nothing
            return False
        with self.lock:
            return self.strings.intern_later(count)

    def _task_by_key(self, key: str) -> TaskInfo | None:
        pod = self.pods.get(key)
        if pod is None:
            return None
        uid = (pod.get("metadata") or {}).get("uid") or key
        return self.tasks.get(TaskID(str(uid)))

    def _queue_of(self, task: TaskInfo) -> str:
        podgroup = self.podgroups.get(task.job)
        return podgroup.queue if podgroup is not None else ""

    def set_unready(self, uid: JobID, entry: tuple[str, int] | None) -> None:
        """Record (or with None drop) a job's unready count, keeping the sums by name."""
        old = self.unready.pop(uid, None)
        if old is not None:
            self._move_unready(old[0], -1, -old[1])
        if entry is not None:
            self.unready[uid] = entry
            self._move_unready(entry[0], +1, entry[1])

    def _move_unready(self, name: str, jobs: int, count: int) -> None:
        before = self.unready_by_name.get(name, 0)
        left = self._unready_jobs.get(name, 0) + jobs
        if left:
            self._unready_jobs[name] = left
            self.unready_by_name[name] = after = before + count
        else:
            self._unready_jobs.pop(name, None)
            self.unready_by_name.pop(name, None)
            after = 0
        self.unready_positive += (after > 0) - (before > 0)
        if self.unready_changed is not None:
            self.unready_changed.add(name)

    def _add_task(self, task: TaskInfo) -> None:
        if self.usage.active:
            self.usage.change(task, self._queue_of(task), +1)
        self.pool.mark_task(task.uid, task.node_name, task.job)
        self.tasks[task.uid] = task
        self.tasks_by_job.setdefault(task.job, {})[task.uid] = task
        if task.node_name and not task.status._value_ & _COMPLETED:
            self.tasks_by_node.setdefault(task.node_name, {})[task.uid] = task
            node = self.nodes.get(task.node_name)
            if node is not None:
                node.add_task(task)

    def _remove_task(self, task: TaskInfo) -> None:
        if self.usage.active:
            self.usage.change(task, self._queue_of(task), -1)
        self.pool.mark_task(task.uid, task.node_name, task.job)
        self.tasks.pop(task.uid, None)
        members = self.tasks_by_job.get(task.job)
        if members is not None:
            members.pop(task.uid, None)
            if not members:
                del self.tasks_by_job[task.job]
        if task.node_name:
            self.tasks_by_node.get(task.node_name, {}).pop(task.uid, None)
            node = self.nodes.get(task.node_name)
            if node is not None:
                node.remove_task(task)

    def _podgroup(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        if deleted:
            self._podgroup_deleted(obj)
            return
        podgroup = podgroup_from_object(obj, default_queue=self.default_queue,
                                        ignored=self.ignored)
        uid = JobID(f"{podgroup.namespace}/{podgroup.name}")
        old = self.podgroups.get(uid)
        self.pool.job_changes.podgroup(uid, deleted=False, known=old is not None)
        if old != podgroup:
            # The echo of a status this scheduler wrote changes nothing a job reads.
            self.pool.dirty_jobs.add(uid)
        old_queue = old.queue if old is not None else ""
        if old_queue != podgroup.queue and self.usage.active:  # its pods count elsewhere now
            self._move_usage(uid, old_queue, podgroup.queue)
        self.unreadable_groups.pop(uid, None)
        self.deleted_groups.pop(uid, None)
        self.broken.pop(f"PodGroup {uid}", None)
        self.implied.arrived(uid)
        if old is None and uid in self.tasks_by_job:  # its pods came first and wait for it
            self.arrived.set()
        warn_unacted_topology(uid, old, podgroup)
        self.podgroups[uid] = podgroup
        self.status.seen_podgroup(uid, obj.get("status") or {})

    def _podgroup_deleted(self, obj: Mapping[str, Any]) -> None:
        """Reads only the name: a PodGroup that could never be read can be deleted too."""
        meta = obj.get("metadata") or {}
        uid = JobID(f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}")
        old = self.podgroups.pop(uid, None)
        self.pool.job_changes.podgroup(uid, deleted=True, known=old is not None)
        self.pool.dirty_jobs.add(uid)
        if old is not None and old.queue and self.usage.active:
            self._move_usage(uid, old.queue, "")
        self.set_unready(uid, None)
        self.unreadable_groups.pop(uid, None)
        self.broken.pop(f"PodGroup {uid}", None)
        if self.tasks_by_job.get(uid):
            self.deleted_groups[uid] = (
                f"PodGroup {uid} (annotation {GROUP_NAME_ANNOTATION}) was deleted; "
                "the pod waits until a PodGroup of that name exists")
            log.warning("PodGroup deleted while it still has pods", podgroup=uid,
                        pods=len(self.tasks_by_job[uid]))

    def _move_usage(self, uid: JobID, old_queue: str, new_queue: str) -> None:
        for task in self.tasks_by_job.get(uid, {}).values():
            self.usage.change(task, old_queue, -1)
            self.usage.change(task, new_queue, +1)

    def _queue(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        queue = queue_from_object(obj, ignored=self.ignored)
        if deleted:
            # Its jobs leave the sessions; a settled job skips the check for its queue.
            self.pool.unsettle_all()
            self.queues.pop(queue.uid, None)
            return
        self.queues[queue.uid] = queue
        self.status.seen_queue(queue.name, queue.allocated_status)

    def _priority_class(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        self.pool.unsettle_all()
        if deleted:
            self.priority_classes.pop(name, None)
            return
        value = obj.get("value", 0)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ObjectError(
                kind="PriorityClass",
                name=name,
                field="value",
                problem=f"must be an integer, got {value!r}",
            )
        self.priority_classes[name] = (value, bool(obj.get("globalDefault")))

    def _namespace(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if deleted:
            self.namespace_labels.pop(name, None)
            return
        labels = meta.get("labels") or {}
        if not isinstance(labels, Mapping):
            raise ObjectError(kind="Namespace", name=name, field="metadata.labels",
                              problem="must be a map of strings")
        self.namespace_labels[name] = {str(k): str(v) for k, v in labels.items()}

    def _device(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        self.pool.mark_node(name)  # a Device object is named after its node
        if deleted:
            self.device_objects.pop(name, None)
        else:
            self.device_objects[name] = obj
        self._match_device(name)
        if name in self.node_objects:  # the node's device ledgers read this object
            self._node(False, self.node_objects[name])

    def _dra(self, kind: str, deleted: bool, obj: Mapping[str, Any]) -> None:
        self.dra.apply(kind, deleted, obj)
        meta = obj.get("metadata") or {}
        self.broken.pop(f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}"
                        .replace(" /", " "), None)

    def _match_device(self, name: str) -> None:
        if name in self.device_objects and name not in self.node_objects \
                and name not in self.unselected_nodes:
            self.unmatched_devices.add(name)
        else:
            self.unmatched_devices.discard(name)

    # -- snapshot -------------------------------------------------------------------------
    def job_priority(self, podgroup: PodGroup) -> int:
        if podgroup.priority_class_name in self.priority_classes:
            return self.priority_classes[podgroup.priority_class_name][0]
        for value, global_default in self.priority_classes.values():
            if global_default:
                return value
        return 0

    def snapshot(self) -> Snapshot:
        """A private copy of nodes, jobs (with a PodGroup and an existing queue) and queues.

        Incremental: only the nodes and tasks changed since the last snapshot (by the cluster
        or by the last session) are copied again, and the last session's node table is
        handed on with the names of the nodes whose rows changed.
        """
        with self.lock:
            self.nominated = {}
            last = self.pool.last
            refreshed = self.pool.refresh(self.tasks, self.nodes)
            snapshot = self._assemble(refreshed.tasks, refreshed.nodes, refreshed=refreshed,
                                      previous=None if last is None else last.jobs)
            snapshot.settled = self.pool.steady
            for uid in self.orphans:  # out of every session: no count for them
                self.set_unready(uid, None)
            self.pool.sums.advance(self.pool.steady, entered=refreshed.entered,
                                   left=refreshed.left, reset=refreshed.reset)
            snapshot.settled_sums = self.pool.sums
            self.pool.jobs = snapshot.jobs
            if last is not None and last.table is not None:
                snapshot.previous_table = last.table
                snapshot.renewed_nodes = refreshed.renewed_nodes
            self.pool.last = snapshot
            return snapshot

    def full_snapshot(self) -> Snapshot:
        """A snapshot copied wholly from the cache, sharing nothing with earlier ones."""
        with self.lock:
            clones = {uid: task.clone() for uid, task in self.tasks.items()}
            return self._assemble(clones, [node.clone(clones) for node in self.nodes.values()])

    def _assemble(
        self,
        clones: Mapping[TaskID, TaskInfo],
        nodes: list[NodeInfo],
        *,
        refreshed: PoolRefresh | None = None,
        previous: dict[JobID, JobInfo] | None = None,
    ) -> Snapshot:
        """The snapshot of ``nodes`` and the jobs of :func:`assemble_jobs` (``previous``: the
        last snapshot's jobs, which an incremental snapshot starts from)."""
        jobs, active = assemble_jobs(self, clones, refreshed=refreshed, previous=previous)
        queues = {uid: _clone_queue(queue) for uid, queue in self.queues.items()}
        return Snapshot(nodes=nodes, jobs=jobs, queues=queues, device_dims=self.device_dims,
                        namespace_labels=dict(self.namespace_labels), active=active,
                        hypernodes=self.hypernodes.tree(self.nodes),
                        shard=self.shards.scope(),
                        dra=self.dra.view(session=refreshed is not None))

    def update_podgroup(
        self, job: JobInfo, event: tuple[str, str, str] | None, *, unready: int | None = None
    ) -> None:
        with self.lock:
            self.set_unready(job.uid, None if unready is None else (job.name, unready))
            cached = self.podgroups.get(job.uid)
            if cached is not None:
                cached.phase = job.podgroup.phase
                cached.conditions = [dict(c) for c in job.podgroup.conditions]
                cached.running, cached.succeeded = job.podgroup.running, job.podgroup.succeeded
                cached.failed = job.podgroup.failed
            if job.uid not in self.implied:  # nothing to write to until the object exists
                self.status.update_podgroup(job, event)

    def update_task_condition(
        self, task: TaskInfo, *, reason: str, message: str, nominated_node: str = ""
    ) -> None:
        with self.lock:
            if nominated_node:
                self.nominated.setdefault(nominated_node, []).append(
                    ObjectRef(kind="Pod", name=task.name, namespace=task.namespace,
                              uid=str(task.uid)))
            self.status.update_task_condition(
                task, reason=reason, message=message, nominated_node=nominated_node
            )

    def update_queue_allocated(self, queue: QueueInfo, allocated: Resource) -> None:
        with self.lock:
            self.status.update_queue_allocated(queue, allocated)

    def report_orphans(self) -> None:
        """Tell what the last session left out why (after each cycle): the pending pods of
        jobs whose queue does not exist and of PodGroups unreadable or deleted get a
        ``PodScheduled=False`` condition and a ``FailedScheduling`` event naming the object;
        a Device object whose node does not exist is reported once."""
        with self.lock:
            for uid in self.orphans:
                podgroup = self.podgroups.get(uid)
                if podgroup is None:
                    continue
                self._explain_pods(uid, f"queue {podgroup.queue} of PodGroup {uid} does not "
                                        "exist; create it or change spec.queue")
            for uid, message in self.unreadable_groups.items():
                self._explain_pods(uid, message)
            for uid, message in list(self.deleted_groups.items()):
                if not self.tasks_by_job.get(uid):
                    del self.deleted_groups[uid]  # no pod left to tell
                    continue
                self._explain_pods(uid, message)
            if self.node_devices is not None:
                self._report_left_out("Device", {
                    name: f"Device {name}: metadata.name names node {name}, which does not "
                          "exist; the object is ignored"
                    for name in self.unmatched_devices
                    if f"Node {name}" not in self.broken},  # reported as unreadable already
                    reason="NodeNotFound")

    def _explain_pods(self, uid: JobID, message: str) -> None:
        for task in list(self.tasks_by_job.get(uid, {}).values()):
            if task.status is TaskStatus.PENDING:
                self.status.update_task_condition(task, reason="Unschedulable", message=message)

    def report_left_out(self, kind: str, problems: Mapping[str, str]) -> None:
        """:class:`~scheduler.framework.queuetree.LeftOutReporter`: ``problems`` are every
        object of ``kind`` a plugin leaves out now (name → why); each new or changed one is
        logged and gets a Warning ``Invalid`` event once."""
        with self.lock:
            self._report_left_out(kind, problems, reason="Invalid")

    def _report_left_out(self, kind: str, problems: Mapping[str, str], *, reason: str) -> None:
        known = self.left_out.setdefault(kind, {})
        changed = {name: problem for name, problem in problems.items()
                   if known.get(name) != problem}
        if changed:
            log.warning("left out of scheduling", kind=kind, objects=changed)
        for name, problem in changed.items():
            known[name] = problem
            namespace, _, short = name.rpartition("/")
            ref = ObjectRef(kind=kind, name=short, namespace=namespace,
                            api_version=_API_VERSIONS.get(kind, "v1"))
            self.enqueue_status(("left-out", f"{kind} {name}"), functools.partial(
                self.writer.record_event, involved=ref, type="Warning", reason=reason,
                message=problem))
        fixed = [name for name in known if name not in problems]
        for name in fixed:
            del known[name]
        if fixed:
            log.info("no longer left out of scheduling", kind=kind, objects=sorted(fixed))

    def dump(self) -> dict[str, Any]:
        """A JSON-able picture of the cache (for SIGUSR1)."""
        with self.lock:
            return {
                "nodes": {
                    name: {
                        "idle": node.idle.to_quantities(include_pods=True),
                        "used": node.used.to_quantities(include_pods=True),
                        "tasks": sorted(t.key for t in node.tasks.values()),
                    }
                    for name, node in self.nodes.items()
                },
                "tasks": {
                    t.key: {"status": str(t.status), "node": t.node_name, "job": t.job}
                    for t in self.tasks.values()
                },
                "podgroups": {uid: pg.status_dict() for uid, pg in self.podgroups.items()},
                "queues": sorted(self.queues),
                "broken": dict(self.broken),
                "left_out": {kind: dict(names) for kind, names in self.left_out.items()},
                "unreadable_podgroups": dict(self.unreadable_groups),
                "deleted_podgroups": dict(self.deleted_groups),
                "resyncing": sorted(k for k in self.pods if self.resync.waiting(k)),
                "devices": sorted(self.device_objects),
            }


def _clone_queue(queue: QueueInfo) -> QueueInfo:
    return QueueInfo(
        uid=queue.uid,
        name=queue.name,
        weight=queue.weight,
        capability=queue.capability,
        guarantee=queue.guarantee,
        deserved=queue.deserved,
        reclaimable=queue.reclaimable,
        state=queue.state,
        priority=queue.priority,
        parent=queue.parent,
        creation=queue.creation,
        annotations=queue.annotations,
        allocated_status=queue.allocated_status,
    )
