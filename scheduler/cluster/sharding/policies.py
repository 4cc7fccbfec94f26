"""The shard policies of Volcano's sharding controller, by name.

A policy takes part in the pipeline of :mod:`.assign` through the phases it implements
(pkg/controllers/sharding/policy/interface.go): a filter (a node passes only if every filter
keeps it), a score in [0, 1] (summed with the policy's weight) and a select step over the
sorted candidates (each in config order, each given the previous one's output).

* ``allocation-rate`` (policy/allocationrate/allocationrate.go) keeps nodes whose CPU
  allocation rate, rounded to two decimals, lies in ``[minCPUUtil, maxCPUUtil]`` and scores
  them by where they sit in that band (fuller first, so a shard packs busy nodes);
* ``warmup`` (policy/warmup/warmup.go) scores 1 for a node labelled ``warmupLabel`` =
  ``warmupLabelValue`` (default ``node.volcano.sh/warmup=true``);
* ``node-limit`` (policy/nodelimit/nodelimit.go) keeps at most ``maxNodes`` (``<= 0``: no cap);
  ``minNodes`` is only a floor to warn about.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.cluster.sharding.metrics import NodeMetrics

__all__ = ["POLICIES", "Policy", "PolicyContext", "PolicyError", "build_policy"]

log = structlog.get_logger("lahar.sharding")

ARG_MIN_CPU = "minCPUUtil"
ARG_MAX_CPU = "maxCPUUtil"
WARMUP_LABEL = "node.volcano.sh/warmup"


class PolicyError(ValueError):
    """A policy's arguments are wrong; the message names the policy and the argument."""


@dataclass(frozen=True, slots=True)
class PolicyContext:
    scheduler: str
    metrics: Mapping[str, NodeMetrics]
    labels: Mapping[str, Mapping[str, str]]
    """Node name → its labels."""


class Policy:
    """A policy takes part in the phases it says it does: ``FILTERS`` (``keep``), ``SCORES``
    (``score``), ``SELECTS`` (``select``)."""

    NAME = ""
    FILTERS = False
    SCORES = False
    SELECTS = False

    def keep(self, context: PolicyContext, node: str) -> bool:
        return True

    def score(self, context: PolicyContext, node: str) -> float:
        return 0.0

    def select(self, context: PolicyContext, candidates: list[str]) -> list[str]:
        return candidates


def _float(args: Mapping[str, Any], key: str, default: float, policy: str) -> float:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyError(f"policy {policy}: argument {key}: must be a number, got {value!r}")
    return float(value)


def _int(args: Mapping[str, Any], key: str, default: int, policy: str) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise PolicyError(f"policy {policy}: argument {key}: must be an integer, got {value!r}")
    return int(value)


def _rounded(rate: float) -> float:
    """Two decimals, as Volcano's roundUtil, so filter and score agree."""
    return round(rate * 100) / 100


class AllocationRate(Policy):
    NAME = "allocation-rate"
    FILTERS = SCORES = True

    def __init__(self, args: Mapping[str, Any]) -> None:
        low = _float(args, ARG_MIN_CPU, 0.0, self.NAME)
        high = _float(args, ARG_MAX_CPU, 0.0, self.NAME)
        if low < 0 or high > 1 or low > high:
            raise PolicyError(f"policy {self.NAME}: invalid CPU utilization range "
                              f"[{low:.2f}, {high:.2f}]: must be within [0.0, 1.0] and "
                              "min <= max")
        self.low, self.high = _rounded(low), _rounded(high)
        self.width = self.high - self.low

    def keep(self, context: PolicyContext, node: str) -> bool:
        metrics = context.metrics.get(node)
        if metrics is None or metrics.cpu < 0:
            return False
        return self.low <= _rounded(metrics.cpu) <= self.high

    def score(self, context: PolicyContext, node: str) -> float:
        metrics = context.metrics.get(node)
        if metrics is None or metrics.cpu < 0:
            return 0.0
        if self.width == 0:
            return 1.0
        return min(1.0, max(0.0, (_rounded(metrics.cpu) - self.low) / self.width))


class Warmup(Policy):
    NAME = "warmup"
    SCORES = True

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.label = str(args.get("warmupLabel", WARMUP_LABEL))
        self.value = str(args.get("warmupLabelValue", "true"))
        if not self.label:
            raise PolicyError(f"policy {self.NAME}: argument warmupLabel: must not be empty")

    def score(self, context: PolicyContext, node: str) -> float:
        return 1.0 if context.labels.get(node, {}).get(self.label) == self.value else 0.0


class NodeLimit(Policy):
    NAME = "node-limit"
    SELECTS = True

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.minimum = _int(args, "minNodes", 0, self.NAME)
        self.maximum = _int(args, "maxNodes", 0, self.NAME)
        if self.minimum < 0:
            raise PolicyError(f"policy {self.NAME}: invalid minNodes {self.minimum}: "
                              "must be >= 0")
        if 0 < self.maximum < self.minimum:
            raise PolicyError(f"policy {self.NAME}: invalid bounds [{self.minimum}, "
                              f"{self.maximum}]: maxNodes must be >= minNodes")

    def select(self, context: PolicyContext, candidates: list[str]) -> list[str]:
        if self.maximum > 0 and len(candidates) > self.maximum:
            candidates = candidates[:self.maximum]
        if self.minimum > 0 and len(candidates) < self.minimum:
            log.info("fewer nodes than minNodes for a shard", scheduler=context.scheduler,
                     nodes=len(candidates), min_nodes=self.minimum)
        return candidates


POLICIES: dict[str, Callable[[Mapping[str, Any]], Policy]] = {
    AllocationRate.NAME: AllocationRate,
    Warmup.NAME: Warmup,
    NodeLimit.NAME: NodeLimit,
}
"""Policy name → builder from its arguments (Volcano's policy/builtin registry)."""


def build_policy(name: str, args: Mapping[str, Any] | None) -> Policy:
    builder = POLICIES.get(name)
    if builder is None:
        raise PolicyError(f"policy {name} not found (known: {', '.join(sorted(POLICIES))})")
    return builder(args or {})
