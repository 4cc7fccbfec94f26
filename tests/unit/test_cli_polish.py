"""The command line as a new user meets it: help for every option, a quick ``--version``,
refused nonsense flags, a totals line, Ctrl-C, progress only on a terminal, shell
completion, and tables that stay aligned and readable."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.api.resource import format_quantity
from scheduler.commands.cli import build_parser, main
from scheduler.commands.progress import Ticker
from scheduler.commands.report import render_table
from scheduler.commands.tables import display_width, table_lines
from tests.builders import make_node, simulate

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "conf" / "samples" / "quickstart.yaml"


def _lahar(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scheduler", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _options_without_help(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                missing += _options_without_help(child, f"{path} {name}")
        elif not action.help or action.help == argparse.SUPPRESS:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_of_every_command_has_help() -> None:
    assert _options_without_help(build_parser(), "lahar") == []


def test_version_and_help_import_no_command() -> None:
    """``lahar --version`` and ``lahar --help`` build the parser with each command's name and
    help only: neither the scheduler, nor numpy, nor the Kubernetes client is imported."""
    code = ("import sys\nfrom scheduler.commands.cli import main\n"
            "for argv in (['--version'], ['--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "heavy = ('numpy', 'scheduler.conf', 'plugins', 'kubernetes', 'structlog',\n"
            "         'scheduler.commands.simulate', 'scheduler.commands.replay')\n"
            "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert "simulate" in done.stdout and "replay" in done.stdout


def test_a_command_help_is_complete(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--max-cycles N" in out and "default: 100" in out and "130 interrupted" in out


@pytest.mark.parametrize("value", ["-1", "0", "many"])
def test_max_cycles_below_one_is_refused(value: str) -> None:
    done = _lahar("simulate", str(QUICKSTART), "--max-cycles", value)
    assert done.returncode == 2
    assert "--max-cycles" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_the_table_ends_with_a_totals_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(QUICKSTART)]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith("3 node(s); ") and " bound, " in last and " pending, " in last
    assert " evicted; " in last and "cycle(s), settled; " in last and last.endswith(" s.")


def _wait_for_cpu(pid: int, *, seconds: float, limit: float = 60.0) -> None:
    """Until process ``pid`` has used ``seconds`` of CPU (a loaded machine makes wall time
    a poor guide), read from /proc; a plain wait where there is no /proc."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        time.sleep(seconds * 3)
        return
    ticks = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return
        if (int(fields[11]) + int(fields[12])) / ticks >= seconds:
            return
        time.sleep(0.05)


def test_ctrl_c_stops_simulate_cleanly(tmp_path: Path) -> None:
    """SIGINT mid-run: exit 130, one line saying so, no traceback."""
    lines = []
    for n in range(400):
        lines.append(f"apiVersion: v1\nkind: Node\nmetadata: {{name: n{n}}}\n"
                     "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n---")
    for p in range(8000):
        lines.append(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p{p}}}\n"
                     "spec: {schedulerName: volcano, containers: [{name: c, resources: "
                     "{requests: {cpu: 100m}}}]}\n---")
    big = tmp_path / "big.yaml"
    big.write_text("\n".join(lines))
    child = subprocess.Popen([sys.executable, "-m", "scheduler", "simulate", str(big)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    _wait_for_cpu(child.pid, seconds=2.0)  # past the imports, into loading or cycles
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    if child.returncode == 0:  # a fast machine finished first: nothing to interrupt
        pytest.skip("the run ended before the signal")
    assert child.returncode == 130, err
    assert "interrupted (Ctrl-C)" in err
    assert "Traceback" not in out + err


def test_progress_is_silent_off_a_terminal() -> None:
    stream = io.StringIO()
    with Ticker(stream, prefix="lahar simulate", delay=0.0, interval=0.01) as ticker:
        ticker.phase = "cycle 1"
        time.sleep(0.05)
    assert stream.getvalue() == ""


def test_progress_on_a_terminal_draws_then_erases_its_line() -> None:
    stream = io.StringIO()
    with Ticker(stream, prefix="lahar simulate", delay=0.0, interval=0.01,
                force=True) as ticker:
        ticker.phase = "cycle 7"
        time.sleep(0.1)
    text = stream.getvalue()
    assert "\rlahar simulate: cycle 7, " in text
    assert text.endswith("\r")  # the line is blanked and the cursor back at its start


def test_progress_waits_for_its_delay() -> None:
    stream = io.StringIO()
    with Ticker(stream, prefix="x", delay=5.0, force=True):
        time.sleep(0.05)
    assert stream.getvalue() == ""


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts_name_the_commands(shell: str) -> None:
    done = _lahar("completion", shell)
    assert done.returncode == 0, done.stderr
    assert "lahar" in done.stdout and "simulate" in done.stdout and "--max-cycles" in done.stdout


def test_wide_characters_keep_the_table_aligned() -> None:
    assert display_width("abc") == 3
    assert display_width("队列") == 4
    assert display_width("e\u0301") == 1  # a combining accent takes no column
    lines = table_lines([["NAME", "REASON", "FOR"], ["队列-a", "x", "y"], ["ab", "候补理由", "z"]])
    for column in ("REASON", "FOR"):
        start = display_width(lines[0][: lines[0].index(column)])
        for line in lines[1:]:
            cells = line.split()
            cell = cells[1] if column == "REASON" else cells[2]
            assert display_width(line[: line.index(cell)]) == start


def test_huge_quantities_are_quantities_not_float_noise() -> None:
    assert format_quantity("cpu", 1e26) == "1e23"
    assert format_quantity("cpu", 1.5e21) == "1.5e18"
    assert format_quantity("memory", 1e30) == "1e30"
    assert format_quantity("cpu", 2500) == "2500m"
    assert format_quantity("memory", 2**31) == "2Gi"
    run = simulate([make_node("big", cpu="100000000000000000000000")])
    table = render_table(run.cluster.all_objects(), scheduler_names=("volcano",))
    assert "0/1e23 (0%)" in table and "4764729344" not in table


def test_a_dash_reads_manifests_from_stdin() -> None:
    done = subprocess.run([sys.executable, "-m", "scheduler", "simulate", "-"],
                          input=QUICKSTART.read_text(), capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "3 node(s); 7 pod(s)" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "scheduler", "simulate", "-"],
                         input="apiVersion: v1\nkind: Node\nmetadata: {name: My Node}\n",
                         capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: <stdin>#1: Node My Node: field metadata.name")


def test_inspect_devices_without_devices_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "devices", str(QUICKSTART)]) == 0
    assert capsys.readouterr().out == (
        "No fine-grained devices found (no Koordinator Device object lists any).\n")


def test_null_annotations_and_built_in_priority_classes(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``annotations:`` with no value is valid YAML and valid Kubernetes; the two built-in
    PriorityClasses exist on every API server, with their values, without a manifest."""
    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '10'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
        "spec:\n  schedulerName: volcano\n  priorityClassName: system-node-critical\n"
        "  containers: [{name: c, resources: {requests: {cpu: '1'}}}]\n")
    assert main(["simulate", str(path), "-o", "json"]) == 0
    pod = next(i for i in json.loads(capsys.readouterr().out)["items"] if i["kind"] == "Pod")
    assert pod["spec"]["nodeName"] == "n1" and pod["spec"]["priority"] == 2000001000
