"""Progress on stderr for commands whose work may take a while, only where a person watches.

A :class:`Ticker` says nothing unless stderr is a terminal and the work has already taken
``delay`` seconds; then a background thread redraws one status line (``lahar simulate:
cycle 12, 3.4 s``) a few times a second, and the line is erased when the work ends, so
nothing of it stays in the terminal or reaches a file or a pipe.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import TextIO

__all__ = ["Ticker"]


class Ticker:
    """A status line on ``stream`` while the work runs; set :attr:`phase` as it goes."""

    def __init__(self, stream: TextIO, *, prefix: str, delay: float = 1.0,
                 interval: float = 0.25, force: bool | None = None) -> None:
        self.stream = stream
        self.prefix = prefix
        self.delay = delay
        self.interval = interval
        self.phase = ""
        isatty = getattr(stream, "isatty", None)
        self.enabled = force if force is not None else bool(isatty and isatty())
        self._started = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = 0

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._started

    def __enter__(self) -> Ticker:
        self._started = time.perf_counter()
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="lahar-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
            self._drawn = 0

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            line = f"{self.prefix}: {self.phase}, {self.elapsed:.1f} s"
            pad = max(self._drawn - len(line), 0)
            self.stream.write("\r" + line + " " * pad)
            self.stream.flush()
            self._drawn = len(line)
            self._stop.wait(self.interval)
