"""``$KUBECONFIG`` and ``--context`` are read the same way by ``lahar run``, ``lahar inspect``
and ``lahar node-agent`` (kubectl's rules: the flag, else the in-cluster service account,
else ``$KUBECONFIG``'s first file, else ~/.kube/config; k8s.io/client-go/tools/clientcmd
``NewDefaultClientConfigLoadingRules``); ``lahar simulate`` reads a directory as
``kubectl apply -f DIR`` does (k8s.io/cli-runtime/pkg/resource ``FileVisitorForSTDIN`` /
``ExpandPathsToFileVisitors``: the .json, .yaml and .yml files of the directory).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.commands.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
KUBECONFIG = str(REPO / "tests/data/bad/kubeconfig-refused.yaml")


def _lahar(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    result = subprocess.run([sys.executable, "-m", "scheduler", *args], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=False,
                            env={**environ, **(env or {})}, stdin=subprocess.DEVNULL)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.mark.parametrize("command", [("run",), ("node-agent",), ("inspect", "gpushare"),
                                     ("inspect", "devices"), ("inspect", "topology")])
def test_every_cluster_command_has_kubeconfig_and_context_with_the_same_help(
        command: tuple[str, ...]) -> None:
    parser = build_parser()
    for word in command:
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = sub.choices[word]  # type: ignore[attr-defined]
    helps = {o: a.help for a in parser._actions for o in a.option_strings}
    assert "$KUBECONFIG's first file, else ~/.kube/config" in str(helps["--kubeconfig"])
    assert helps["--context"] == "the kubeconfig context to use (default: its current-context)"


def test_inspect_without_files_reads_the_cluster_of_kubeconfig_env() -> None:
    result = _lahar("inspect", "gpushare", env={"KUBECONFIG": KUBECONFIG})
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot read the cluster: ")
    assert "127.0.0.1" in result.stderr or "refused" in result.stderr


def test_inspect_names_a_missing_context() -> None:
    result = _lahar("inspect", "topology", "--context", "nope", env={"KUBECONFIG": KUBECONFIG})
    assert result.returncode == 2
    assert f'kubeconfig {KUBECONFIG}: context "nope" not found' in result.stderr


def test_simulate_reads_a_directory_as_kubectl_does(tmp_path: Path) -> None:
    shutil.copy(REPO / "conf/samples/quickstart.yaml", tmp_path / "a.yaml")
    (tmp_path / "notes.txt").write_text("not a manifest")
    by_dir = _lahar("simulate", "-f", str(tmp_path))
    by_file = _lahar("simulate", "conf/samples/quickstart.yaml")
    assert by_dir.returncode == 0, by_dir.stderr
    assert by_dir.stdout.splitlines()[:-1] == by_file.stdout.splitlines()[:-1]


def test_simulate_help_says_dash_is_standard_input() -> None:
    assert "or - for standard input" in " ".join(_lahar("simulate", "--help").stdout.split())
