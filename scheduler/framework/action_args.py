"""Typed arguments of an action, read from the conf's ``configurations`` every cycle.

Volcano re-reads an action's arguments in each ``Execute``; so do we. A wrongly typed value
or an unknown key is logged once per action instance (the scheduler keeps running, on the
defaults for a bad value), and so is a known key that has no effect in this implementation.
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
    not_acted_on: Mapping[str, str],
    warned: set[str],
) -> Any:
    """``cls`` built from ``configurations[owner]``; ``not_acted_on`` maps keys we accept but
    ignore to the reason, which the warning gives."""
    raw = configurations.get(owner) or {}
    try:
        args, warnings = parse_args(cls, raw, owner=f"action {owner}")
    except ArgumentError as exc:
        if str(exc) not in warned:
            warned.add(str(exc))
            log.error("bad action argument, using the defaults", message=str(exc))
        return cls()
    for key, why in not_acted_on.items():
        if key in raw:
            warnings.append(f"action {owner}: argument {key!r} has no effect: {why}")
    for warning in warnings:
        if warning not in warned:
            warned.add(warning)
            log.warning("action argument", message=warning)
    return args
