"""Bad input files through the command line: exit 2 and a message naming what is wrong, never
a traceback.

Each file under ``tests/data/bad/`` is run as a user runs it (``python -m scheduler ...`` in a
subprocess, from the repository root so the paths in the messages are the ones given).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scheduler.confyaml import UnreadableFile, read_text

REPO = Path(__file__).resolve().parents[2]
BAD = "tests/data/bad"
QUICKSTART = "conf/samples/quickstart.yaml"


def _lahar(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", *args], cwd=REPO, capture_output=True, text=True,
        timeout=120, check=False, stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


# -- files that are not UTF-8 --------------------------------------------------------------------
_BINARY_YAML = f"error: {BAD}/binary.yaml: not UTF-8 text (byte 0xd3 at offset 28, line 3)"
_BINARY_CONF = f"error: {BAD}/binary.conf: not UTF-8 text (byte 0xe9 at offset 21, line 1)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("simulate", f"{BAD}/binary.yaml"), _BINARY_YAML, id="simulate"),
        pytest.param(("simulate", f"{BAD}/utf16.yaml"),
                     f"error: {BAD}/utf16.yaml: not UTF-8 text (UTF-16, by its byte order mark",
                     id="simulate-utf16"),
        pytest.param(("conf", "check", f"{BAD}/binary.conf"), _BINARY_CONF, id="conf-check"),
        pytest.param(("simulate", QUICKSTART, "--conf", f"{BAD}/binary.conf"), _BINARY_CONF,
                     id="simulate-conf"),
        pytest.param(("inspect", "gpushare", f"{BAD}/binary.yaml"), _BINARY_YAML,
                     id="inspect-gpushare"),
        pytest.param(("inspect", "devices", f"{BAD}/binary.yaml"), _BINARY_YAML,
                     id="inspect-devices"),
    ],
)
def test_a_file_that_is_not_utf8_is_named_with_where_decoding_stopped(
    args: tuple[str, ...], message: str
) -> None:
    result = _lahar(*args)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith(message)


def test_read_text_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(UnreadableFile, match=rf"^{missing}: cannot read: No such file"):
        read_text(missing)
    accented = tmp_path / "accented.yaml"
    accented.write_bytes("# défaut, ノード\r\nkind: Node\n".encode())
    assert read_text(accented) == "# défaut, ノード\r\nkind: Node\n"


# -- files without objects -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("files", "message"),
    [
        pytest.param((f"{BAD}/empty.yaml",), f"error: no objects in {BAD}/empty.yaml",
                     id="empty"),
        pytest.param((f"{BAD}/comments-only.yaml",),
                     f"error: no objects in {BAD}/comments-only.yaml", id="comments-only"),
        pytest.param((f"{BAD}/empty.yaml", f"{BAD}/comments-only.yaml"),
                     f"error: no objects in {BAD}/empty.yaml, {BAD}/comments-only.yaml",
                     id="both"),
    ],
)
def test_no_objects_in_any_file_is_an_error_naming_them(
    files: tuple[str, ...], message: str
) -> None:
    result = _lahar("simulate", *files)
    assert result.returncode == 2
    assert result.stderr.strip() == message


def test_a_file_without_objects_beside_others_is_a_warning() -> None:
    result = _lahar("simulate", f"{BAD}/empty.yaml", f"{BAD}/system-priorityclass.yaml",
                    "-o", "json")
    assert result.returncode == 0
    assert f"warning: {BAD}/empty.yaml: no objects in the file" in result.stderr.splitlines()
    pods = [i for i in yaml.safe_load(result.stdout)["items"] if i["kind"] == "Pod"]
    assert [p["spec"].get("nodeName") for p in pods] == ["node-a"]


def test_inspect_warns_of_a_file_without_objects() -> None:
    result = _lahar("inspect", "gpushare", f"{BAD}/empty.yaml")
    assert result.returncode == 0
    assert result.stderr.strip() == f"warning: {BAD}/empty.yaml: no objects in the file"
