"""Typed plugin and action arguments.

A plugin declares a frozen dataclass ``Args``; each field maps to a YAML key (the field's
``metadata["key"]``, else its name). Values are checked against the field type the way
Volcano's ``GetInt``/``GetFloat64``/``GetBool``/``GetString`` would read them, except that a
wrongly typed value is an error rather than a silently kept default. Keys under a declared
prefix (``binpack.resources.<name>``) are gathered into the field marked ``extra``; any other
unknown key is reported back as a warning.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["ArgumentError", "arg", "extra_args", "parse_args"]

T = TypeVar("T")


class ArgumentError(ValueError):
    """A wrongly typed argument: names the owner (plugin/action) and the key."""

    def __init__(self, owner: str, key: str, expected: str, value: object) -> None:
        super().__init__(f"{owner}: argument {key!r} must be {expected}, got {value!r}")
        self.owner = owner
        self.key = key


def arg(key: str, default: Any) -> Any:
    """A dataclass field read from YAML key ``key``."""
    return dataclasses.field(default=default, metadata={"key": key})


def extra_args(*prefixes: str) -> Any:
    """A ``dict[str, Any]`` field collecting every key that starts with one of ``prefixes``."""
    return dataclasses.field(default_factory=dict, metadata={"extra": prefixes})


def _check(owner: str, key: str, annotation: Any, value: Any) -> Any:
    origin = typing.get_origin(annotation)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ArgumentError(owner, key, "a boolean", value)
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ArgumentError(owner, key, "an integer", value)
    if annotation is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ArgumentError(owner, key, "a number", value)
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ArgumentError(owner, key, "a string", value)
    if origin in (list, tuple):
        if isinstance(value, list | tuple):
            return tuple(value) if origin is tuple else list(value)
        raise ArgumentError(owner, key, "a list", value)
    return value


def parse_args(
    cls: type[T], arguments: Mapping[str, Any] | None, *, owner: str
) -> tuple[T, list[str]]:
    """Build ``cls`` from ``arguments``; returns the instance and warnings for unknown keys."""
    arguments = dict(arguments or {})
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    warnings: list[str] = []
    extra_field: tuple[str, tuple[str, ...]] | None = None
    consumed: set[str] = set()
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if "extra" in f.metadata:
            extra_field = (f.name, f.metadata["extra"])
            continue
        key = f.metadata.get("key", f.name)
        if key in arguments:
            values[f.name] = _check(owner, key, hints[f.name], arguments[key])
            consumed.add(key)
    if extra_field is not None:
        name, prefixes = extra_field
        values[name] = {
            k: v
            for k, v in arguments.items()
            if k not in consumed and any(k.startswith(p) for p in prefixes)
        }
        consumed.update(values[name])
    for key in arguments:
        if key not in consumed:
            warnings.append(f"{owner}: unknown argument {key!r} ignored")
    return cls(**values), warnings
