"""``python -m scheduler replay`` as a user runs it, in a subprocess: bad flags, a trace that is
not there, and Ctrl-C end with an ``error: …`` line and an exit status, never a traceback."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.replay.sources import TRACES_ENV
from tests.replay.data import REPO_ROOT


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != TRACES_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def lahar_replay(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scheduler", "replay", *args], cwd=cwd,
                          env=_environment(), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("flags", "message"), [
    pytest.param(["--limit", "0"], "error: --limit: must be at least 1 pod, got 0", id="limit-0"),
    pytest.param(["--limit", "-5"], "error: --limit: must be at least 1 pod, got -5",
                 id="limit-negative"),
    pytest.param(["--tune", "-1"], "error: --tune: must be above 0", id="tune-negative"),
    pytest.param(["--tune", "0"], "error: --tune: must be above 0", id="tune-0"),
    pytest.param(["--out", "a-file"], "error: --out a-file: a file is there; name a folder",
                 id="out-is-a-file"),
])
def test_refused_flags_exit_2_before_any_run(tmp_path: Path, flags: list[str],
                                             message: str) -> None:
    (tmp_path / "a-file").write_text("mine\n")
    argv = ["--trace", "sample", "--out", "out", "--jobs", "1"]
    for i in range(0, len(flags), 2):
        if flags[i] in argv:
            argv[argv.index(flags[i]) + 1] = flags[i + 1]
        else:
            argv += flags[i:i + 2]
    done = lahar_replay(*argv, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(message) and len(done.stderr.splitlines()) == 1
    assert "Traceback" not in done.stdout + done.stderr
    assert (tmp_path / "a-file").read_text() == "mine\n"
    assert not (tmp_path / "out").exists()


def test_a_trace_that_is_not_there_says_where_it_looked_and_how_to_get_it(
        tmp_path: Path) -> None:
    here = tmp_path / "work"
    here.mkdir()
    done = lahar_replay("--trace", "default", cwd=here)
    assert done.returncode == 2
    assert done.stderr.startswith("error: trace 'default' not found; looked, in order:\n"
                                  "  1. --traces-dir: not given\n"
                                  f"  2. ${TRACES_ENV}: not set\n"
                                  "  3. ../shared/traces (default, here ")
    for needed in ("clone https://github.com/alibaba/clusterdata", "cluster-trace-gpu-v2023",
                   "--traces-dir", TRACES_ENV, "`--trace sample` runs without it"):
        assert needed in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc for the workers")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_stops_cleanly_ends_the_workers_and_says_the_output_is_partial(
        tmp_path: Path, jobs: str) -> None:
    # Short runs, more of them than finish before the signal.
    command = [sys.executable, "-m", "scheduler", "replay", "--trace", "sample", "--limit",
               "50", "--seeds", "42-81", "--jobs", jobs, "--out", "out"]
    process = subprocess.Popen(
        command, cwd=tmp_path, env=_environment(), text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # A shell starts background commands with Ctrl-C ignored; a user's terminal does not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 120
        ready: list[object] = []
        while not ready and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stderr], [], [], 1.0)
        first = process.stderr.readline()
        assert first.startswith("replay: 1/40 runs done"), first
        workers = _children(process.pid)
        assert len(workers) == (0 if jobs == "1" else 2)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert "Traceback" not in stdout + stderr
    last = stderr.splitlines()[-1]
    assert last.startswith("error: interrupted (Ctrl-C) after ")
    assert last.endswith(" of 40 runs; the output in out is partial "
                         "(summary.csv and replay.png not written)")
    assert not (tmp_path / "out" / "summary.csv").exists()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if _alive(pid)]
