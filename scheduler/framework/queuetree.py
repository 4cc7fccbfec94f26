"""Queue figures for the capacity plugin, flat or as a hierarchy of ``spec.parent`` links.

Hierarchical queues (Volcano's capacity plugin with ``enableHierarchy``) form a tree: a queue
without ``spec.parent`` hangs under ``root``. Volcano's scheduler creates the ``root`` queue at
start; where no such Queue object exists the tree has an implicit ``root`` with no bounds, which
is what Volcano's freshly created root is. A queue whose ``spec.parent`` names a queue that does
not exist, the queues of a cycle of parents and every queue below them have no place in the
tree: :func:`build_usable_tree` leaves them out, with the reason naming the queue and the field,
and links the others as if the left-out queues did not exist (Volcano gives up on the whole
tree instead; one bad Queue should not stop every other queue).

:class:`QueueAttr` holds one queue's figures for a session — deserved, guarantee, capability,
real capability, allocated, inqueue, elastic, share — built flat (:func:`build_flat_attrs`) or
down the tree (:func:`build_tree_attrs`) as Volcano's ``plugins/capacity/capacity.go`` builds
them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import structlog

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import CPU, MEMORY, MIN_RESOURCE, UNLIMITED, Default, Resource
from scheduler.api.resource_dims import resource_names
from scheduler.api.types import ALLOCATED_STATUS, QueueID, TaskStatus

__all__ = [
    "ROOT_QUEUE",
    "LeftOutReporter",
    "QueueAttr",
    "QueueTree",
    "QueueTreeError",
    "build_flat_attrs",
    "build_queue_tree",
    "build_tree_attrs",
    "build_usable_tree",
]

log = structlog.get_logger("lahar.queuetree")

ROOT_QUEUE = QueueID("root")


class QueueTreeError(ValueError):
    """A queue whose ``spec.parent`` cannot be placed in the tree."""


@runtime_checkable
class LeftOutReporter(Protocol):
    """A session sink (the scheduler cache) that tells users, once, which objects scheduling
    leaves out and why."""

    def report_left_out(self, kind: str, problems: Mapping[str, str]) -> None:
        """``problems``: every object of ``kind`` left out now, name → why. A new or changed
        entry is logged and recorded as a Warning event on the object; an entry gone since
        the last report is logged as fixed."""


@dataclass(slots=True)
class QueueTree:
    ancestors: dict[QueueID, tuple[QueueID, ...]] = field(default_factory=dict)
    """Every usable queue's ancestors, ``root`` first and its parent last (``root``: none)."""
    children: dict[QueueID, list[QueueID]] = field(default_factory=dict)
    left_out: dict[QueueID, str] = field(default_factory=dict)
    """Queues that have no place in the tree → why, naming the queue and the field: a
    ``spec.parent`` naming a queue that does not exist, a cycle of parents, or an ancestor
    left out for one of these. They are in neither ``ancestors`` nor ``children``."""

    def is_leaf(self, queue: QueueID) -> bool:
        return not self.children.get(queue)

    def parent(self, queue: QueueID) -> QueueID | None:
        chain = self.ancestors.get(queue, ())
        return chain[-1] if chain else None

    def top_down(self) -> list[QueueID]:
        """Queues in an order where every parent comes before its children."""
        return sorted(self.ancestors, key=lambda queue: (len(self.ancestors[queue]), queue))


def build_queue_tree(queues: Mapping[QueueID, QueueInfo]) -> QueueTree:
    """Link ``queues`` by ``spec.parent``; raises :class:`QueueTreeError` naming the first
    queue (by name) that has no place in the tree (see :func:`build_usable_tree`)."""
    tree = build_usable_tree(queues)
    if tree.left_out:
        raise QueueTreeError(tree.left_out[min(tree.left_out)])
    return tree


def build_usable_tree(queues: Mapping[QueueID, QueueInfo]) -> QueueTree:
    """Link ``queues`` by ``spec.parent``, leaving out (``QueueTree.left_out``) every queue
    whose chain of parents does not reach ``root``: the queues of a cycle, a queue whose
    parent does not exist, and every queue below those. The other queues form the same tree
    they would form if the left-out queues did not exist."""
    parents: dict[QueueID, QueueID] = {}
    for uid, queue in queues.items():
        if uid != ROOT_QUEUE:
            parents[uid] = QueueID(queue.parent or ROOT_QUEUE)
    tree = QueueTree()
    tree.ancestors[ROOT_QUEUE] = ()
    tree.children[ROOT_QUEUE] = []
    causes: dict[QueueID, tuple[str, str]] = {}
    for uid in sorted(parents):
        _place(uid, parents=parents, queues=queues, tree=tree, causes=causes)
    for uid in sorted(parents):
        if uid in tree.ancestors:
            tree.children.setdefault(parents[uid], []).append(uid)
    return tree


