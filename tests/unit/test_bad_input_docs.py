"""What the docs tell a new user holds: install lines work from the clone, the node agent's
flag table lists every flag, no doc says the node side is missing or sends users to test data,
``device report`` needs no flag named like an option, and skipped tests say why (``-rs``)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from scheduler.commands.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _subparser(*words: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def test_the_node_agent_flag_table_lists_where_the_cluster_and_sysfs_are() -> None:
    text = (REPO / "docs/node-agent.md").read_text()
    table = "\n".join(line for line in text.splitlines() if line.startswith("| `--"))
    flags = {o for a in _subparser("node-agent")._actions for o in a.option_strings}
    for flag in ("--kubeconfig", "--context", "--master", "--sysfs"):
        assert flag in flags and f"`{flag}`" in table, flag


def test_no_doc_installs_a_package_that_is_not_published() -> None:
    for doc in DOCS:
        assert not re.search(r"pip install '?lahar\[", doc.read_text()), doc


def test_docs_do_not_call_the_node_side_missing_nor_run_test_data() -> None:
    assert "not implemented" not in (REPO / "docs/devices.md").read_text()
    queues = (REPO / "docs/queues.md").read_text()
    assert "tests/data" not in queues
    for conf in re.findall(r"--conf (\S+)", queues):
        assert (REPO / conf).is_file(), conf


def test_device_report_needs_no_dry_run_flag() -> None:
    result = subprocess.run([sys.executable, "-m", "scheduler", "device", "report", "--help"],
                            cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    assert "usage: lahar device report [-h] [--dry-run]" in " ".join(result.stdout.split())


def test_pytest_reports_why_tests_were_skipped() -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "-rs" in options["ini_options"]["addopts"].split()
