"""SIGTERM for the benches: unwind like Ctrl-C.

A bench killed by ``timeout`` or a CI runner gets SIGTERM, whose default action ends the process
at once: its ``finally`` blocks never run, so the schedulers, agents and API server doubles it
started keep running (and load every later run on the same server), and a bench that paused etcd
leaves it paused. With :func:`unwind_on_sigterm` the signal raises ``SystemExit`` in the main
thread instead, and the bench cleans up as it does after Ctrl-C.
"""

from __future__ import annotations

import signal
import sys

__all__ = ["unwind_on_sigterm"]


def unwind_on_sigterm() -> None:
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