def _place(uid: QueueID, *, parents: Mapping[QueueID, QueueID],
           queues: Mapping[QueueID, QueueInfo], tree: QueueTree,
           causes: dict[QueueID, tuple[str, str]]) -> None:
    """Settle ``uid`` and every queue on its way up to a settled one: each gets its ancestors
    or a reason in ``tree.left_out`` (``causes``: the queue where its chain breaks, and why)."""
    path: list[QueueID] = []
    on_path: dict[QueueID, int] = {}
    current = uid
    while current not in tree.ancestors and current not in tree.left_out:
        on_path[current] = len(path)
        path.append(current)
        parent = parents[current]
        if parent in on_path:  # back on the walk: path[start:] is a cycle
            start = on_path[parent]
            cycle = path[start:]
            for i, member in enumerate(cycle):
                loop = " -> ".join([*cycle[i:], *cycle[:i], member])
                causes[member] = (member, f"spec.parent forms a cycle ({loop})")
                tree.left_out[member] = f"Queue {queues[member].name}: {causes[member][1]}"
            del path[start:]
            break
        if parent != ROOT_QUEUE and parent not in queues:
            causes[current] = (current, f"spec.parent names queue {parent!r}, "
                                        "which does not exist")
            tree.left_out[current] = f"Queue {queues[current].name}: {causes[current][1]}"
            path.pop()
            break
        current = parent
    for member in reversed(path):  # top-down from where the walk stopped
        parent = parents[member]
        if parent in causes:
            broken, problem = causes[member] = causes[parent]
            tree.left_out[member] = (f"Queue {queues[member].name}: spec.parent leads to "
                                     f"queue {broken}, whose {problem}")
        else:
            tree.ancestors[member] = (*tree.ancestors[parent], parent)
            tree.children.setdefault(member, [])


# -- capacity figures per queue -----------------------------------------------------------------

_UNBOUNDED_SCALAR = float(2**63 - 1)


@dataclass(slots=True)
class QueueAttr:
    """One queue's figures for a session; ``allocated`` follows every in-session change."""

    uid: QueueID
    name: str
    deserved: Resource
    guarantee: Resource
    capability: Resource
    real_capability: Resource = field(default_factory=Resource)
    """What the queue may hold at most: capability capped by what others' guarantees leave."""
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    """minResources admitted jobs still hold in reserve."""
    elastic: Resource = field(default_factory=Resource)
    """What jobs hold beyond their minResources."""
    ancestors: tuple[QueueID, ...] = ()
    """``root`` first, the parent last; empty without hierarchy."""
    share: float = 0.0

    def update_share(self) -> None:
        if self.deserved.is_empty():
            self.share = 1.0  # best effort: after every queue below its deserved share
            return
        share = 0.0
        for name in resource_names(self.deserved):
            share = max(share, self.allocated.get(name) / self.deserved.get(name))
        self.share = share


def _new_attr(uid: QueueID, queue: QueueInfo | None) -> QueueAttr:
    def copy(resource: Resource | None) -> Resource:
        return resource.clone() if resource is not None else Resource()

    return QueueAttr(
        uid=uid,
        name=queue.name if queue is not None else uid,
        deserved=copy(queue.deserved if queue else None),
        guarantee=copy(queue.guarantee if queue else None),
        capability=copy(queue.capability if queue else None),
    )


@dataclass(slots=True)
class _JobUsage:
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)

    def add_to(self, attr: QueueAttr) -> None:
        attr.allocated.add(self.allocated)
        attr.request.add(self.request)
        attr.inqueue.add(self.inqueue)
        attr.elastic.add(self.elastic)


def _usage_of(job: JobInfo) -> _JobUsage:
    usage = _JobUsage()
    for task in job.tasks.values():
        if task.status & ALLOCATED_STATUS:
            usage.allocated.add(task.resreq)
            usage.request.add(task.resreq)
        elif task.status is TaskStatus.PENDING:
            usage.request.add(task.resreq)
    # An admitted job holds the part of its minResources not yet allocated; a running one
    # only while its gang is placed (a finished driver must not re-reserve its executors).
    usage.inqueue = job.inqueue_demand() or Resource()
    usage.elastic = job.elastic_resources()
    return usage


