"""Label and field selectors as the API server reads them from a LIST or WATCH query.

Labels: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``.
Fields: ``path=v`` / ``path!=v`` on any dotted path (``spec.nodeName``, ``involvedObject.name``);
a missing field reads as the empty string, as for the API server's field labels.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Selector"]

Test = Callable[[Mapping[str, Any]], bool]
_SET = re.compile(r"^\s*(!?)([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _terms(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [term.strip() for term in terms if term.strip()]


def _label_test(term: str) -> Test:
    def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
        return (obj.get("metadata") or {}).get("labels") or {}

    matched = _SET.match(term)
    if matched:
        key, operator = matched.group(2), matched.group(3)
        values = {v.strip() for v in matched.group(4).split(",")}
        if operator == "in":
            return lambda obj: labels(obj).get(key) in values
        return lambda obj: labels(obj).get(key) not in values
    for operator in ("!=", "==", "="):
        if operator in term:
            key, value = (part.strip() for part in term.split(operator, 1))
            if operator == "!=":
                return lambda obj: labels(obj).get(key) != value
            return lambda obj: labels(obj).get(key) == value
    if term.startswith("!"):
        return lambda obj: term[1:] not in labels(obj)
    return lambda obj: term in labels(obj)


def _field(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def _field_test(term: str) -> Test:
    for operator in ("!=", "==", "="):
        if operator in term:
            path, value = (part.strip() for part in term.split(operator, 1))
            if operator == "!=":
                return lambda obj: _field(obj, path) != value
            return lambda obj: _field(obj, path) == value
    raise ValueError(f"unsupported field selector {term!r}")


@dataclass(frozen=True, slots=True)
class Selector:
    tests: tuple[Test, ...] = ()

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Selector:
        tests = [_label_test(t) for t in _terms(query.get("labelSelector") or "")]
        tests += [_field_test(t) for t in _terms(query.get("fieldSelector") or "")]
        return cls(tuple(tests))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(test(obj) for test in self.tests)
