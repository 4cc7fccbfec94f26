"""Start-up of ``lahar run``: what parsing its flags must not build.

kube-scheduler validates ``--feature-gates`` (component-base featuregate.Set) without any
CEL work; its DRA CEL environment is built when a selector is compiled
(k8s.io/dynamic-resource-allocation/cel/compile.go, ``GetCompiler``: a lazily built
``sync.Once``). Lahar's flag check imports the DRA modules, so building cel-python's parser at
import would cost every start a second of CPU for a cluster that never uses DRA.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import argparse
from scheduler.cluster.kube.flags import add_run_arguments
parser = argparse.ArgumentParser()
add_run_arguments(parser)
parser.parse_args([])
from celpy.celparser import CELParser
print("built" if CELParser.CEL_PARSER is not None else "lazy")
"""


def test_parsing_run_flags_builds_no_cel_parser() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip() == "lazy", out.stderr


def test_a_selector_still_compiles_on_first_use() -> None:
    from celpy import celtypes

    from scheduler.devices.dra.cel import compile_selector

    compiled = compile_selector('device.driver == "gpu.example.com"')
    assert compiled.error == ""
    device = celtypes.MapType({celtypes.StringType("driver"):
                               celtypes.StringType("gpu.example.com")})
    assert compiled.matches({"device": device}) is True


def test_cel_python_is_loaded_at_the_first_selector_not_at_import() -> None:
    code = (
        "import sys\n"
        "import scheduler.framework.draapi\n"
        "from scheduler.devices.dra import cel\n"
        "before = 'celpy' in sys.modules\n"
        "ok = cel.compile_selector('device.driver == \"x\"').error == ''\n"
        "print(before, ok, 'celpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True", "True"]
