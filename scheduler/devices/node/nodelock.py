"""The per-node device lock: one in-flight device pod per node.

Kubelet's device-plugin ``Allocate`` call does not say which pod it serves, so the node side
identifies the pod from annotations, which only works if a node has one device pod being
admitted at a time. The lock is a Node annotation holding the time it was taken (RFC 3339;
HAMi's profile appends ``,<namespace>,<name>``). It is taken with an optimistic update guarded
by the Node's ``resourceVersion``: after a conflict the node is read again and the lock checked
again, so two schedulers racing for a node can never both win. A lock younger than the TTL
(5 minutes) blocks the node; an older one is broken and retaken, and so is one stamped more
than the TTL in the future (a skewed clock must not block a node for ever). A value that is no
time at all is an error on that node, as in Volcano's ``LockNode``: it is reported with node
and annotation and never silently overwritten, since something we do not understand wrote it.
The node side releases the lock when it has handed out the devices.

HAMi's lock (the one recording an owner) follows HAMi's ``pkg/util/nodelock`` further: its
expiry comes from ``HAMI_NODELOCK_EXPIRE`` (a Go duration such as ``90s`` or ``5m``; unset or
unreadable: 5 minutes), and a lock whose owner pod no longer exists is broken at once, when
the access can look pods up (``get_pod``; the Kubernetes writer can, the embedded cluster
does not need to). Volcano's locks record no owner and keep the fixed 5 minutes.
"""

from __future__ import annotations

import copy
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import structlog

if TYPE_CHECKING:
    from tenacity import Retrying

__all__ = [
    "HAMI_EXPIRE_ENV",
    "LOCK_TTL",
    "NodeAccess",
    "NodeLockError",
    "NodeLocker",
    "format_lock",
    "hami_lock_expiry",
    "is_conflict",
    "lock_problem",
    "parse_go_duration",
    "parse_lock",
]

log = structlog.get_logger("lahar.nodelock")

LOCK_TTL = 300.0
HAMI_EXPIRE_ENV = "HAMI_NODELOCK_EXPIRE"
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0,
             "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Seconds of a Go ``time.ParseDuration`` string (``1h30m``, ``90s``, ``-1.5m``, ``0``);
    ValueError for anything Go refuses."""
    body = text
    sign = -1.0 if body.startswith("-") else 1.0
    body = body[1:] if body[:1] in "+-" else body
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total, position = 0.0, 0
    for part in _GO_PART.finditer(body):
        if part.start() != position:
            break
        total += float(part.group(1)) * _GO_UNITS[part.group(2)]
        position = part.end()
    if position != len(body):
        raise ValueError(f"invalid duration {text!r}: a number and a unit (ns, us, ms, s, m, "
                         f"h) each, as in 90s or 1h30m")
    return sign * total


def hami_lock_expiry(environ: Mapping[str, str] | None = None) -> float:
    """HAMi's lock expiry: ``HAMI_NODELOCK_EXPIRE`` when set and readable, else 5 minutes
    (HAMi ``pkg/util/nodelock/nodelock.go`` ``setupNodeLockTimeout`` logs the same error and
    keeps its default)."""
    text = (os.environ if environ is None else environ).get(HAMI_EXPIRE_ENV, "")
    if not text:
        return LOCK_TTL
    try:
        return parse_go_duration(text)
    except ValueError as exc:
        log.error("ignoring the node lock expiry", variable=HAMI_EXPIRE_ENV, error=str(exc),
                  default_seconds=LOCK_TTL)
        return LOCK_TTL


class NodeAccess(Protocol):
    """Read and replace Node objects (the cluster writer offers both)."""

    def get_node(self, name: str) -> Any: ...

    def replace_node(self, node: Any) -> Any: ...


class NodeLockError(Exception):
    """The lock could not be taken (held by another pod, or too many conflicts)."""


class _Conflict(Exception):
    pass


def format_lock(now: float, *, owner: str | None = None) -> str:
    """The lock value: RFC 3339 time, plus ``,namespace,name`` when an owner is given."""
    stamp = datetime.fromtimestamp(int(now), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp},{owner.replace('/', ',')}" if owner else stamp


def parse_lock(value: str) -> tuple[float | None, str]:
    """``(epoch seconds or None if unreadable, owner "ns/name" or "")``."""
    stamp, _, owner = value.partition(",")
    try:
        taken = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return None, owner.replace(",", "/")
    if taken.tzinfo is None:
        taken = taken.replace(tzinfo=UTC)
    return taken.timestamp(), owner.replace(",", "/")


def lock_problem(node_name: str, key: str, value: str | None, now: float, *,
                 owner: str | None = None, ttl: float = LOCK_TTL) -> str | None:
    """Why lock ``key`` holding ``value`` keeps a device pod (``owner``, when the lock records
    owners) off ``node_name`` now; None when the lock is absent, expired, or the pod's own."""
    if value is None:
        return None
    taken, holder = parse_lock(str(value))
    if taken is None:
        return (f"node {node_name} has an unreadable lock annotation {key}={str(value)!r} "
                f"(not an RFC 3339 time); remove it to place device pods on this node")
    if owner and holder == owner:
        return None
    if -ttl < now - taken < ttl:
        return (f"node {node_name} has been locked within {_span(ttl)} "
                f"(lock {key}={str(value)!r})")
    return None


