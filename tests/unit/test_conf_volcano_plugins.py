"""Volcano plugins Lahar does not implement: a conf naming one loads, and says it is skipped.

Volcano's own registry (``pkg/scheduler/plugins/factory.go``) is the list; a name outside it is
skipped too, as Volcano's ``OpenSession`` skips it, with the closest known name. ``capacity``
and ``proportion`` may not share a conf.
"""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from plugins import PLUGINS
from scheduler.commands.cli import build_parser, main
from scheduler.conf import VOLCANO_PLUGINS, parse_conf

UNIMPLEMENTED = sorted(VOLCANO_PLUGINS - set(PLUGINS))

CI_LIKE = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: numa-aware
"""
SKIPPED = "Volcano plugin 'numa-aware' is not implemented by Lahar; skipped"


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """``lahar`` commands bind structlog to the stream pytest captures for the test; later
    tests must not log into that stream once it is closed."""
    yield
    structlog.reset_defaults()


def test_every_lahar_plugin_is_a_volcano_plugin() -> None:
    assert set(PLUGINS) <= VOLCANO_PLUGINS
    assert {"numa-aware", "tdm", "usage", "extender"} <= set(
        UNIMPLEMENTED)


@pytest.mark.parametrize("name", UNIMPLEMENTED)
def test_an_unimplemented_volcano_plugin_is_skipped_with_a_warning(name: str) -> None:
    conf = parse_conf(
        "tiers:\n- plugins:\n  - name: gang\n"
        f"  - name: {name}\n    enableNodeOrder: false\n    arguments: {{weight: 3}}\n"
        "  - name: binpack\n",
        source="c.conf",
    )
    assert [p.name for p in conf.tiers[0]] == ["gang", "binpack"]
    assert conf.warnings == (
        f"c.conf: tiers[0].plugins[1]: Volcano plugin {name!r} is not implemented by Lahar; "
        "skipped",
    )


def test_a_name_volcano_does_not_know_is_skipped_with_the_closest_name() -> None:
    """Volcano ``framework.OpenSession``: ``GetPluginBuilder`` finds no builder, logs ``Failed to
    get plugin`` and goes on without it."""
    conf = parse_conf("tiers: [{plugins: [{name: network-topology}, {name: gang}]}]",
                      source="c.conf")
    assert [p.name for p in conf.tiers[0]] == ["gang"]
    assert conf.warnings == (
        "c.conf: tiers[0].plugins[0]: unknown plugin 'network-topology' skipped (did you mean "
        "'network-topology-aware'?)",)


@pytest.mark.parametrize(
    "tiers",
    [
        "[{plugins: [{name: capacity}, {name: proportion}]}]",
        "[{plugins: [{name: proportion}]}, {plugins: [{name: capacity}]}]",
    ],
    ids=["same-tier", "different-tiers"],
)
def test_capacity_and_proportion_together_load_with_one_warning(tiers: str) -> None:
    """Volcano's loader (``pkg/scheduler/util.go:61-81``) refuses only hierarchical drf beside
    proportion; the pair capacity + proportion loads, with one warning here."""
    conf = parse_conf(f"tiers: {tiers}", source="q.conf")
    assert sum("capacity and proportion" in w for w in conf.warnings) == 1


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "ci.conf"
    path.write_text(CI_LIKE)
    return path


def test_conf_check_prints_the_warning_once(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conf", "check", str(_write(tmp_path))]) == 0
    out, err = capsys.readouterr()
    assert "numa-aware" not in out
    assert err.count(f"warning: {tmp_path / 'ci.conf'}: tiers[1].plugins[6]: {SKIPPED}") == 1


def test_simulate_prints_the_warning_once_and_schedules(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: default}\n"
        "spec: {schedulerName: volcano, containers: [{name: c, image: busybox, "
        "resources: {requests: {cpu: '1'}}}]}\n"
    )
    assert main(["simulate", "--conf", str(_write(tmp_path)), str(cluster)]) == 0
    out, err = capsys.readouterr()
    assert err.count(SKIPPED) == 1
    assert "n1" in out and "Running" in out


def test_run_logs_the_warning_at_start(tmp_path: Path) -> None:
    from scheduler.cluster.kube.run import run_main

    args = build_parser().parse_args(
        ["run", "--master", "http://127.0.0.1:9", "--leader-elect=false",
         "--scheduler-conf", str(_write(tmp_path))])
    stop = threading.Event()
    stop.set()  # load the conf, then stop before connecting
    err = io.StringIO()
    codes: list[int] = []

    def run() -> None:  # off the main thread, so no signal handlers are installed
        with contextlib.redirect_stderr(err):
            codes.append(run_main(args, stop=stop))

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(60)
    assert codes == [0]
    assert err.getvalue().count(SKIPPED) == 1


def test_sub_job_switches_say_which_job_switch_governs_sub_groups() -> None:
    """Volcano's gang registers SubJobReady/SubJobPipelined/SubJobOrder under their own
    switches; Lahar's sub-groups follow gang's (and priority's) job switches, and says so."""
    from scheduler.conf import parse_conf

    conf = parse_conf('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
                      '    enabledSubJobReady: false\n  - name: drf\n'
                      '    enabledSubJobOrder: false\n', source="x.conf")
    gang, drf = conf.warnings
    assert "flag enabledSubJobReady is ignored: sub-groups follow gang's enableJobReady" in gang
    assert "flag enabledSubJobOrder is ignored: drf has no hook it switches" in drf
