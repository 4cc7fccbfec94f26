"""Errors that name the Kubernetes object and field at fault."""

from __future__ import annotations

__all__ = ["ObjectError", "shown"]

_SHOWN_MAX = 64


def shown(value: object) -> str:
    """``value`` quoted for a message, cut short: a hostile name can be megabytes long."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= _SHOWN_MAX:
        return repr(text)
    return f"{text[:_SHOWN_MAX - 16]!r}... ({len(text)} characters)"


class ObjectError(ValueError):
    """A malformed object: ``<Kind> <namespace>/<name>: field <path>: <problem>``."""

    def __init__(
        self, *, kind: str, name: str, field: str, problem: str, namespace: str = ""
    ) -> None:
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.field = field
        self.problem = problem
        short = name if len(name) <= _SHOWN_MAX else shown(name)
        where = f"{namespace}/{short}" if namespace else short
        super().__init__(f"{kind} {where}: field {field}: {problem}")