def _span(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} minutes"
    return f"{seconds:g} seconds"


def is_conflict(exc: BaseException) -> bool:
    """A stale-``resourceVersion`` answer: HTTP 409 from the API server or the embedded cluster."""
    return getattr(exc, "status", None) == 409 or type(exc).__name__ == "ConflictError"


@dataclass(slots=True)
class NodeLocker:
    """Takes and releases node locks through a :class:`NodeAccess` (injectable clock/sleep)."""

    access: NodeAccess
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    ttl: float = LOCK_TTL
    """Expiry of a lock without an owner (Volcano's fixed 5 minutes)."""
    owner_ttl: float = field(default_factory=hami_lock_expiry)
    """Expiry of a lock with an owner (HAMi's, from ``HAMI_NODELOCK_EXPIRE`` at creation)."""
    attempts: int = 5
    interval: float = 0.1

    def _retrying(self) -> Retrying:
        # imported here: a scheduler without device families never locks a node
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

        return Retrying(stop=stop_after_attempt(self.attempts), wait=wait_fixed(self.interval),
                        sleep=self.sleep, retry=retry_if_exception_type(_Conflict), reraise=True)

    def acquire(self, node_name: str, key: str, *, owner: str | None = None) -> None:
        """Take lock ``key`` on ``node_name``; raises :class:`NodeLockError`."""
        try:
            for attempt in self._retrying():
                with attempt:
                    self._try_acquire(node_name, key, owner)
        except _Conflict:
            raise NodeLockError(f"could not lock node {node_name}: it kept changing during "
                                f"{self.attempts} attempts") from None

    def _try_acquire(self, node_name: str, key: str, owner: str | None) -> None:
        node = self._get(node_name)
        annotations = node.setdefault("metadata", {}).setdefault("annotations", {})
        current = annotations.get(key)
        now = self.clock()
        if current is not None:
            ttl = self.owner_ttl if owner else self.ttl
            problem = lock_problem(node_name, key, current, now, owner=owner, ttl=ttl)
            if problem is not None and owner and self._holder_gone(node_name, str(current)):
                log.info("breaking node lock: the pod holding it is gone", node=node_name,
                         key=key, value=current)
                problem = None
            if problem is not None:
                raise NodeLockError(problem)
            if not owner or parse_lock(str(current))[1] != owner:
                log.info("breaking node lock", node=node_name, key=key, value=current)
        annotations[key] = format_lock(now, owner=owner)
        self._replace(node)

    def _holder_gone(self, node_name: str, value: str) -> bool:
        """Whether the pod a readable lock names no longer exists (HAMi ``LockNode``'s
        dangling-lock check); False when the lock names none or pods cannot be looked up."""
        taken, holder = parse_lock(value)
        get_pod = getattr(self.access, "get_pod", None)
        if taken is None or "/" not in holder or get_pod is None:
            return False
        namespace, name = holder.split("/", 1)
        try:
            return get_pod(namespace=namespace, name=name) is None
        except Exception as exc:  # HAMi returns the error: the lock is neither taken nor broken
            raise NodeLockError(f"could not lock node {node_name}: could not read pod "
                                f"{holder}, which holds its lock: {exc}") from exc

    def release(self, node_name: str, key: str, *, owner: str | None = None) -> bool:
        """Remove lock ``key`` (only if ``owner`` holds it, when given); True if removed."""
        try:
            for attempt in self._retrying():
                with attempt:
                    return self._try_release(node_name, key, owner)
        except _Conflict:
            log.warning("could not release node lock", node=node_name, key=key)
        return False

    def _try_release(self, node_name: str, key: str, owner: str | None) -> bool:
        node = self._get(node_name)
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        current = annotations.get(key)
        if current is None:
            return False
        if owner and parse_lock(str(current))[1] not in ("", owner):
            return False
        del annotations[key]
        self._replace(node)
        return True

    def _get(self, node_name: str) -> dict[str, Any]:
        try:
            node = self.access.get_node(node_name)
        except Exception as exc:
            raise NodeLockError(f"could not read node {node_name}: {exc}") from exc
        if not isinstance(node, Mapping):
            raise NodeLockError(f"could not read node {node_name}: not an object")
        # A private copy: the access object may hand out its stored Node, and a change that
        # loses the resourceVersion race must leave no trace.
        return copy.deepcopy(dict(node))

    def _replace(self, node: dict[str, Any]) -> None:
        try:
            self.access.replace_node(node)
        except Exception as exc:
            if is_conflict(exc):
                raise _Conflict() from exc
            name = (node.get("metadata") or {}).get("name")
            raise NodeLockError(f"could not update node {name}: {exc}") from exc
