"""``lahar simulate``'s log warnings in the one format of its load warnings:
``warning: FILE#DOC: Kind ns/name: what`` (the cache, the HyperNode tree and the queue tree
log as ``lahar run`` does, with key=value fields a user of a one-shot command reads badly).

The object is the event's ``object`` (or ``podgroup``) field, or the ``Kind name:`` its text
starts with; the file and document are where the loaded manifest of that object came from.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, TextIO, cast

__all__ = ["configure_warning_lines", "object_sources", "restore_logging"]

_SAVED: list[dict[str, Any]] = []

_SUBJECT = re.compile(r"^([A-Z][A-Za-z]+ [^\s:]+): (.*)$", re.DOTALL)
_DROPPED = frozenset({"timestamp", "level"})


def object_sources(manifests: Iterable[Any], *, key: Any) -> dict[str, str]:
    """``Kind ns/name`` (and ``Kind name`` for the default namespace) → ``FILE#DOC``."""
    sources: dict[str, str] = {}
    for manifest in manifests:
        name = key(manifest)
        sources.setdefault(name, manifest.source)
        sources.setdefault(name.replace(" default/", " ", 1), manifest.source)
    return sources


def _line(event: dict[str, Any], level: str, sources: Mapping[str, str]) -> str:
    message = str(event.pop("event", ""))
    subject = event.pop("object", None)
    if subject is None and "podgroup" in event:
        subject = f"PodGroup {event.pop('podgroup')}"
    detail = event.pop("problem", None) or event.pop("error", None)
    if message == "device data problem" and "message" in event:
        message = str(event.pop("message"))  # the device families' own sentence
    if message == "hypernode tree" and detail:
        text = str(detail)
    elif message == "object ignored" and detail:
        text = f"ignored: {detail}"
    else:
        text = f"{message}: {detail}" if detail else message
    if subject is None:
        match = _SUBJECT.match(text)
        if match and match[1] in sources:
            subject, text = match[1], match[2]
    extras = ", ".join(f"{k}={v}" for k, v in event.items() if k not in _DROPPED)
    if extras:
        text = f"{text} ({extras})"
    where = [part for part in (sources.get(str(subject)) if subject else None, subject) if part]
    return f"{level}: {': '.join([*where, text])}"


def configure_warning_lines(sources: Mapping[str, str]) -> None:
    """Route structlog's warnings and errors to stderr as ``warning:`` / ``error:`` lines;
    quieter events are dropped (a one-shot command prints its result, not its progress)."""
    import logging

    import structlog

    _SAVED.append(structlog.get_config())

    def render(_: Any, method: str, event: MutableMapping[str, Any]) -> str:
        level = "error" if method in ("error", "critical", "exception") else "warning"
        return _line(dict(event), level, sources)

    structlog.configure(
        processors=[render],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.WriteLoggerFactory(cast(TextIO, _Stderr())),
        cache_logger_on_first_use=False,
    )


class _Stderr:
    """The current ``sys.stderr`` (tests swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def restore_logging() -> None:
    """Put back the structlog configuration :func:`configure_warning_lines` replaced (a
    command run in process, as tests do, leaves logging as it found it)."""
    import structlog

    while _SAVED:
        structlog.configure(**_SAVED.pop())
