"""The node-selection pipeline shared by allocate and backfill.

1. Pre-predicate once per task; a failure rejects every node.
2. Vector filter: resource fit against future idle, then the AND of plugin predicate masks.
3. Sampling like Volcano's ``percentageOfNodesToFind``: from a rotating start index take the
   first ``target`` feasible nodes, running exact per-node checks only on those. Steps 2 and 3
   go window by window from that index (windows doubling in size, wrapping round to row 0)
   and stop once ``target`` nodes passed, as Volcano's ``PredicateNodes`` and
   kube-scheduler's ``numFeasibleNodesToFind`` stop checking nodes: an idle cycle on a large
   cluster reads a few thousand rows per pod, not every node, and picks the same ones.
4. Candidates that fit current idle are preferred over those that fit only future idle; ties
   of the summed plugin scores are broken by the session's seeded random source. In soft
   node-sharding mode each of the two is tried on the shard's nodes before the others
   (Volcano's ``prioritizeNodes``: idle in shard, idle outside, future in, future outside).
Fit errors are built only when nothing fits, naming each node's first failing check.
"""

from __future__ import annotations

from collections.abc import Iterator

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
    among the nodes it marks (a HyperNode's), sampled and explained over those alone.

    The masks are computed window by window from the cursor (:func:`_windows`) and the search
    stops once ``target`` feasible rows are found, as Volcano's ``PredicateNodes``
    (pkg/scheduler/util/predicate_helper.go) and kube-scheduler's
    ``findNodesThatPassFilters`` with ``numFeasibleNodesToFind`` stop checking nodes: the rows
    and the cursor are those the masks over every node would give."""
    table = session.table
    n = len(table)
    total = n if within is None else int(within.sum())
    status = session.pre_predicate(task)
    if status is not None:
        errors = FitErrors.for_pod(total, status.message or "pre-predicate failed")
        return np.empty(0, dtype=np.intp), errors
    target = sampling_target(total, session.sampling)
    exact = session.wants_exact(task)
    exact_failures: list[tuple[IntArray, str]] = []
    found: list[IntArray] = []
    count = 0
    start = session.cursor % max(n, 1)
    for window in _windows(start, n, max(target + target // 4, _FIRST_WINDOW)):
        mask = (table.fit_mask(task.init_resreq, rows=window) if check_resources
                else np.ones(window.stop - window.start, dtype=bool))
        if within is not None:
            mask &= within[window]
        if not mask.any():
            continue
        mask &= session.predicate_mask(task, rows=window)
        rows = np.flatnonzero(mask)
        if not len(rows):
            continue
        rows += window.start
        if exact:  # the checks run in order and stop at ``target`` passes, window by window
            rows, failures = _exact(session, task, rows, target - count)
            exact_failures += failures
        found.append(rows)
        count += len(rows)
        if count >= target:
            break
    if not found:
        rows = np.empty(0, dtype=np.intp)
    else:
        rows = (found[0] if len(found) == 1 else np.concatenate(found))[:target]
    if len(rows) and len(rows) < total:
        session.cursor = int(rows[-1]) + 1
    if len(rows):
        return rows, None
    return rows, _explain(
        session, task, check_resources=check_resources, exact_failures=exact_failures,
        within=within,
    )


_FIRST_WINDOW = 512
"""The fewest rows the first window of :func:`feasible_nodes` spans; each next one doubles."""


def _windows(start: int, n: int, first: int) -> Iterator[slice]:
    """Slices of the table's ``n`` rows in the order the search reads them: from ``start`` to
    the end, then from 0 to ``start``, in windows of ``first`` rows that double each time."""
    size = max(first, 1)
    for low, high in ((start, n), (0, start)):
        while low < high:
            stop = min(low + size, high)
            yield slice(low, stop)
            low = stop
            size *= 2


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
