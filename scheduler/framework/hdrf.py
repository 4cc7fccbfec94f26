"""Hierarchical DRF (HDRF) for the ``drf`` plugin with ``enableHierarchy: true``.

Volcano's ``plugins/drf/drf.go`` (``buildHierarchy``, ``updateHierarchicalShare``,
``compareQueues``, the hierarchical ``reclaimFn``). Queues name their place in a tree with the
annotations ``volcano.sh/hierarchy: "root/eng/prod"`` and ``volcano.sh/hierarchy-weights:
"1/2/8"``; jobs hang below their queue's path as leaves. A leaf is *saturated* when it holds
all it asked for on some resource, or holds and asks for a resource nobody can get more of (a
leaf that holds nothing never is). An inner
node's allocation sums its non-empty children, each non-saturated child scaled down to the
smallest dominant share among them, and it is saturated when all its children are. Queues
compare top-down along their paths: non-saturated before saturated, then lower
``share / weight`` first. A reclaimer may take a task whose removal (with the reclaimer's
request added) leaves the reclaimer's queue comparing lower than the victim's.

The tree is rebuilt from the session's allocations (tasks that hold or reserve resources)
whenever they changed since the last question, so it always matches what the plain ``drf``
shares see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import structlog

from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, TaskStatus, Vote
from scheduler.framework.session import Session

__all__ = ["HIERARCHY_ANNOTATION", "WEIGHTS_ANNOTATION", "Hdrf"]

log = structlog.get_logger("lahar.drf")

HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"

ShareFn = Callable[[Resource, Resource], float]


@dataclass(slots=True)
class _Node:
    name: str
    weight: float = 1.0
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    share: float = 0.0
    saturated: bool = False
    children: dict[str, _Node] | None = None


class Hdrf:
    def __init__(self, session: Session, share: ShareFn) -> None:
        self.session = session
        self.share = share
        self._version = -1
        self._root: _Node | None = None
        self._warned: set[str] = set()

    # -- answers --------------------------------------------------------------------------
    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        result = self._compare(self._current(), left, right)
        return -1 if result < 0 else (1 if result > 0 else 0)

    def reclaimable(
        self, reclaimer: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        session = self.session
        reclaimer_job = session.jobs.get(reclaimer.job)
        if reclaimer_job is None or reclaimer_job.queue not in session.queues:
            return [], Vote.PERMIT
        reclaimer_queue = session.queues[reclaimer_job.queue]
        base = self._allocations()
        base[reclaimer_job.uid] = base[reclaimer_job.uid].clone().add(reclaimer.resreq)
        victims = []
        for task in candidates:
            job = session.jobs.get(task.job)
            if job is None or job.queue not in session.queues:
                continue
            allocations = dict(base)
            allocations[job.uid] = allocations[job.uid].clone().sub(task.resreq)
            root = self._build(allocations)
            if self._compare(root, reclaimer_queue, session.queues[job.queue]) < 0:
                victims.append(task)
        return victims, Vote.PERMIT

    # -- the tree -------------------------------------------------------------------------
    def _current(self) -> _Node:
        if self._root is None or self._version != self.session.allocation_version:
            self._root = self._build(self._allocations())
            self._version = self.session.allocation_version
        return self._root

    def _allocations(self) -> dict[JobID, Resource]:
        """What each job holds or has reserved in this session (drf's ``allocated``)."""
        out: dict[JobID, Resource] = {}
        for uid, job in self.session.jobs.items():
            allocated = job.allocated.clone()  # kept current for the allocated statuses
            for task in job.task_status_index.get(TaskStatus.PIPELINED, {}).values():
                allocated.add(task.resreq)
            out[uid] = allocated
        return out

    def _path(self, queue: QueueInfo) -> tuple[list[str], list[float]]:
        paths = (queue.annotations.get(HIERARCHY_ANNOTATION) or "").split("/")
        raw = (queue.annotations.get(WEIGHTS_ANNOTATION) or "").split("/")
        weights = []
        for i in range(len(paths)):
            try:
                weight = float(raw[i])
            except (IndexError, ValueError):
                weight = 1.0
                if i and queue.name not in self._warned:
                    self._warned.add(queue.name)
                    log.warning("bad queue annotation, weight 1 used", queue=queue.name,
                                annotation=WEIGHTS_ANNOTATION, value=raw, level=i)
            weights.append(max(weight, 1.0))
        return paths, weights

    def _build(self, allocations: Mapping[JobID, Resource]) -> _Node:
        session = self.session
        total = session.total_resource
        root = _Node("root", children={})
        total_allocated = Resource()
        for uid, job in session.jobs.items():
            queue = session.queues.get(job.queue)
            if queue is None:
                continue
            node = root
            paths, weights = self._path(queue)
            for name, weight in zip(paths[1:], weights[1:], strict=True):
                assert node.children is not None
                child = node.children.get(name)
                if child is None or child.children is None:
                    child = node.children[name] = _Node(name, weight, children={})
                node = child
            allocated = allocations[uid]
            total_allocated.add(allocated)
            assert node.children is not None
            node.children[uid] = _Node(uid, allocated=allocated, request=job.total_request,
                                       share=self.share(allocated, total))
        demanding = {n for n in total.resource_names()
                     if total_allocated.get(n) < total.get(n)}
        self._update(root, demanding)
        return root

    def _update(self, node: _Node, demanding: set[str]) -> None:
        if node.children is None:
            node.saturated = _saturated(node.allocated, node.request, demanding)
            return
        total = self.session.total_resource
        smallest = 1.0
        for child in node.children.values():
            self._update(child, demanding)
            if child.share != 0 and not child.saturated:
                smallest = min(smallest, self.share(child.allocated, total))
        allocated = Resource()
        for child in node.children.values():
            if child.share == 0:
                continue
            if child.saturated:
                allocated.add(child.allocated)
            else:
                allocated.add(child.allocated.clone().multi(smallest / child.share))
        node.allocated = allocated
        node.share = self.share(allocated, total)
        node.saturated = all(child.saturated for child in node.children.values())

    def _compare(self, root: _Node, left: QueueInfo, right: QueueInfo) -> float:
        left_path, _ = self._path(left)
        right_path, _ = self._path(right)
        left_node: _Node | None = root
        right_node: _Node | None = root
        depth = min(len(left_path), len(right_path))
        for i in range(depth):
            if left_node is None or right_node is None:
                return 0.0
            if not left_node.saturated and right_node.saturated:
                return -1.0
            if left_node.saturated and not right_node.saturated:
                return 1.0
            left_value = left_node.share / left_node.weight
            right_value = right_node.share / right_node.weight
            if left_value != right_value:
                return left_value - right_value
            if i < depth - 1:
                left_node = (left_node.children or {}).get(left_path[i + 1])
                right_node = (right_node.children or {}).get(right_path[i + 1])
        return 0.0


def _saturated(allocated: Resource, request: Resource, demanding: set[str]) -> bool:
    """Volcano's ``resourceSaturated`` (``drf.go`` 84-97): only the dimensions the job holds
    (``ResourceNames``, at least the tolerance) are looked at, so a job that holds nothing is
    never saturated."""
    for name in allocated.resource_names():
        have, want = allocated.get(name), request.get(name)
        if have != 0 and want != 0 and have >= want:
            return True
        if name not in demanding and want != 0:
            return True
    return False
