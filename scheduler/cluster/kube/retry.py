"""Which API failures are worth another attempt, and the retry policy every write uses.

Transport failures (status 0), throttling (429) and server errors (5xx) are transient; every other
status (400, 403, 404, 409 conflict, 410 gone, 422 invalid) is an answer and retrying it would only
repeat the same refusal. Waits use full jitter (``wait_random_exponential``) so that many replicas
or bind workers hitting the same failure do not retry in lock step, and a ``Retry-After`` header on
a 429 is honoured up to the policy's cap.

tenacity is imported at the first failure worth retrying: the first attempt runs bare, and a
start whose requests all succeed (nearly every one) does not pay for the import.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from scheduler.cluster.kube.client import ApiError

if TYPE_CHECKING:
    import tenacity

__all__ = [
    "RETRYABLE_STATUSES",
    "TRANSPORT_ERRORS",
    "RetryPolicy",
    "is_retryable",
    "retry_after_seconds",
    "status_of",
]

T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({0, 429})
"""Statuses retried besides every 5xx (0 = the request never got an HTTP answer)."""

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (OSError,)
"""Exceptions meaning the request did not complete (refused, reset, timed out, protocol error)."""

_log = logging.getLogger(__name__)


def status_of(exc: BaseException) -> int | None:
    """HTTP status carried by ``exc``: 0 for transport errors, None when it is no API failure."""
    if isinstance(exc, ApiError):
        return int(exc.status or 0)
    if isinstance(exc, TRANSPORT_ERRORS):
        return 0
    return None


def is_retryable(exc: BaseException) -> bool:
    """True for transport errors, 429 and 5xx answers."""
    status = status_of(exc)
    if status is None:
        return False
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


def retry_after_seconds(exc: BaseException | None) -> float:
    """The ``Retry-After`` delay (seconds) of a 429/503 answer, 0 when absent or unparsable."""
    if not isinstance(exc, ApiError) or not exc.headers:
        return 0.0
    value = exc.headers.get("Retry-After")
    try:
        return max(float(value), 0.0) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries with full jitter; ``call`` re-raises the last error unchanged."""

    attempts: int = 5
    initial_wait: float = 0.1
    max_wait: float = 5.0
    retry_throttled: bool = True
    """Whether 429 is retried; evictions turn it off, their 429 means a PodDisruptionBudget."""
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        import tenacity

        jitter = tenacity.wait_random_exponential(multiplier=self.initial_wait,
                                                  max=self.max_wait)(state)
        outcome = state.outcome
        error = outcome.exception() if outcome is not None and outcome.failed else None
        return min(max(jitter, retry_after_seconds(error)), self.max_wait)

    def _before_sleep(self, state: tenacity.RetryCallState) -> None:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None and outcome.failed else None
        _log.info("retrying %s after %s (attempt %d of %d)",
                  getattr(state.fn, "__name__", "call"), _describe(error),
                  state.attempt_number, self.attempts)

    def should_retry(self, error: BaseException) -> bool:
        if not self.retry_throttled and status_of(error) == 429:
            return False
        return is_retryable(error)

    def retrying(self) -> tenacity.Retrying:
        """A fresh ``Retrying`` (they keep per-call statistics, so one per call is safest)."""
        import tenacity

        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(max(self.attempts, 1)),
            wait=self._wait,
            retry=tenacity.retry_if_exception(self.should_retry),
            before_sleep=self._before_sleep,
            sleep=self.sleep,
            reraise=True,
        )

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` until it succeeds, fails with a non-retryable error, or attempts run out.

        The first attempt runs bare: nearly every write succeeds at once, and a ``Retrying``
        costs 50 µs to build and enter. Its failure is handed to one as if it had made it.
        """
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            if self.attempts <= 1 or not self.should_retry(error):
                raise
            first_failure = error
        replayed = False

        @functools.wraps(fn)
        def attempt(*args: Any, **kwargs: Any) -> T:
            nonlocal replayed
            if not replayed:
                replayed = True
                raise first_failure
            return fn(*args, **kwargs)

        return self.retrying()(attempt, *args, **kwargs)


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "no error"
    status = status_of(error)
    if status:
        return f"HTTP {status}"
    return f"{type(error).__name__}: {error}"
