"""sla: a job that has waited longer than its service-level waiting time jumps the line.

The waiting time comes from the PodGroup annotation ``volcano.sh/sla-waiting-time`` (read
first) or ``sla-waiting-time``, else from the plugin argument ``sla-waiting-time``; all are Go
durations (``90s``, ``1h30m``). Jobs with a waiting time are ordered before jobs without one,
earlier deadlines (creation + waiting time) first. Once a job's deadline has passed the plugin
votes Permit for enqueueing it (so it is admitted even if other votes in its tier abstain) and
for keeping its pipelined reservations; before that it abstains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import structlog

from scheduler.api.job import JobInfo
from scheduler.api.types import JobID, Vote
from scheduler.framework.arguments import arg, note, notes_field
from scheduler.framework.plugin import PluginBase
from scheduler.framework.session import Session

__all__ = ["SLA_ANNOTATIONS", "Sla", "SlaArgs", "parse_go_duration"]

log = structlog.get_logger("lahar.plugins.sla")

SLA_ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")
"""PodGroup annotations naming a job's waiting time, in the order they are read."""

_UNIT_SECONDS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}
_TERM = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Seconds in a Go ``time.ParseDuration`` string such as ``1h2m3.5s`` or ``-300ms``.

    Raises ValueError for anything Go rejects (a bare number other than 0, an unknown unit).
    """
    body = text
    sign = -1.0 if body.startswith("-") else 1.0
    if body[:1] in ("+", "-"):
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total, position = 0.0, 0
    while position < len(body):
        match = _TERM.match(body, position)
        if match is None:
            raise ValueError(
                f"invalid duration {text!r} (use a number with a unit, e.g. 90s, 10m, 1h30m)"
            )
        total += float(match[1]) * _UNIT_SECONDS[match[2]]
        position = match.end()
    return sign * total


def _positive_duration(text: str, *, what: str) -> float:
    seconds = parse_go_duration(text)
    if seconds <= 0:
        raise ValueError(f"{what} must be a positive duration, got {text!r}")
    return seconds


@dataclass(frozen=True, slots=True)
class SlaArgs:
    waiting_time: str = arg("sla-waiting-time", "")
    notes: tuple[str, ...] = notes_field()

    def __post_init__(self) -> None:
        # Volcano's OnSessionOpen logs a malformed or non-positive value and sets no waiting
        # time; so does Lahar, with a warning naming the value.
        if self.waiting_time:
            try:
                _positive_duration(self.waiting_time, what="sla-waiting-time")
            except ValueError:
                note(self, f"argument 'sla-waiting-time' must be a positive Go duration such as "
                           f"10m or 1h30m, got {self.waiting_time!r}; no waiting time is set, "
                           f"as in Volcano (PodGroup annotations still apply)")
                object.__setattr__(self, "waiting_time", "")


class Sla(PluginBase[SlaArgs]):
    NAME = "sla"
    Args = SlaArgs

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        default = (
            _positive_duration(self.args.waiting_time, what="sla-waiting-time")
            if self.args.waiting_time
            else None
        )
        self.waiting: dict[JobID, float | None] = {
            uid: self._job_waiting_time(job, default) for uid, job in session.jobs.items()
        }

    @staticmethod
    def _job_waiting_time(job: JobInfo, default: float | None) -> float | None:
        """The job's own waiting time, else the plugin's; a bad annotation is reported and
        skipped, as Volcano skips it (the next key, then the plugin argument, applies)."""
        for key in SLA_ANNOTATIONS:
            value = job.podgroup.annotations.get(key)
            if value is None:
                continue
            try:
                return _positive_duration(str(value), what=f"annotation {key}")
            except ValueError as exc:
                log.warning("PodGroup annotation ignored", podgroup=str(job.uid),
                            annotation=key, error=str(exc))
        return default

    def _deadline(self, job: JobInfo) -> float | None:
        waiting = self.waiting.get(job.uid)
        return None if waiting is None else job.creation + waiting

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        ld, rd = self._deadline(left), self._deadline(right)
        if ld is None or rd is None:
            return 0 if ld is None and rd is None else (1 if ld is None else -1)
        return -1 if ld < rd else (1 if ld > rd else 0)

    def _permit_when_overdue(self, job: JobInfo) -> Vote:
        deadline = self._deadline(job)
        if deadline is None or self.ssn.clock() < deadline:
            return Vote.ABSTAIN
        return Vote.PERMIT

    def job_enqueueable(self, job: JobInfo) -> Vote:
        return self._permit_when_overdue(job)

    def job_pipelined(self, job: JobInfo) -> Vote:
        return self._permit_when_overdue(job)