def build_flat_attrs(queues: Mapping[QueueID, QueueInfo], jobs: Iterable[JobInfo],
                     total: Resource) -> dict[QueueID, QueueAttr]:
    """Figures for every queue that has a job, without hierarchy (Volcano's
    ``buildQueueAttrs``): deserved is capped by the real capability and raised to the
    guarantee."""
    attrs: dict[QueueID, QueueAttr] = {}
    guarantees = Resource()
    for candidate in queues.values():
        if candidate.guarantee is not None:
            guarantees.add(candidate.guarantee)
    for job in jobs:
        attr = attrs.get(job.queue)
        if attr is None:
            queue = queues.get(job.queue)
            if queue is None:
                continue
            attr = attrs[job.queue] = _new_attr(job.queue, queue)
            limit = queue.capability_limit()
            if limit is not None:
                attr.capability = limit
            attr.real_capability = queue.real_capability(total=total,
                                                         total_guarantee=guarantees)
        _usage_of(job).add_to(attr)
    for attr in attrs.values():
        attr.deserved.min_dimension(attr.real_capability, Default.INFINITY)
        attr.deserved.set_max(attr.guarantee)
        attr.update_share()
    return attrs


def build_tree_attrs(queues: Mapping[QueueID, QueueInfo], jobs: Iterable[JobInfo],
                     total: Resource) -> tuple[QueueTree, dict[QueueID, QueueAttr]]:
    """Figures for every queue of the hierarchy (Volcano's ``buildHierarchicalQueueAttrs``);
    a job's usage counts in its queue and every ancestor. Queues left out of the tree
    (``QueueTree.left_out``) get no figures and their jobs count nowhere. Raises
    :class:`QueueTreeError` for a job in a queue with children."""
    tree = build_usable_tree(queues)
    attrs: dict[QueueID, QueueAttr] = {}
    for uid, ancestors in tree.ancestors.items():
        attrs[uid] = _new_attr(uid, queues.get(uid))
        attrs[uid].ancestors = ancestors
    for job in jobs:
        leaf = attrs.get(job.queue)
        if leaf is None:
            continue
        if not tree.is_leaf(job.queue):
            raise QueueTreeError(f"Queue {leaf.name}: holds PodGroup {job.uid} but has child "
                                 "queues; only leaf queues take jobs")
        usage = _usage_of(job)
        for uid in (job.queue, *leaf.ancestors):
            usage.add_to(attrs[uid])
    root = attrs[ROOT_QUEUE]
    if root.capability.is_empty():
        # Jobs may ask for more than the cluster has now; only queues users make bound them.
        root.capability = Resource(UNLIMITED, UNLIMITED,
                                   {name: _UNBOUNDED_SCALAR for name in total.scalars})
    root.real_capability = root.capability.clone()
    for uid in tree.top_down():
        _settle_children(attrs[uid], [attrs[child] for child in tree.children.get(uid, ())])
    for attr in attrs.values():
        attr.update_share()
    return tree, attrs


def _settle_children(parent: QueueAttr, children: list[QueueAttr]) -> None:
    """Children inherit unset capability and get their real capability from the parent's;
    sums of deserved or guarantee above the parent's are reported, not refused."""
    guarantees, deserved = Resource(), Resource()
    for child in children:
        child.deserved.set_max(child.guarantee)
        deserved.add(child.deserved)
        guarantees.add(child.guarantee)
        if child.capability.milli_cpu <= 0:
            child.capability.milli_cpu = parent.capability.milli_cpu
        if child.capability.memory <= 0:
            child.capability.memory = parent.capability.memory
        for name, value in parent.capability.scalars.items():
            child.capability.scalars.setdefault(name, value)
        above = _greater_dims(child.capability, parent.capability)
        if above:
            log.warning("child queue capability exceeds its parent's; the parent bounds it",
                        queue=child.name, parent=parent.name, resources=above)
    if parent.uid == ROOT_QUEUE:
        parent.guarantee, parent.deserved = guarantees, deserved
    for child in children:
        real = parent.real_capability.exceeded_part(guarantees).add(child.guarantee)
        child.real_capability = real.min_dimension(child.capability, Default.INFINITY)
    if _less_partly(parent.deserved, deserved):
        log.warning("child queues deserve more than their parent", parent=parent.name,
                    children=str(deserved), parent_deserved=str(parent.deserved))
    if _less_partly(parent.guarantee, guarantees):
        log.warning("child queues are guaranteed more than their parent", parent=parent.name,
                    children=str(guarantees), parent_guarantee=str(parent.guarantee))


def _less_partly(left: Resource, right: Resource) -> bool:
    """Some dimension of ``left`` below ``right`` (missing scalars are 0)."""
    names = set(left.names()) | set(right.names())
    return any(left.get(name) < right.get(name) for name in names)


def _greater_dims(child: Resource, parent: Resource) -> list[str]:
    """Dimensions of ``child`` above ``parent`` (scalars ``parent`` lacks are unbounded)."""
    out = [n for n in (CPU, MEMORY) if child.get(n) - parent.get(n) >= MIN_RESOURCE]
    out += [n for n, v in sorted(child.scalars.items())
            if n in parent.scalars and v - parent.scalars[n] >= MIN_RESOURCE]
    return out
