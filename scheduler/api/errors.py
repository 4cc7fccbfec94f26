"""Errors that name the Kubernetes object and field at fault."""

from __future__ import annotations

__all__ = ["ObjectError"]


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
        where = f"{namespace}/{name}" if namespace else name
        super().__init__(f"{kind} {where}: field {field}: {problem}")
