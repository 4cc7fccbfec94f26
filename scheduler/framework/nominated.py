"""The node a preemption nominated for a pod, when it can take the pod now.

Preempt and reclaim evict victims on a node for a preemptor and write that node to the pod's
``status.nominatedNodeName``. Once the victims are gone it is likely the only node that fits,
so allocate tries it before the general node search, as Volcano's ``allocateResourcesForTasks``
does. The resource check reads one row of the node table and the predicates are the session's
vector masks, so nothing loops over the nodes in Python.
"""

from __future__ import annotations

from scheduler.api.node import NodeInfo
from scheduler.api.resource import MIN_RESOURCE
from scheduler.api.task import TaskInfo
from scheduler.framework.session import Session

__all__ = ["nominated_node"]


def nominated_node(session: Session, task: TaskInfo) -> tuple[NodeInfo, bool] | None:
    """The node a preemption nominated for ``task``, if it can take the task now.

    A previous cycle's preemption evicted victims there for this pod and wrote the node to
    its ``status.nominatedNodeName``; it is likely the only node that fits, so it is tried
    before the general search (Volcano's ``allocateResourcesForTasks``): it must hold the
    request in future idle and pass every predicate. Returns (node, fits current idle).
    """
    node = session.nodes.get(task.nominated_node) if task.nominated_node else None
    if node is None:
        return None
    table = session.table
    cols, values, _ = table.request_dims(task.init_resreq)
    row = node.index
    if (cols < 0).any() or (values - table.future_idle[row, cols] >= MIN_RESOURCE).any():
        return None
    if session.pre_predicate(task) is not None \
            or not session.predicate_mask(task, rows=slice(row, row + 1))[0]:
        return None
    if session.wants_exact(task) and session.exact_check(task, node) is not None:
        return None
    fits_idle = not (values - table.idle[row, cols] >= MIN_RESOURCE).any()
    return node, bool(fits_idle)
