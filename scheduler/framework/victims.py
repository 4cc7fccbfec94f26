"""How the session combines the eviction hooks, the order victims leave in, and which
predicate failures eviction can cure.

Preempt and reclaim ask the plugins which of a node's candidate tasks may be evicted
(``Preemptable`` / ``Reclaimable``), and evict them lowest-value first. The combination rule is
Volcano's (``Session.Preemptable``/``Reclaimable`` in ``framework/session_plugins.go``): tiers in
order; inside a tier, plugins that abstain are skipped and the answers of the others are
intersected; a plugin answering with no victims ends the tier with none; the first tier that
ends with victims decides, otherwise the next tier is asked.

One deliberate difference: in Volcano an intersection that comes out empty is stored as a nil
list, which the next plugin of the same tier then mistakes for "no answer yet" and overwrites
with its own, wider list — so a victim one plugin refused can be evicted anyway. Here an empty
intersection ends the tier exactly like an empty answer (``docs/preemption.md``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.api.task import TaskInfo
from scheduler.api.types import Vote
from scheduler.framework import hooks as h

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = [
    "CURABLE_BY_EVICTION",
    "agreed_victims",
    "combine_evictable",
    "preempt_mask",
    "victim_order",
    "victim_tasks",
]

Answer = tuple[list[TaskInfo], Vote]

CURABLE_BY_EVICTION = frozenset({
    "node(s) pod number exceeded",
    "node(s) didn't have free ports for the requested pod ports",
    "node(s) didn't match pod anti-affinity rules",
    "node(s) didn't satisfy existing pods anti-affinity rules",
    "node(s) didn't match pod topology spread constraints",
})
"""Predicate reasons whose status is Unschedulable, not UnschedulableAndUnresolvable, in
kube-scheduler and Volcano: removing pods from the node can make it pass."""


def combine_evictable(
    session: Session,
    protocol: Any,
    method: str,
    evictor: TaskInfo,
    candidates: list[TaskInfo],
) -> list[TaskInfo]:
    """The victims the tiers of ``protocol`` (Preemptable or Reclaimable) agree on."""
    return agreed_victims(
        [[functools.partial(getattr(plugin, method), evictor, candidates) for plugin in tier]
         for tier in session.hooks(protocol)])


def agreed_victims(tiers: Iterable[Iterable[Callable[[], Answer]]]) -> list[TaskInfo]:
    """The combination rule above, over each tier's plugins' answers (asked lazily, in order:
    a tier that ends early asks no further plugin of it)."""
    for tier in tiers:
        victims: list[TaskInfo] | None = None
        for ask in tier:
            answer, vote = ask()
            if vote == Vote.ABSTAIN:
                continue
            if not answer:
                victims = None
                break
            if victims is None:
                victims = list(answer)
                continue
            allowed = {task.uid for task in answer}
            victims = [task for task in victims if task.uid in allowed]
            if not victims:
                victims = None
                break
        if victims is not None:
            return victims
    return []


def _job_plugin_order(session: Session) -> Callable[[Any, Any], int]:
    fns = [p.job_order for tier in session.hooks(h.JobOrder) for p in tier]

    def compare(left: Any, right: Any) -> int:
        for fn in fns:
            result = fn(left, right)
            if result:
                return int(result)
        return 0

    return compare


def victim_order(session: Session, preemptor: TaskInfo) -> Callable[[TaskInfo, TaskInfo], int]:
    """Comparator for ``BuildVictimsPriorityQueue``: negative when ``left`` is evicted first.

    Same job: reverse task order. Different queues: the VictimQueueOrder plugins, else reverse
    queue order. Otherwise reverse job order (plugins only), then reverse task order. A task
    whose job has left the session goes first.
    """
    jobs = session.jobs
    queues = session.queues
    job_order = _job_plugin_order(session)
    victim_queue_fns = [p.victim_queue_order for tier in session.hooks(h.VictimQueueOrder)
                        for p in tier]
    preemptor_job = jobs.get(preemptor.job)
    preemptor_queue = queues.get(preemptor_job.queue) if preemptor_job is not None else None

    def compare(left: TaskInfo, right: TaskInfo) -> int:
        if left.job == right.job:
            return -session.task_order(left, right)
        left_job, right_job = jobs.get(left.job), jobs.get(right.job)
        if left_job is None or right_job is None:
            if left_job is None and right_job is None:
                return -session.task_order(left, right)
            return -1 if left_job is None else 1
        if preemptor_queue is not None and left_job.queue != right_job.queue:
            left_queue, right_queue = queues.get(left_job.queue), queues.get(right_job.queue)
            if left_queue is not None and right_queue is not None:
                for fn in victim_queue_fns:
                    result = fn(left_queue, right_queue, preemptor_queue)
                    if result:
                        return int(result)
                return -session.queue_order(left_queue, right_queue)
        result = job_order(left_job, right_job)
        if result:
            return -result
        return -session.task_order(left, right)

    return compare


def victim_tasks(session: Session, tasks: list[TaskInfo]) -> list[TaskInfo]:
    """Union of the VictimTasks answers within a tier; the first tier with any decides."""
    for tier in session.hooks(h.VictimTasks):
        chosen: dict[str, TaskInfo] = {}
        for plugin in tier:
            for task in plugin.victim_tasks(tasks):
                chosen.setdefault(task.uid, task)
        if chosen:
            return list(chosen.values())
    return []


def preempt_mask(
    session: Session, task: TaskInfo, predicates: list[tuple[Any, bool]]
) -> h.BoolArray:
    """Volcano's ``PredicateForPreemptAction`` over the node table: a node is dropped only for
    a failure evicting pods cannot cure (not for a full pod count, say, nor for resources).
    ``predicates``: each vector predicate and whether it answers :class:`h.PreemptPredicate`."""
    table = session.table
    mask = np.ones(len(table), dtype=bool)
    for plugin, answers_itself in predicates:
        if answers_itself:
            mask &= plugin.preempt_mask(task, table)
            continue
        passed = plugin.predicate_mask(task, table)
        failed = ~passed
        if failed.any():
            # Without its own answer, a plugin's kube-scheduler reasons tell: a node whose
            # first failure is curable stays a candidate. Should a later check fail there too,
            # the full predicate run before any eviction is kept still rejects the node.
            for nodes, reason in plugin.predicate_reasons(task, table, failed):
                if reason in CURABLE_BY_EVICTION:
                    passed = passed | (nodes & failed)
        mask &= passed
    return mask
