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

import pytest

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


# -- ``lahar run`` up to its first LISTs ---------------------------------------------------------
# kube-scheduler starts its informers before its framework runs (cmd/kube-scheduler/app/
# server.go, ``Run``); Lahar sends the first LISTs (scheduler/cluster/kube/firstlist.py) before
# it imports the scheduler core, so nothing on the path to them may import that core.

HEAVY = ("numpy", "scheduler.conf", "scheduler.framework.session", "scheduler.cache.cache",
         "scheduler.loop", "actions", "prometheus_client", "tenacity",
         "scheduler.devices.dra.allocator",
         "scheduler.devices.gpushare", "scheduler.devices.vgpu_family",
         "scheduler.devices.finegrained.family")

RUN_PATH = """
import sys
from scheduler.commands.cli import build_parser
args = build_parser("run").parse_args(["run", "--master", "http://127.0.0.1:9"])
import scheduler.cluster.kube.run
import scheduler.cluster.kube.firstlist
print(" ".join(m for m in HEAVY if m in sys.modules) or "none")
"""


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY!r}\n" + code], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_run_path_to_the_first_lists_imports_no_scheduler_core() -> None:
    """Parsing ``lahar run``'s flags and importing its module (connect, leader election,
    reflectors, first LISTs) import neither numpy nor the conf, framework, cache or any
    device family: those load while the LISTs are on their way."""
    assert _python(RUN_PATH) == "none"


