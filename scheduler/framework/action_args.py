"""Typed arguments of an action, read from the conf's ``configurations`` every cycle.

Volcano re-reads an action's arguments in each ``Execute``; so do we. As Volcano's
``Arguments.GetBool`` / ``GetInt`` do, a value of the wrong type (``"true"`` written as a string
for a boolean, ``10.0`` for an integer) leaves that one default in place and the others apply.
Nothing is logged here: the conf loader has already warned, once, naming the file, the
``configurations`` entry and the argument, about such values, unknown keys and keys that have
no effect here (an action's ``NOT_ACTED_ON``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.framework.arguments import parse_args

__all__ = ["action_args"]


def action_args(
    owner: str,
    cls: type[Any],
    configurations: Mapping[str, Mapping[str, Any]],
    *,
    warned: set[str] | None = None,
) -> Any:
    """``cls`` built from ``configurations[owner]``, each unreadable value left at its default.

    ``warned`` is accepted for the callers that still pass it; nothing is logged."""
    del warned
    args, _ = parse_args(cls, configurations.get(owner) or {})
    return args
