"""``lahar node-agent`` fails fast and clearly: what is wrong with a flag, a file it names or
the kubeconfig is an ``error:`` line naming it, exit 2, before anything starts; while
kubelet.sock is absent it says so once; an unreachable API server is named; Ctrl-C ends it
(and ``lahar run``) with status 130 and a line, as ``lahar replay`` does.

Peers: the device plugins of Volcano (volcano-sh/devices) and HAMi fail at start on a bad
flag or kubeconfig (``klog.Fatalf``); kubelet's ``Registration`` needs
``DIR/kubelet.sock`` (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/constants.go).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.commands.cli import build_parser
from scheduler.commands.nodeagent import check_node_agent_args

REPO = Path(__file__).resolve().parents[2]
BAD = "tests/data/bad"
KUBECONFIG = f"{BAD}/kubeconfig-refused.yaml"


def _problem(*flags: str, kubelet_dir: str) -> str | None:
    args = build_parser().parse_args(
        ["node-agent", "--kubeconfig", KUBECONFIG, "--kubelet-dir", kubelet_dir, *flags])
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return check_node_agent_args(args)
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize(("flags", "message"), [
    (("--fake-gpus", "-1"), "--fake-gpus: must be at least 0, got -1"),
    (("--split-count", "0"), "--split-count: must be at least 1, got 0"),
    (("--health-interval", "0"), "--health-interval: must be a number of seconds above 0, "
                                 "got 0"),
    (("--report-period", "-5"), "--report-period: must be a number of seconds above 0, got -5"),
    (("--fake-gpus", "1", "--fake-gpu-memory", "banana"),
     "--fake-gpu-memory: 'banana' is not a valid quantity"),
    (("--fake-gpus", "1", "--fake-gpu-memory", "0"), "--fake-gpu-memory: must be above 0"),
    (("--fake-inventory", "no/such.yaml"), "--fake-inventory no/such.yaml: no such file"),
    (("--kubeconfig", "no/such/kubeconfig"), "kubeconfig no/such/kubeconfig: cannot be read: "
                                             "No such file or directory"),
    (("--context", "nope"), f'kubeconfig {KUBECONFIG}: context "nope" not found'),
])
def test_a_bad_flag_or_file_is_named_before_start(
        flags: tuple[str, ...], message: str, tmp_path: Path) -> None:
    problem = _problem(*flags, kubelet_dir=str(tmp_path))
    assert problem is not None and problem.startswith(message), problem


def test_a_missing_kubelet_dir_is_named(tmp_path: Path) -> None:
    assert _problem(kubelet_dir=str(tmp_path / "none")) == (
        f"--kubelet-dir {tmp_path / 'none'}: no such directory (kubelet's device plugin "
        "directory, where kubelet.sock is)")
    assert _problem("--fake-gpus", "2", kubelet_dir=str(tmp_path)) is None


def _agent(*flags: str, kubelet_dir: Path) -> list[str]:
    return [sys.executable, "-m", "scheduler", "node-agent", "--node-name", "n1",
            "--kubeconfig", KUBECONFIG, "--kubelet-dir", str(kubelet_dir), *flags]


@pytest.mark.parametrize(("flags", "message"), [
    (("--fake-gpus", "-1"), "error: --fake-gpus: must be at least 0, got -1"),
    (("--kubeconfig", "missing.yaml"), "error: kubeconfig missing.yaml: cannot be read"),
])
def test_the_command_exits_2_with_one_error_line(
        flags: tuple[str, ...], message: str, tmp_path: Path) -> None:
    result = subprocess.run(_agent(*flags, kubelet_dir=tmp_path), cwd=REPO, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith(message) and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(("name", "message"), [
    ("inventory-negative.yaml", "gpus[0]: memory must not be negative"),
    ("inventory-malformed.yaml", "field numa must be an integer"),
])
def test_a_bad_fake_inventory_names_the_file(name: str, message: str, tmp_path: Path) -> None:
    pytest.importorskip("grpc")
    result = subprocess.run(
        _agent("--gpu-share", "--fake-inventory", f"{BAD}/{name}", kubelet_dir=tmp_path),
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: --fake-inventory {BAD}/{name}: ")
    assert message in result.stderr


def _interrupt_after(command: list[str], seen: str) -> tuple[int, str]:
    """Run ``command``, send SIGINT once ``seen`` is on its stderr; its status and stderr."""
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True,
                               stdout=subprocess.DEVNULL)
    assert process.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    try:
        for line in process.stderr:
            lines.append(line)
            if seen in line or time.monotonic() > deadline:
                break
        process.send_signal(signal.SIGINT)
        lines.extend(process.stderr)
        return process.wait(timeout=30), "".join(lines)
    finally:
        if process.poll() is None:
            process.kill()


def test_node_agent_waits_for_kubelet_once_names_the_api_server_and_exits_130(
        tmp_path: Path) -> None:
    pytest.importorskip("grpc")
    status, stderr = _interrupt_after(
        _agent("--gpu-share", "--fake-gpus", "1", "--report-period", "0.2",
               kubelet_dir=tmp_path), "report failed")
    assert stderr.count("waiting for kubelet") == 1
    assert "API server https://127.0.0.1:1: " in stderr
    assert status == 130
    assert stderr.rstrip().endswith("lahar node-agent: interrupted (Ctrl-C); stopped.")


def test_lahar_run_exits_130_on_ctrl_c() -> None:
    status, stderr = _interrupt_after(
        [sys.executable, "-m", "scheduler", "run", "--kubeconfig", KUBECONFIG],
        "unreachable")
    assert status == 130
    assert stderr.rstrip().endswith("lahar run: interrupted (Ctrl-C); stopped.")
