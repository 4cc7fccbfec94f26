"""Kubernetes label selectors (``metav1.LabelSelector``), parsed once and matched many times.

A selector is frozen and hashable so that identical selectors of many pods collapse into one
key of the columnar pod index. ``None`` in the API (a missing selector) selects nothing, while
an empty selector ``{}`` selects everything; both are kept apart here as Kubernetes does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.errors import ObjectError

__all__ = ["EVERYTHING", "NOTHING", "LabelRequirement", "LabelSelector", "parse_label_selector"]

ErrorFactory = Callable[[str, str], ObjectError]
"""``(field path, problem) → ObjectError`` naming the object being parsed."""

_SET_OPERATORS = frozenset({"In", "NotIn"})
_EXISTS_OPERATORS = frozenset({"Exists", "DoesNotExist"})


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str
    """``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``."""
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[LabelRequirement, ...] = ()
    nothing: bool = False
    """True for an absent selector, which matches no object at all."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(req.matches(labels) for req in self.requirements)

    def anchors(self) -> frozenset[tuple[str, str]] | None:
        """Label pairs of which every matching object has one (from the first ``In``
        requirement), or ``None`` when the selector names no such pairs."""
        if self.nothing:
            return frozenset()
        for req in self.requirements:
            if req.operator == "In":
                return frozenset((req.key, value) for value in req.values)
        return None

    def with_requirements(self, extra: tuple[LabelRequirement, ...]) -> LabelSelector:
        """This selector narrowed by ``extra`` (a selector that matches nothing stays so)."""
        if self.nothing or not extra:
            return self
        return LabelSelector(self.requirements + extra)


NOTHING = LabelSelector(nothing=True)
EVERYTHING = LabelSelector()


def parse_label_selector(raw: Any, where: str, err: ErrorFactory) -> LabelSelector:
    """Parse a ``LabelSelector`` object found at field path ``where``."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise err(where, "must be a label selector object")
    requirements: list[LabelRequirement] = []
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise err(where + ".matchLabels", "must be a map of strings")
    for key, value in sorted(match_labels.items()):
        requirements.append(LabelRequirement(str(key), "In", frozenset({str(value)})))
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise err(where + ".matchExpressions", "must be a list")
    for i, expr in enumerate(expressions):
        path = f"{where}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            raise err(path + ".key", "must be a string")
        operator = expr.get("operator")
        values = expr.get("values") or []
        if not isinstance(values, list):
            raise err(path + ".values", "must be a list of strings")
        if operator in _SET_OPERATORS:
            if not values:
                raise err(path + ".values", f"must be non-empty for operator {operator}")
        elif operator in _EXISTS_OPERATORS:
            if values:
                raise err(path + ".values", f"must be empty for operator {operator}")
        else:
            raise err(path + ".operator", f"unsupported operator {operator!r}")
        requirements.append(
            LabelRequirement(expr["key"], str(operator), frozenset(str(v) for v in values))
        )
    return LabelSelector(tuple(requirements))
