"""Volcano's stock confs load unchanged and run on the quickstart sample.

``tests/data/confs/volcano-scheduler.conf`` is the Helm chart's default
(``installer/helm/chart/volcano/config/volcano-scheduler.conf``); ``volcano-scheduler-ci.conf``
is the conf Volcano's e2e suites run with (``volcano-scheduler-ci.conf`` next to it), whose
actions include ``reclaim`` and ``preempt``.
"""

from __future__ import annotations

from pathlib import Path

from scheduler.cluster.manifests import load_manifests
from scheduler.cluster.simulation import run_simulation
from scheduler.conf import DEFAULT_CONF, load_conf, parse_conf

REPO = Path(__file__).resolve().parents[2]
CONFS = REPO / "tests" / "data" / "confs"
QUICKSTART = REPO / "conf" / "samples" / "quickstart.yaml"


def _run(conf_path: Path) -> None:
    conf = load_conf(conf_path)
    manifests, problems = load_manifests([QUICKSTART])
    assert not problems
    result = run_simulation(manifests, conf=conf, seed=3, max_cycles=20)
    assert result.settled
    bound = [p for p in result.cluster.objects["Pod"].values() if p["spec"].get("nodeName")]
    assert bound, "the quickstart sample should place pods under any stock conf"


def test_volcano_helm_default_conf_runs_on_quickstart() -> None:
    _run(CONFS / "volcano-scheduler.conf")


def test_volcano_ci_conf_runs_on_quickstart() -> None:
    _run(CONFS / "volcano-scheduler-ci.conf")


def test_volcano_ci_conf_actions_are_all_known() -> None:
    """Whatever happens to its plugins, every action of the CI conf is implemented."""
    text = (CONFS / "volcano-scheduler-ci.conf").read_text()
    actions = text.split("\n", 1)[0]
    assert "reclaim" in actions and "preempt" in actions
    conf = parse_conf(actions + "\n" + DEFAULT_CONF.split("\n", 1)[1])
    assert conf.actions == ("enqueue", "allocate", "backfill", "reclaim", "preempt")


def test_every_volcano_action_name_but_the_gang_ones_is_known() -> None:
    conf = parse_conf('actions: "enqueue, allocate, backfill, preempt, reclaim, shuffle"\n')
    assert conf.actions[-3:] == ("preempt", "reclaim", "shuffle")


def test_preemption_sample_reclaims_and_preempts() -> None:
    """``lahar simulate conf/samples/preemption.yaml --conf conf/preemption.conf``: queue
    production reclaims three slots for its gang, the urgent hotfix of queue research
    preempts one more sweep pod, and the sweep keeps the rest."""
    conf = load_conf(REPO / "conf" / "preemption.conf")
    assert conf.actions[-2:] == ("reclaim", "preempt")
    manifests, problems = load_manifests([REPO / "conf" / "samples" / "preemption.yaml"])
    assert not problems
    result = run_simulation(manifests, conf=conf, seed=0, max_cycles=20)
    assert result.settled
    pods = result.cluster.objects["Pod"].values()
    running = {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")}
    assert {"serving-0", "serving-1", "serving-2", "hotfix-0"} <= running
    assert len([name for name in running if name.startswith("sweep-")]) == 4
    evictions = [e for e in result.cluster.events if e["reason"] == "Evict"
                 and e["involvedObject"]["kind"] == "Pod"]
    assert sorted(e["message"] for e in evictions) == (
        ["Pod is evicted, because of preempt"] + ["Pod is evicted, because of reclaim"] * 3)
