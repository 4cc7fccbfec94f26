"""Typed arguments of an action, read from the conf's ``configurations`` every cycle.

Volcano re-reads an action's arguments in each ``Execute``; so do we. Unknown keys and keys
that have no effect here (an action's ``NOT_ACTED_ON``) are warned about once, when the conf
is loaded; a wrongly typed value, which the conf loader refuses, is logged once per action
instance if it reaches an action anyway (the scheduler keeps running on its default).
Like Volcano's ``Arguments.GetBool``, a boolean may also be written as a string Go's
``strconv.ParseBool`` reads (``"true"``, ``"False"``, ``"1"`` …): Volcano's own e2e suite
writes action arguments that way.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

import structlog

from scheduler.framework.arguments import ArgumentError, parse_args

__all__ = ["action_args"]

log = structlog.get_logger("lahar.actions")


def action_args(
    owner: str,
    cls: type[Any],
    configurations: Mapping[str, Mapping[str, Any]],
    *,
    warned: set[str],
) -> Any:
    """``cls`` built from ``configurations[owner]``. A value of the wrong type is logged and
    its default kept; nothing else is logged (the conf loader warned about the rest)."""
    raw = _go_booleans(cls, configurations.get(owner) or {})
    while True:
        try:
            args, _ = parse_args(cls, raw, owner=f"action {owner}")
            break
        except ArgumentError as exc:
            # As Volcano does, a value that cannot be read leaves that one default in place.
            if str(exc) not in warned:
                warned.add(str(exc))
                log.error("bad action argument, its default is used", message=str(exc))
            raw = {key: value for key, value in raw.items() if key != exc.key}
    return args


_GO_BOOLEANS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def _go_booleans(cls: type[Any], raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with the string spellings of booleans turned into booleans for bool fields."""
    hints = typing.get_type_hints(cls)
    keys = {
        f.metadata.get("key", f.name)
        for f in dataclasses.fields(cls)
        if hints.get(f.name) is bool
    }
    return {
        key: _GO_BOOLEANS[value]
        if key in keys and isinstance(value, str) and value in _GO_BOOLEANS
        else value
        for key, value in raw.items()
    }
