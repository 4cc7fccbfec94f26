"""The write retry policy: a bare first attempt, then tenacity with the same waits and count."""

from __future__ import annotations

import pytest

from scheduler.cluster.kube.client import ApiError
from scheduler.cluster.kube.retry import RetryPolicy


class Flaky:
    """Fails with the given errors in turn, then answers ``done``."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self, value: str) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return value


def policy(sleeps: list[float], attempts: int = 4) -> RetryPolicy:
    return RetryPolicy(attempts=attempts, initial_wait=0.001, max_wait=0.01, sleep=sleeps.append)


def test_a_success_is_one_call_and_no_sleep() -> None:
    sleeps: list[float] = []
    fn = Flaky()
    assert policy(sleeps).call(fn, "done") == "done"
    assert (fn.calls, sleeps) == (1, [])


@pytest.mark.parametrize("failures", [1, 2, 3])
def test_transient_failures_are_retried_with_one_sleep_between_attempts(failures: int) -> None:
    sleeps: list[float] = []
    fn = Flaky(*[ConnectionResetError("reset")] * failures)
    assert policy(sleeps).call(fn, "done") == "done"
    assert fn.calls == failures + 1
    assert len(sleeps) == failures


def test_the_attempts_are_counted_from_the_bare_first_one() -> None:
    sleeps: list[float] = []
    fn = Flaky(*[ApiError(503)] * 5)
    with pytest.raises(ApiError) as caught:
        policy(sleeps, attempts=3).call(fn, "done")
    assert caught.value.status == 503
    assert (fn.calls, len(sleeps)) == (3, 2)


def test_an_answer_is_not_retried_and_one_attempt_means_one() -> None:
    sleeps: list[float] = []
    conflict = Flaky(ApiError(409))
    with pytest.raises(ApiError):
        policy(sleeps).call(conflict, "done")
    transient = Flaky(ConnectionResetError("reset"))
    with pytest.raises(ConnectionResetError):
        policy(sleeps, attempts=1).call(transient, "done")
    assert (conflict.calls, transient.calls, sleeps) == (1, 1, [])
