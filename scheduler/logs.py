"""Logging set-up: one structured line per event, JSON in a cluster, key=value at a terminal.

Both structlog loggers (the scheduler core) and standard-library loggers (the Kubernetes client,
urllib3, the cluster adapter) go through the same processors and renderer, so a log collector sees
a single format. ``-v`` follows klog's verbosity habits: 0–3 log at INFO, 4 and above at DEBUG;
the HTTP client libraries stay at WARNING unless ``-v`` is 6 or more.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal, TextIO

import structlog

__all__ = ["LogFormat", "configure_logging", "level_for_verbosity"]

LogFormat = Literal["auto", "json", "console"]
_NOISY = ("urllib3", "kubernetes")


def level_for_verbosity(verbosity: int) -> int:
    """klog ``-v`` level → logging level."""
    return logging.DEBUG if verbosity >= 4 else logging.INFO


def _wants_json(fmt: LogFormat, stream: TextIO) -> bool:
    if fmt != "auto":
        return fmt == "json"
    isatty = getattr(stream, "isatty", None)
    return not (callable(isatty) and isatty())


class _CurrentStderr:
    """Whatever ``sys.stderr`` is at write time (it may be swapped after configuration, e.g. by
    a test runner capturing output, and the swapped-out stream closed)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure_logging(*, verbosity: int = 0, fmt: LogFormat = "auto",
                      stream: TextIO | None = None) -> None:
    """(Re)configure structlog and the root logger to write to ``stream`` (stderr by default)."""
    out: Any = stream if stream is not None else _CurrentStderr()
    level = level_for_verbosity(verbosity)
    as_json = _wants_json(fmt, out)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: Any
    if as_json:
        shared.append(structlog.processors.dict_tracebacks)
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.WriteLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in _NOISY:
        logging.getLogger(name).setLevel(logging.DEBUG if verbosity >= 6 else logging.WARNING)
