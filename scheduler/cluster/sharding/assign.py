"""Which nodes go to which scheduler: Volcano's ShardingManager pipeline.

For each scheduler in config order (pkg/controllers/sharding/sharding_manager.go,
``CalculateShardAssignments`` and ``runPipeline``):

1. the nodes no earlier scheduler took;
2. **filter**: kept only if every filtering policy keeps it;
3. **sort**: by the sum of ``weight × score`` over the scoring policies, highest first, a
   stable sort (ties keep node-name order here; Volcano's keep its informer's order);
4. **select**: every selecting policy in turn (``node-limit`` cuts to ``maxNodes``).

Volcano runs this over batches of 50 nodes when there are more (``defaultBatchSize``,
``calculateShardAssignmentsBatched``), each batch on its own: ``maxNodes`` then caps each
batch's share, not the shard, and a later scheduler only gets what the earlier ones left in
every batch. ``batch_size`` keeps that behaviour by default; 0 runs one pass over all nodes,
so ``maxNodes`` caps the whole shard (``lahar shard-controller --assignment-batch-size 0``).

A shard is rewritten only when its node count changed or at least a tenth of its nodes
(at least one) are new (``assignmentNeedsUpdate`` of sharding_controller.go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.cluster.sharding.config import SchedulerShardConfig
from scheduler.cluster.sharding.metrics import NodeMetrics
from scheduler.cluster.sharding.policies import PolicyContext

__all__ = ["VOLCANO_BATCH_SIZE", "assign", "needs_update"]

VOLCANO_BATCH_SIZE = 50


def _pipeline(config: SchedulerShardConfig, nodes: list[str],
              context: PolicyContext) -> list[str]:
    filters = [w.policy for w in config.policies if w.policy.FILTERS]
    candidates = [n for n in nodes if all(p.keep(context, n) for p in filters)]
    scorers = [w for w in config.policies if w.policy.SCORES]
    if len(candidates) > 1 and scorers:
        scores = {n: sum(w.weight * w.policy.score(context, n) for w in scorers)
                  for n in candidates}
        candidates.sort(key=lambda n: -scores[n])  # list.sort is stable
    for weighted in config.policies:
        if not weighted.policy.SELECTS:
            continue
        candidates = weighted.policy.select(context, candidates)
        if not candidates:
            break
    return candidates


def _assign_batch(nodes: list[str], configs: Sequence[SchedulerShardConfig],
                  metrics: Mapping[str, NodeMetrics],
                  labels: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    taken: set[str] = set()
    out: dict[str, list[str]] = {}
    for config in configs:
        context = PolicyContext(scheduler=config.name, metrics=metrics, labels=labels)
        chosen = _pipeline(config, [n for n in nodes if n not in taken], context)
        taken.update(chosen)
        out[config.name] = chosen
    return out


def assign(nodes: Sequence[str], configs: Sequence[SchedulerShardConfig], *,
           metrics: Mapping[str, NodeMetrics], labels: Mapping[str, Mapping[str, str]],
           batch_size: int = VOLCANO_BATCH_SIZE) -> dict[str, list[str]]:
    """Scheduler name → its nodes, for every configured scheduler (possibly none)."""
    ordered = sorted(nodes)
    if batch_size <= 0 or len(ordered) <= batch_size:
        return _assign_batch(ordered, configs, metrics, labels)
    out: dict[str, list[str]] = {config.name: [] for config in configs}
    for start in range(0, len(ordered), batch_size):
        batch = _assign_batch(ordered[start:start + batch_size], configs, metrics, labels)
        for name, chosen in batch.items():
            out[name].extend(chosen)
    return out


def needs_update(current: Sequence[str], wanted: Sequence[str]) -> bool:
    if len(current) != len(wanted):
        return True
    have = set(current)
    threshold = max(1, len(wanted) // 10)
    return sum(1 for node in wanted if node not in have) >= threshold
