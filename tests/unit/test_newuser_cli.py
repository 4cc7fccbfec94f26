"""The CLI's rough edges: ``--version``, loud import failures, why a pod waits, whose
PodGroup it is, and List output written item by item yet byte-identical to a one-shot dump."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.commands.cli import main, version
from scheduler.commands.report import render_table, write_list
from tests.builders import make_node, make_pod, make_podgroup, simulate

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "conf" / "samples" / "quickstart.yaml"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"lahar {version()}"
    assert version()[0].isdigit()


@pytest.mark.parametrize(
    "module", ["scheduler.commands.inspect", "scheduler.cluster.kube.run", "kubernetes"])
def test_a_broken_import_fails_loudly_instead_of_hiding_commands(module: str) -> None:
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from scheduler.commands.cli import main\nmain(['--help'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr and module in done.stderr


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(command in out for command in ("simulate", "conf", "inspect", "run"))


def _table(objects: list[dict[str, Any]]) -> str:
    run = simulate(objects)
    return render_table(run.cluster.all_objects(), scheduler_names=("volcano",))


def _reason_of(table: str, pod: str) -> str:
    line = next(line for line in table.splitlines() if line.startswith(pod + " "))
    return line.split("   ")[-1].strip()


def test_pending_reasons_say_what_keeps_a_pod_out() -> None:
    table = _table([
        make_node("n1", cpu="4"),
        make_pod("theirs", scheduler="default-scheduler"),
        make_pod("orphan", group="missing"),
        make_podgroup("lost", queue="nowhere"),
        make_pod("queueless", group="lost"),
        make_pod("huge", cpu="64"),
    ])
    assert _reason_of(table, "default/theirs") == (
        "left to scheduler 'default-scheduler' (this run schedules 'volcano'; "
        "see --scheduler-name)")
    assert _reason_of(table, "default/orphan") == "its PodGroup default/missing does not exist"
    assert "queue nowhere of PodGroup default/lost does not exist" in table
    assert "0/1 nodes are unavailable: 1 Insufficient cpu." in _reason_of(table, "default/huge")
    assert "not scheduled yet" not in table


def test_gated_pod_names_its_gates() -> None:
    pod = make_pod("gated")
    pod["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    table = _table([make_node("n1"), pod])
    assert "waiting for scheduling gates: example.com/quota" in table


def test_auto_made_podgroups_show_their_owner() -> None:
    owned = make_pod("web-1")
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1",
         "controller": True}]
    sibling = make_pod("web-2")
    sibling["metadata"]["ownerReferences"] = owned["metadata"]["ownerReferences"]
    run = simulate([make_node("n1"), make_pod("solo"), owned, sibling])
    groups = run.cluster.objects["PodGroup"]
    # Volcano's podgroup controller: one group per controller, else one per pod
    assert "default/podgroup-rs-1" in groups
    assert groups["default/podgroup-rs-1"]["metadata"]["ownerReferences"][0]["kind"] == \
        "ReplicaSet"
    assert run.pod("web-2")["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == \
        "podgroup-rs-1"
    table = render_table(run.cluster.all_objects())
    rows = [line for line in table.splitlines() if "podgroup-" in line and "PODGROUP" not in line]
    assert any(row.endswith("ReplicaSet/web") for row in rows)
    assert any(row.endswith("Pod/solo") for row in rows)
    assert len(rows) == 2


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_streamed_list_equals_a_one_shot_dump(output: str) -> None:
    run = simulate(yaml.safe_load_all(QUICKSTART.read_text()))
    objects = run.cluster.all_objects()
    document = {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": objects}
    out = io.StringIO()
    write_list(objects, out, output=output)
    if output == "json":
        assert out.getvalue() == json.dumps(document, indent=2) + "\n"
    else:
        assert out.getvalue() == yaml.safe_dump(document, sort_keys=False,
                                                default_flow_style=False)


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_empty_list_output_parses(output: str) -> None:
    out = io.StringIO()
    write_list([], out, output=output)
    assert yaml.safe_load(out.getvalue()) == {
        "apiVersion": "v1", "kind": "List", "metadata": {}, "items": []}


def test_a_closed_pipe_ends_the_output_quietly(tmp_path: Path) -> None:
    """``lahar simulate -o yaml big.yaml | head``: no traceback once the reader is gone."""
    objects = [make_node(f"n{i}", cpu="64", memory="256Gi") for i in range(20)]
    objects += [make_pod(f"p{i}", cpu="1") for i in range(400)]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    child = subprocess.Popen(
        [sys.executable, "-m", "scheduler", "simulate", str(path), "-o", "yaml"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline() == "apiVersion: v1\n"
    child.stdout.close()
    stderr = child.stderr.read()
    assert child.wait(timeout=120) == 1
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


def test_simulate_does_not_import_the_kubernetes_client() -> None:
    """``lahar run`` is the only command that needs the official client; the others start
    without paying for its import (it is checked for, not loaded)."""
    code = ("import sys\nfrom scheduler.commands.cli import build_parser\nbuild_parser()\n"
            "print(sorted(m for m in ('kubernetes', 'scheduler.cluster.kube.run') "
            "if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
