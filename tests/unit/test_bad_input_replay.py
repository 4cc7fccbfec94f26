"""``lahar replay`` reads a trace CSV saved by a spreadsheet (a UTF-8 byte order mark, CRLF
line ends), names a binary trace instead of a decoder's traceback, and ends with its summary
table on stdout; ``lahar inspect`` says when a JSON file is not a Kubernetes object or List.

Python's csv module, as Go's encoding/csv that the FGD simulator's loaders use
(alibaba/clusterdata cluster-trace-gpu-v2023), takes CRLF records; the BOM is Excel's
"CSV UTF-8" format.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.commands.cli import main
from scheduler.replay.trace import TraceError, load_nodes, load_pods
from tests.replay.test_bound import tiny_trace

REPO = Path(__file__).resolve().parents[2]


def _spreadsheet_copy(path: Path, to: Path) -> Path:
    text = path.read_text(encoding="utf-8")
    to.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    return to


def test_a_bom_and_crlf_trace_reads_as_the_plain_one(tmp_path: Path) -> None:
    nodes, trace = tiny_trace(tmp_path)
    assert load_nodes(_spreadsheet_copy(nodes, tmp_path / "n.csv")) == load_nodes(nodes)
    assert load_pods(_spreadsheet_copy(trace, tmp_path / "p.csv")) == load_pods(trace)


@pytest.mark.parametrize(("data", "why"), [
    (b"name,cpu\n\xff\xfe\x00garbage", "not UTF-8 text (byte 0xff at offset 9)"),
    (b"PK\x03\x04\x00\x00binary", "holds NUL bytes: a binary file, not a CSV trace"),
], ids=["not-utf8", "nul-bytes"])
def test_a_binary_trace_is_named(data: bytes, why: str, tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(data)
    with pytest.raises(TraceError, match=rf"^{path}:\d+: ") as error:
        load_pods(path)
    assert why in str(error.value)


def test_the_run_ends_with_its_summary_table_on_stdout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, trace = tiny_trace(tmp_path)
    assert main(["replay", "--trace", str(trace), "--nodes", str(nodes), "--policy", "fgd",
                 "--seeds", "42", "--jobs", "1", "--out", str(tmp_path / "out"),
                 "--traces-dir", str(tmp_path / "none")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TRACE "))
    assert lines[header].split("   ")[:3] == ["TRACE", "POLICY", "ARRIVED %"]
    assert lines[header + 1].startswith("tiny ") and " fgd " in lines[header + 1]


@pytest.mark.parametrize("document", [{"foo": 1}, {"items": [1, 2]}], ids=["map", "items"])
def test_inspect_says_json_that_is_not_a_kubernetes_list(document: object,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps(document))
    result = subprocess.run([sys.executable, "-m", "scheduler", "inspect", "gpushare",
                             str(path)], cwd=REPO, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {path}#1: not a Kubernetes object or List (it has no kind)")
