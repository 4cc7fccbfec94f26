"""When each step of ``lahar run``'s start happened, counted from the process's own start.

One log line after the first scheduling cycle (``start-up``) names the seconds from the
process start (the kernel's record of it, so the interpreter's own start and every import
count) to: the API server answering, the first LISTs sent, the caches synced, the first cycle
done; and the process's CPU seconds by then (on a busy host the wall time stretches with the
CPU share, the CPU does not). That is what a restart costs before binds resume, and which part
of it is imports, network or the first cycle.
"""

from __future__ import annotations

import os
import time

import structlog

__all__ = ["StartupTimes", "process_age"]

log = structlog.get_logger("lahar.run")


def process_age() -> float | None:
    """Seconds since this process started, from ``/proc`` (None where there is none)."""
    try:
        with open("/proc/self/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as uptime:
            now = float(uptime.read().split()[0])
        return max(0.0, now - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


class StartupTimes:
    """Marks of the start's steps; :meth:`report` logs them once."""

    def __init__(self) -> None:
        age = process_age()
        # The process start on the monotonic clock (now, where /proc is missing).
        self.origin = time.monotonic() - (age or 0.0)
        self.known = age is not None
        self.marks: dict[str, float] = {}
        self.reported = False

    def mark(self, step: str, *, at: float | None = None) -> None:
        """``step`` happened now (or ``at``, a ``time.monotonic`` reading)."""
        when = time.monotonic() if at is None else at
        self.marks.setdefault(step, round(when - self.origin, 3))

    def report(self) -> None:
        if self.reported:
            return
        self.reported = True
        log.info("start-up", seconds_since_process_start=self.marks,
                 cpu_seconds=round(time.process_time(), 3),
                 **({} if self.known else {"origin": "first mark (no /proc)"}))