def test_an_empty_feature_gates_default_imports_no_dra() -> None:
    """argparse runs the ``--feature-gates`` check on its empty default too."""
    code = RUN_PATH.replace('"--master"', '"--feature-gates", "", "--master"')
    assert _python(code) == "none"
    bad = subprocess.run(
        [sys.executable, "-m", "scheduler", "run", "--feature-gates", "DRAAdminAccess=maybe"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "DRAAdminAccess=maybe" in bad.stderr


FAMILIES = """
import sys
from scheduler.conf import load_conf, parse_conf
from scheduler.deviceconf import device_support
FAMILY_MODULES = ("scheduler.devices.gpushare", "scheduler.devices.vgpu_family",
                  "scheduler.devices.finegrained.family")
device_support(load_conf(None))
print(" ".join(m for m in FAMILY_MODULES if m in sys.modules) or "none")
"""


def test_the_default_conf_imports_no_device_family() -> None:
    """The registry (scheduler/devices/registry.py) imports a family when the conf switches
    it on: the built-in conf switches none on."""
    assert _python(FAMILIES) == "none"


@pytest.mark.parametrize(("switch", "module"), [
    ("deviceshare.GPUSharingEnable", "scheduler.devices.gpushare"),
    ("deviceshare.GPUNumberEnable", "scheduler.devices.gpushare"),
    ("deviceshare.VGPUEnable", "scheduler.devices.vgpu_family"),
    ("deviceshare.FineGrainedDeviceEnable", "scheduler.devices.finegrained.family"),
], ids=["gpu-share", "gpu-number", "vgpu", "finegrained"])
def test_a_family_switched_on_is_imported_with_its_conf(switch: str, module: str) -> None:
    code = FAMILIES.replace(
        "device_support(load_conf(None))",
        "conf = parse_conf('actions: \"allocate\"\\ntiers:\\n- plugins:\\n  - name: gang\\n"
        f"  - name: deviceshare\\n    arguments: {{{switch}: true}}\\n')\n"
        "families = device_support(conf).families\n"
        "assert [f.NAME for f in families] == [n for n, e in REGISTRY.items()"
        " if e.enabled(families[0].config)], families")
    code = code.replace("import sys\n", "import sys\nfrom scheduler.devices.registry import "
                        "DEVICES as REGISTRY\n")
    assert _python(code) == module


def test_the_collector_is_off_while_the_conf_loads_and_on_again_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the conf imports hundreds of modules whose objects all live on; full
    collections set off meanwhile would only walk them again and again. The collector is
    back on afterwards (the sync turns it off again, then freezes what it loaded)."""
    import gc
    import threading

    import scheduler.conf
    from scheduler.cluster.kube.run import run_main
    from scheduler.commands.cli import build_parser

    load_conf = scheduler.conf.load_conf
    collecting: list[bool] = []

    def watched(*args: object, **kwargs: object) -> object:
        collecting.append(gc.isenabled())
        return load_conf(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(scheduler.conf, "load_conf", watched)
    args = build_parser("run").parse_args(
        ["run", "--master", "http://127.0.0.1:9", "--leader-elect=false"])
    stop = threading.Event()
    stop.set()  # load the conf, then stop before connecting
    codes: list[int] = []
    assert gc.isenabled()
    worker = threading.Thread(target=lambda: codes.append(run_main(args, stop=stop)))
    worker.start()
    worker.join(60)
    assert codes == [0]
    assert collecting == [False]
    assert gc.isenabled()


# -- ``lahar run`` up to its first cycle ----------------------------------------------------------
# What ``schedule_forever`` imports before the first cycle, with the default conf loaded: the
# actions the conf does not run and the DRA object model, parsers, CEL selectors and allocator
# are not imported (kube-scheduler builds its DRA plugin's allocator per pod that has claims:
# pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, ``Filter``).

FIRST_CYCLE = """
import sys
from scheduler.cluster.kube.run import _load_conf, schedule_forever
from scheduler.commands.cli import build_parser
args = build_parser("run").parse_args(["run", "--master", "http://127.0.0.1:9"])
conf = _load_conf(args, "")
from plugins import PLUGINS
for tier in conf.tiers:
    for option in tier:
        PLUGINS[option.name]
from scheduler.cache.cache import SchedulerCache
from scheduler.cluster.kube.cyclemetrics import record_cycle
import scheduler.cluster.kube.run as run
source = open(run.__file__).read()
body = source[source.index("def schedule_forever"):source.index("times.mark('imported')".replace("'", chr(34)))]
exec(chr(10).join(line[4:] for line in body.splitlines() if line.startswith("    from scheduler.")))
from scheduler.cluster.kube.podgroups import PodGroupController
from scheduler.cluster.kube.sessionmetrics import LaharGauges, SessionMetrics
from scheduler.cluster.kube.writer import KubeClusterWriter
from scheduler.deviceconf import device_support
from scheduler.loop import Scheduler
OFF_PATH = ("actions.preempt", "actions.reclaim", "actions.shuffle", "actions.gangpreempt",
            "actions.gangreclaim", "scheduler.devices.dra.model", "scheduler.devices.dra.parse",
            "scheduler.devices.dra.cel", "scheduler.devices.dra.allocator",
            "scheduler.devices.dra.search", "prometheus_client", "scheduler.metrics", "tenacity",
            "scheduler.cluster.kube.discovery")
print(" ".join(m for m in OFF_PATH if m in sys.modules) or "none")
"""


def test_the_run_path_to_the_first_cycle_imports_no_unused_action_and_no_dra_model() -> None:
    """Nor the Prometheus client: the cycle's metrics are published at its close (the
    first binds are on their way by then) and ``/metrics`` imports it at its first scrape."""
    assert _python(FIRST_CYCLE) == "none"


FIRST_SCRAPE = """
import sys, urllib.request
from scheduler.httpserver import HttpServer
server = HttpServer("127.0.0.1:0", endpoints={"/metrics"}).start()
before = "prometheus_client" in sys.modules
with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as answer:
    text = answer.read().decode()
    kind = answer.headers["Content-Type"]
server.stop()
print(before, "volcano_e2e_scheduling_latency_milliseconds" in text, kind.startswith("text/plain"))
"""


def test_the_first_scrape_serves_the_whole_registry() -> None:
    """A scrape before the first cycle gets every metric (at zero), as before."""
    assert _python(FIRST_SCRAPE) == "False True True"


DRA_OBJECT = """
import sys
import time
from scheduler.cache.cache import SchedulerCache
cache = SchedulerCache(writer=None, clock=time.time)
before = "scheduler.devices.dra.model" in sys.modules
cache.apply("ADDED", "ResourceSlice", {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
    "spec": {"driver": "d", "nodeName": "n1",
             "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
             "devices": [{"name": "g0"}]}})
print(before, "scheduler.devices.dra.model" in sys.modules,
      [s.node_name for s in cache.dra.parsed["ResourceSlice"].values()])
"""


def test_the_dra_model_loads_with_the_first_dra_object() -> None:
    assert _python(DRA_OBJECT) == "False True ['n1']"


def test_the_allocator_errors_are_the_ones_the_framework_catches() -> None:
    from scheduler.devices.dra import allocator
    from scheduler.framework import dra, draapi

    assert allocator.AllocatorError is draapi.AllocatorError is dra.AllocatorError
    assert allocator.Unschedulable is draapi.Unschedulable is dra.Unschedulable
