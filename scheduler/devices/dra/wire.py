"""Typed reads of wire dicts for the DRA parsers, each failure naming object and field path."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from scheduler.api.resource import QuantityError, parse_quantity

__all__ = [
    "DRAObjectError",
    "Where",
    "as_bool",
    "as_int",
    "as_list",
    "as_map",
    "as_str",
    "as_str_list",
    "quantity",
]


class DRAObjectError(ValueError):
    """``<Kind> <namespace>/<name>: field <path>: <problem>``."""

    def __init__(self, *, kind: str, name: str, field: str, problem: str) -> None:
        self.kind = kind
        self.name = name
        self.field = field
        self.problem = problem
        super().__init__(f"{kind} {name}: field {field}: {problem}")


class Where:
    """The object being parsed (kind and ``ns/name``), to build errors with a field path."""

    __slots__ = ("kind", "name")

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name

    def error(self, path: str, problem: str) -> DRAObjectError:
        return DRAObjectError(kind=self.kind, name=self.name, field=path, problem=problem)


def as_map(value: Any, where: Where, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise where.error(path, "must be an object")
    return value


def as_list(value: Any, where: Where, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise where.error(path, "must be a list")
    return value


def as_str(value: Any, where: Where, path: str, *, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            raise where.error(path, "required")
        return ""
    if not isinstance(value, str):
        raise where.error(path, "must be a string")
    return value


def as_str_list(value: Any, where: Where, path: str) -> tuple[str, ...]:
    return tuple(
        as_str(v, where, f"{path}[{i}]", required=True)
        for i, v in enumerate(as_list(value, where, path))
    )


def as_int(value: Any, where: Where, path: str, *, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(path, "must be an integer")
    return value


def as_bool(value: Any, where: Where, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise where.error(path, "must be a boolean")
    return value


def quantity(value: Any, where: Where, path: str) -> Decimal:
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise where.error(path, f"bad quantity: {exc}") from None
