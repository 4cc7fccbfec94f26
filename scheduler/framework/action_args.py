"""Typed arguments of an action, read from the conf's ``configurations`` every cycle.

Volcano re-reads an action's arguments in each ``Execute``; so do we. Unknown keys and keys
that have no effect here (an action's ``NOT_ACTED_ON``) are warned about once, when the conf
is loaded; a wrongly typed value is logged once per action instance and its default kept.
As in Volcano's ``Arguments.GetBool`` (``value.(bool)``), a boolean written as a string
(``"true"``) is of the wrong type: Volcano logs it and keeps the default.
"""

from __future__ import annotations

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
    raw = dict(configurations.get(owner) or {})
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

