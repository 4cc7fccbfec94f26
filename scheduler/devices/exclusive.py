"""GPU exclusivity rules of the vGPU family (Volcano's ``deviceshare.GPUExclusiveRules``).

A rule is a set of pod labels (``key: value``). A pod that carries every label of a rule
*matches* it; a pod matching one or more rules is never given a card on which a pod matching
one of the same rules already holds a vGPU. Pods matching no rule, and pods of different
rules, share cards as usual. Rules act only on nodes whose cards run in HAMi-core mode: MIG
instances are isolated by the hardware.

The conf value is read as Volcano's ``parseExclusiveRules`` reads it: a list of maps; within
a map only string keys with string values count, and a map left empty counts as no rule (the
others keep their positions among the rules that count). Each part that is left out is named
in a conf warning here, where Volcano drops it silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.task import TaskInfo

__all__ = ["ExclusiveRules", "matching_rules", "parse_exclusive_rules", "task_labels"]

KEY = "deviceshare.GPUExclusiveRules"

ExclusiveRules = tuple[tuple[tuple[str, str], ...], ...]
"""Each rule as sorted ``(label key, value)`` pairs, in the conf's order."""


def parse_exclusive_rules(raw: Any) -> tuple[ExclusiveRules, list[str]]:
    """``(rules, warnings)`` from the conf value (``gpuexclusive.go`` parseExclusiveRules)."""
    if raw is None:
        return (), []
    if not isinstance(raw, list | tuple):
        return (), [f"argument {KEY!r} must be a list of label maps, got {raw!r}; "
                    f"no exclusivity rule is used"]
    rules: list[tuple[tuple[str, str], ...]] = []
    warnings: list[str] = []
    for position, item in enumerate(raw):
        labels: dict[str, str] = {}
        if isinstance(item, Mapping):
            for key, value in item.items():
                if isinstance(key, str) and isinstance(value, str):
                    labels[key] = value
                else:
                    warnings.append(f"argument {KEY!r}: entry {position} label {key!r}: "
                                    f"{value!r} is not a string (quote it); that label is "
                                    f"left out of the rule")
        else:
            warnings.append(f"argument {KEY!r}: entry {position} is not a map of labels "
                            f"({item!r}); it is no rule")
            continue
        if not labels:
            warnings.append(f"argument {KEY!r}: entry {position} has no string label; "
                            f"it is no rule")
            continue
        rules.append(tuple(sorted(labels.items())))
    return tuple(rules), warnings


def matching_rules(labels: Mapping[str, Any], rules: ExclusiveRules) -> frozenset[int]:
    """Indices of the rules whose every label ``labels`` carries with the same value
    (``gpuexclusive.go`` matchingRules / podMatchesRule)."""
    if not rules or not labels:
        return frozenset()
    return frozenset(i for i, rule in enumerate(rules)
                     if all(key in labels and labels[key] == value for key, value in rule))


def task_labels(task: TaskInfo) -> Mapping[str, Any]:
    labels = (task.pod.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}
