"""Topology-aware preemption: the preempt action chooses its node by a dry run.

Volcano's ``enableTopologyAwarePreemption`` (``preempt.go``: ``DryRunPreemption``,
``SelectVictimsOnNode``, ``SelectCandidate``/``pickOneNodeForPreemption``). From a random
offset, nodes are tried until ``clamp(N × minCandidateNodesPercentage / 100,
minCandidateNodesAbsolute, maxCandidateNodesAbsolute)`` candidates are found. On each node the
victims leave lowest first until the preemptor fits; then, highest first, each victim is
reprieved if the preemptor still fits with it back. Among the candidates the node is chosen by
(1) the lowest highest victim priority, (2) the lowest sum of victim priorities, (3) the
fewest victims, (4) the latest start among the highest-priority victims; then the first.

The dry run uses the session itself inside a statement that is always discarded, so every
plugin sees the removals through its usual event handlers (Volcano's Simulate* hooks mirror
those handlers on cloned state). As victims leave, a node is judged by the queue check, the
resource fit (``pods`` included) and the plugins' simulate checks alone
(``SimulatePredicateFn``: inter-pod affinity and devices), not by every predicate
(``docs/fidelity.md``). A node where the preemptor does not fit with all victims gone is never
a candidate — Volcano would still evict there when only the queue check fails; we do not
(``docs/preemption.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Default
from scheduler.api.task import TaskInfo, parse_time
from scheduler.framework.eviction import (
    TaskFilter,
    sorted_victims,
    victims_suffice,
)
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.metrics import record_preemption_attempt, record_victims

__all__ = ["TopologyChooser", "pick_candidate"]

_PRIORITY_OFFSET = 2**31


@dataclass(slots=True)
class Candidate:
    node: NodeInfo
    victims: list[TaskInfo]


def _priority(task: TaskInfo) -> int:
    value = (task.pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _start(task: TaskInfo, now: float) -> float:
    started = parse_time((task.pod.get("status") or {}).get("startTime"))
    return started or now


def pick_candidate(candidates: list[Candidate], *, now: float) -> Candidate:
    """kube-scheduler's ``pickOneNodeForPreemption`` without PDBs."""

    def highest(c: Candidate) -> float:
        return -max(_priority(v) for v in c.victims)

    def total(c: Candidate) -> float:
        return -sum(_priority(v) + _PRIORITY_OFFSET for v in c.victims)

    def count(c: Candidate) -> float:
        return -len(c.victims)

    def latest_start(c: Candidate) -> float:
        top = max(_priority(v) for v in c.victims)
        return min(_start(v, now) for v in c.victims if _priority(v) == top)

    remaining = candidates
    for score in (highest, total, count, latest_start):
        best = max(score(c) for c in remaining)
        remaining = [c for c in remaining if score(c) == best]
        if len(remaining) == 1:
            break
    return remaining[0]


class TopologyChooser:
    def __init__(
        self, session: Session, *, min_percentage: int, min_absolute: int, max_absolute: int
    ) -> None:
        self.session = session
        self.min_percentage = min_percentage
        self.min_absolute = min_absolute
        self.max_absolute = max_absolute

    def _wanted(self, nodes: int) -> int:
        """``calculateNumCandidates``."""
        wanted = max(nodes * self.min_percentage // 100, self.min_absolute)
        return min(wanted, self.max_absolute, nodes)

    def preempt(
        self,
        statement: Statement,
        *,
        preemptor: TaskInfo,
        queue: QueueInfo,
        nodes: list[NodeInfo],
        victim_filter: TaskFilter,
        reason: str,
    ) -> list[TaskInfo] | None:
        """Evict the chosen victims and pipeline ``preemptor`` (merged into ``statement``);
        returns the victims, or None when no node works."""
        if not nodes:
            return None
        offset = self.session.rng.randrange(len(nodes))
        wanted = self._wanted(len(nodes))
        candidates: list[Candidate] = []
        for i in range(len(nodes)):
            node = nodes[(offset + i) % len(nodes)]
            victims = self._victims_on(preemptor, queue, node, victim_filter)
            if victims:
                candidates.append(Candidate(node, victims))
                if len(candidates) >= wanted:
                    break
        if not candidates:
            return None
        chosen = pick_candidate(candidates, now=self.session.clock())
        attempt = Statement(self.session)
        for victim in chosen.victims:
            attempt.evict(victim, reason)
        if attempt.pipeline(preemptor, chosen.node, eviction_occurred=True) is not None:
            attempt.discard()
            return None
        statement.merge(attempt)
        return chosen.victims

    def _victims_on(
        self, preemptor: TaskInfo, queue: QueueInfo, node: NodeInfo, victim_filter: TaskFilter
    ) -> list[TaskInfo]:
        """``SelectVictimsOnNode``: the fewest victims, found by evict-then-reprieve."""
        session = self.session
        candidates = [t for t in node.tasks.values() if victim_filter(t)]
        victims = session.preemptable(preemptor, candidates)
        record_victims(len(victims))
        if not victims_suffice(preemptor, node, victims):
            return []
        record_preemption_attempt()

        def fits() -> bool:
            return (
                session.allocatable(queue, preemptor)
                and preemptor.init_resreq.less_equal(node.future_idle, Default.ZERO)
                and session.simulate_predicate(preemptor, node)
            )

        dry = Statement(session)
        removed: list[TaskInfo] = []
        try:
            for victim in sorted_victims(session, preemptor, victims):
                dry.evict(victim, "dry run")
                removed.append(victim)
                if fits():
                    break
            if not removed or not fits():
                return []
            chosen: list[TaskInfo] = []
            for victim in reversed(removed):
                dry.unevict(victim)
                if not fits():
                    dry.evict(victim, "dry run")
                    chosen.append(victim)
            return chosen
        finally:
            dry.discard()
