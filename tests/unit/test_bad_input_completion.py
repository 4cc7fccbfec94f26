"""``lahar completion`` completes file names where a FILE, CONF or PATH goes (bash only rang
the bell there: shtab completes nothing for an argument it is not told is a file, see
shtab's ``FILE``/``DIRECTORY`` and ``add_argument_to``), and writes fish too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _script(shell: str) -> str:
    result = subprocess.run([sys.executable, "-m", "scheduler", "completion", shell], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=True)
    return result.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize(("words", "expected"), [
    (["lahar", "simulate", "conf/samples/qu"], "conf/samples/quickstart.yaml"),
    (["lahar", "simulate", "x.yaml", "--conf", "conf/samples/qu"],
     "conf/samples/quickstart.yaml"),
    (["lahar", "conf", "check", "conf/deploy/30-con"], "conf/deploy/30-configmap.yaml"),
], ids=["simulate-FILE", "simulate-conf", "conf-check"])
def test_bash_completes_file_names(words: list[str], expected: str, tmp_path: Path) -> None:
    script = tmp_path / "lahar.bash"
    script.write_text(_script("bash"))
    line = " ".join(words)
    program = (f'source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; '
               f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; '
               f'_shtab_lahar lahar {words[-1]} {words[-2]}; printf "%s\\n" "${{COMPREPLY[@]}}"')
    result = subprocess.run(["bash", "-c", program], cwd=REPO, capture_output=True, text=True,
                            timeout=60, check=False)
    assert expected in result.stdout.split(), result.stdout + result.stderr


def test_fish_is_written_with_file_completion_for_conf() -> None:
    script = _script("fish")
    assert "complete -c lahar" in script
    assert any("-l conf" in line and "__fish_complete_path" in line
               for line in script.splitlines() if "_shtab_lahar_using simulate" in line)
