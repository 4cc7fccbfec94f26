"""Signals set events from a thread of their own: a burst of signals while the main thread
waits on the very event (where a handler calling ``Event.set`` can deadlock) never hangs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child_says(code: str) -> str:
    """What a fresh interpreter running ``code`` prints (it must end within a minute)."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_signal_while_the_main_thread_holds_the_events_lock_never_hangs() -> None:
    """``Event.wait`` holds the event's lock for a few bytecodes after each wake-up; a signal
    handled there by a handler that calls ``Event.set`` waits on that lock forever (seen as
    ``lahar run`` hanging on SIGTERM). Here the main thread holds the lock on purpose while
    the signal is handled."""
    code = textwrap.dedent("""
        import os, signal, threading, time
        from scheduler.signals import set_on_signals
        stop = threading.Event()
        assert set_on_signals({signal.SIGTERM: stop})
        with stop._cond:  # as Event.wait between its wake-up and its return
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the Python-level handler runs in here
        print("stopped" if stop.wait(5) else "not stopped")
    """)
    assert child_says(code) == "stopped"


def test_signals_in_a_burst_all_arrive() -> None:
    code = textwrap.dedent("""
        import os, signal, threading
        from scheduler.signals import set_on_signals
        stop, poke = threading.Event(), threading.Event()
        assert set_on_signals({signal.SIGTERM: stop, signal.SIGUSR1: poke})
        for _ in range(1000):
            os.kill(os.getpid(), signal.SIGUSR1)
        assert poke.wait(5)
        os.kill(os.getpid(), signal.SIGTERM)
        print("stopped" if stop.wait(5) else "not stopped")
    """)
    assert child_says(code) == "stopped"


def test_off_the_main_thread_nothing_is_installed() -> None:
    code = textwrap.dedent("""
        import signal, threading
        from scheduler.signals import set_on_signals
        out = []
        t = threading.Thread(target=lambda: out.append(
            set_on_signals({signal.SIGTERM: threading.Event()})))
        t.start(); t.join()
        print(out[0], signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    """)
    assert child_says(code) == "False True"
