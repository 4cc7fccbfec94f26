"""A convenience base for plugins: holds typed args, no-op session hooks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = ["NoArgs", "PluginBase"]


@dataclass(frozen=True, slots=True)
class NoArgs:
    """For plugins that take no arguments."""


A = TypeVar("A")


class PluginBase(Generic[A]):
    NAME: ClassVar[str] = ""
    Args: ClassVar[type] = NoArgs

    def __init__(self, args: A) -> None:
        self.args = args
        self.session: Session | None = None

    def on_session_open(self, session: Session) -> None:
        self.session = session

    def on_session_close(self, session: Session) -> None:
        return None

    @property
    def ssn(self) -> Session:
        assert self.session is not None, "plugin used outside a session"
        return self.session
