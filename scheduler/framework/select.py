"""The node-selection pipeline shared by allocate and backfill.

1. Pre-predicate once per task; a failure rejects every node.
2. Vector filter: resource fit against future idle, then the AND of plugin predicate masks.
3. Sampling like Volcano's ``percentageOfNodesToFind``: from a rotating start index take the
   first ``target`` feasible nodes, running exact per-node checks only on those.
4. Candidates that fit current idle are preferred over those that fit only future idle; ties
   of the summed plugin scores are broken by the session's seeded random source. In soft
   node-sharding mode each of the two is tried on the shard's nodes before the others
   (Volcano's ``prioritizeNodes``: idle in shard, idle outside, future in, future outside).
Fit errors are built only when nothing fits, naming each node's first failing check.
"""

from __future__ import annotations

import bisect

import numpy as np

from scheduler.api.node import NodeInfo
from scheduler.api.nodeshard import NOT_IN_SHARD
from scheduler.api.status import FitErrors
from scheduler.api.task import TaskInfo
from scheduler.framework.hooks import BoolArray, IntArray
from scheduler.framework.session import NodeSampling, Session

__all__ = ["NodeSampling", "best_node", "feasible_nodes", "sampling_target"]


def sampling_target(total: int, sampling: NodeSampling) -> int:
    if total <= sampling.minimum_feasible or sampling.percentage >= 100:
        return total
    percentage = sampling.percentage
    if percentage <= 0:
        percentage = max(50 - total // 125, sampling.minimum_percentage)
    return max(total * percentage // 100, sampling.minimum_feasible)


def feasible_nodes(
    session: Session,
    task: TaskInfo,
    *,
    check_resources: bool = True,
    within: BoolArray | None = None,
) -> tuple[IntArray, FitErrors | None]:
    """Rows of the nodes ``task`` may go to, or ``(empty, FitErrors)``; with ``within``, only
    among the nodes it marks (a HyperNode's), sampled and explained over those alone."""
    table = session.table
    total = len(table) if within is None else int(within.sum())
    status = session.pre_predicate(task)
    if status is not None:
        errors = FitErrors.for_pod(total, status.message or "pre-predicate failed")
        return np.empty(0, dtype=np.intp), errors
    mask = (
        table.fit_mask(task.init_resreq) if check_resources else np.ones(len(table), dtype=bool)
    )
    if within is not None:
        mask &= within
    if mask.any():
        mask &= session.predicate_mask(task)
    rows = np.flatnonzero(mask)
    target = sampling_target(total, session.sampling)
    exact_failures: list[tuple[IntArray, str]] = []
    if len(rows):
        start = session.cursor % max(len(table), 1)
        # rows are ascending: [start, n) then [0, start). Not ndarray.searchsorted, which lets
        # go of the GIL even for 200 rows: under `lahar run` another thread then takes it and
        # the cycle waits up to a switch interval (0.23 ms a call, 8% of a busy cycle).
        split = bisect.bisect_left(rows, start)
        rows = np.concatenate((rows[split:], rows[:split]))
        if session.wants_exact(task):
            rows, exact_failures = _exact(session, task, rows, target)
        elif len(rows) > target:
            rows = rows[:target]
        if len(rows) and len(rows) < total:
            session.cursor = int(rows[-1]) + 1
    if len(rows):
        return rows, None
    return rows, _explain(
        session, task, check_resources=check_resources, exact_failures=exact_failures,
        within=within,
    )


def _exact(
    session: Session, task: TaskInfo, rows: IntArray, target: int
) -> tuple[IntArray, list[tuple[IntArray, str]]]:
    """The first ``target`` rows passing the exact checks, and the failures seen (rows,
    reason). Rows whose answer a plugin already knows (:meth:`Session.exact_known`) are taken
    or left without a check."""
    failures: list[tuple[IntArray, str]] = []
    nodes = session.table.nodes
    known = session.exact_known(task, rows)
    codes: IntArray
    if known is None:
        codes = np.zeros(len(rows), dtype=np.intp)
    else:
        codes, reasons = known
        for i, reason in enumerate(reasons):
            failures.append((rows[codes == -1 - i], reason))
    passed = codes == 1
    unknown = np.flatnonzero(codes == 0)
    if len(unknown):
        before = np.cumsum(passed)  # known passes up to each position
        extra = 0  # checked passes so far
        for position in unknown.tolist():
            if position and int(before[position - 1]) + extra >= target:
                break
            row = int(rows[position])
            status = session.exact_check(task, nodes[row])
            if status is None:
                passed[position] = True
                extra += 1
            else:
                failures.append((np.array([row], dtype=np.intp), status.message))
    return rows[passed][:target], failures


def _explain(
    session: Session,
    task: TaskInfo,
    *,
    check_resources: bool,
    exact_failures: list[tuple[IntArray, str]],
    within: BoolArray | None = None,
) -> FitErrors:
    table = session.table
    alive: BoolArray = np.ones(len(table), dtype=bool) if within is None else within.copy()
    errors = FitErrors(nodes=int(alive.sum()))
    shard = session.shard
    if shard.hard:  # Volcano checks the shard before any predicate, resources included
        outside = alive & ~shard.mask
        if outside.any():
            errors.add(NOT_IN_SHARD, int(outside.sum()))
            alive &= shard.mask
    if check_resources:
        for failed, reason in table.fit_reasons(task.init_resreq, alive):
            errors.add(reason, int(failed.sum()))
            alive &= ~failed
    for failed, reason in session.predicate_reasons(task, alive):
        errors.add(reason, int(failed.sum()))
        alive &= ~failed
    for rows, reason in exact_failures:
        errors.add(reason, int(alive[rows].sum()))
    return errors


def best_node(session: Session, task: TaskInfo, rows: IntArray) -> tuple[NodeInfo, bool]:
    """Pick the node for ``task`` among feasible ``rows``; returns (node, fits current idle)."""
    table = session.table
    idle_fit = table.fit_mask(task.init_resreq, future=False, rows=rows)
    fits_idle = bool(idle_fit.any())
    if fits_idle:
        rows = rows[idle_fit]
    if session.shard.soft:  # the shard's nodes first, in each of idle and future idle
        rows = next(group for group in session.shard.split(rows) if len(group))
    if len(rows) == 1:
        return table.nodes[int(rows[0])], fits_idle
    scores = session.score(task, rows)
    best = np.flatnonzero(scores >= scores.max() - 1e-9)
    # ``choice`` over the positions draws exactly as over the rows themselves (one
    # ``_randbelow(len)``), without making a Python object of every tied row.
    pick = 0 if len(best) == 1 else session.rng.choice(range(len(best)))
    choice = int(rows[best[pick]])
    return table.nodes[choice], fits_idle
