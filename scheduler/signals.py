"""Signals that set events, without a Python signal handler touching a lock.

A handler runs in the main thread between two bytecodes, possibly while that thread is inside
``Event.wait`` holding the event's own lock: a handler that calls ``Event.set`` there waits
for that lock forever, and ``lahar run`` would hang on SIGTERM instead of sending its queued
binds. So the Python handlers do nothing; the interpreter's C-level handler writes each
signal's number to a pipe (:func:`signal.set_wakeup_fd`), and a thread of its own reads the
numbers and sets the events. A pipe, not a socket pair: a Unix socket accounts each one-byte
write as a whole buffer and fills after a few hundred signals, while a pipe holds 65,536.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Mapping

__all__ = ["set_on_signals"]


def _ignore(signum: int, frame: object) -> None:
    """Replaces the default action (end the process) of the signals relayed."""


def set_on_signals(events: Mapping[signal.Signals, threading.Event]) -> bool:
    """Set ``events[signum]`` whenever that signal arrives; False (nothing installed) off the
    main thread, where Python cannot install handlers."""
    if threading.current_thread() is not threading.main_thread():
        return False
    by_number = {int(signum): event for signum, event in events.items()}
    reader, writer = os.pipe()
    os.set_blocking(writer, False)
    signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    for signum in events:
        signal.signal(signum, _ignore)

    def relay() -> None:
        while True:
            try:
                received = os.read(reader, 64)
            except OSError:
                return
            if not received:
                return
            for signum in received:
                event = by_number.get(signum)
                if event is not None:
                    event.set()

    threading.Thread(target=relay, daemon=True, name="signals").start()
    return True
