"""Volcano's capacity plugin user guide and the shipped capacity samples, run end to end.

The confs are ``conf/capacity-*.conf`` (the guide's, verbatim); the clusters are
``conf/samples/capacity-*.yaml``. Expected outcomes follow the guide
(``docs/user-guide/how_to_use_capacity_plugin.md``) and the capacity design
(``docs/design/capacity-scheduling.md``, stories 1–4) of the Volcano repository, computed with
``capacity.go``'s ``buildQueueAttrs``/``buildHierarchicalQueueAttrs`` and its AllocatableFn,
QueueOrderFn and JobEnqueueableFn.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from structlog.testing import capture_logs

from actions import ACTIONS
from scheduler.commands.cli import main
from scheduler.conf import ConfError, load_conf, parse_conf
from tests.builders import Run, make_node, make_pod, make_queue, simulate

ROOT = Path(__file__).resolve().parents[2]
CONFS = ROOT / "conf"
SAMPLES = ROOT / "conf" / "samples"
HAVE_RECLAIM = "reclaim" in ACTIONS


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """``lahar`` commands bind structlog to the stream pytest captures for the test; later
    tests must not log into that stream once it is closed."""
    yield
    structlog.reset_defaults()


def conf_text(name: str, *, reclaim: bool = False) -> str:
    """A guide conf; without ``reclaim`` the action is dropped (these runs need no eviction)."""
    text = (CONFS / f"capacity-{name}.conf").read_text()
    return text if reclaim else text.replace(", reclaim", "")


def sample(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((SAMPLES / f"capacity-{name}.yaml").read_text())
            if doc]


def running(run: Run, prefix: str) -> list[str]:
    return sorted(name for name in run.binds() if name.startswith(prefix)
                  and not run.pod(name)["metadata"].get("deletionTimestamp"))


@pytest.mark.parametrize("name", ["guide", "hierarchy"])
def test_guide_confs_load(name: str) -> None:
    if not HAVE_RECLAIM:
        with pytest.raises(ConfError, match="unknown action 'reclaim'"):
            load_conf(CONFS / f"capacity-{name}.conf")
        pytest.skip("the reclaim action is not available in this build")
    conf = load_conf(CONFS / f"capacity-{name}.conf")
    capacity = conf.plugin("capacity")
    assert capacity is not None and conf.plugin("proportion") is None
    assert capacity.flags["enableHierarchy"] is (name == "hierarchy")


def test_the_guide_conf_with_proportion_added_loads_with_a_warning() -> None:
    """Volcano's loader (``pkg/scheduler/util.go:61-81``) takes the pair; Lahar warns."""
    text = conf_text("guide").replace("  - name: capacity\n",
                                      "  - name: capacity\n  - name: proportion\n")
    conf = parse_conf(text)
    assert conf.plugin("capacity") is not None and conf.plugin("proportion") is not None
    assert any("capacity and proportion" in warning for warning in conf.warnings)


def test_guide_a_queue_borrows_what_an_idle_queue_deserves() -> None:
    """Guide: queue1 deserves 2 cpu of 8, queue2 is idle: all eight demo-1 pods run."""
    run = simulate(sample("guide"), conf=conf_text("guide"))
    assert len(running(run, "demo-1-")) == 8


@pytest.mark.skipif(not HAVE_RECLAIM, reason="needs the reclaim action")
def test_guide_queue2_reclaims_its_deserved_share() -> None:
    """Guide: demo-2 (queue2, deserves 6 cpu/24Gi) reclaims from queue1 until queue1 is back
    at its deserved 2 cpu/8Gi: 2 demo-1 and 6 demo-2 pods run."""
    conf = conf_text("guide", reclaim=True)
    first = simulate(sample("guide"), conf=conf)
    assert len(running(first, "demo-1-")) == 8
    # then demo-2 arrives in the cluster as the first run left it
    objs = [copy.deepcopy(o) for o in first.cluster.all_objects() if o["kind"] != "Event"]
    objs += [make_pod(f"demo-2-{i}", cpu="1", memory="4Gi", queue="queue2") for i in range(8)]
    run = simulate(objs, conf=conf)
    assert len(running(run, "demo-2-")) == 6
    assert len(running(run, "demo-1-")) == 2


def test_guarantee_is_kept_free_and_capability_bounds_the_borrower() -> None:
    """Design stories 1 and 4: org1 (capability 7 GPUs) runs 6 of its 8 GPU pods because
    org2's guarantee of 2 of the 8 GPUs is reserved even while org2 is idle; the best-effort
    queue runs on cpu nobody reserved."""
    objs = sample("queues")
    run = simulate(objs, conf=conf_text("guide"))
    assert len(running(run, "train-")) == 6
    assert len(running(run, "notebook-")) == 4
    assert run.reason("train-7").startswith(
        "queue org1 has no room for task train-7 within its capability")
    # what org2 was guaranteed is there when it comes
    gpu: dict[str, Any] = {"limits": {"nvidia.com/gpu": "1"}}
    org2 = [make_pod(f"eval-{i}", cpu="1", queue="org2", **gpu) for i in range(2)]
    run = simulate([*objs, *org2], conf=conf_text("guide"))
    assert len(running(run, "eval-")) == 2 and len(running(run, "train-")) == 6


def test_queues_below_their_deserved_share_go_before_best_effort_ones() -> None:
    """``updateQueueAttrShare``: a queue without deserved has share 1 and, at equal share, goes
    after queues with one; the best-effort queue here is older, which would otherwise win."""
    objs = [make_node("n1", cpu="4"), make_queue("be"), make_queue("team")]
    objs[2]["spec"]["deserved"] = {"cpu": "4"}
    objs += [make_pod(f"be-{i}", cpu="1", queue="be") for i in range(4)]
    objs += [make_pod(f"team-{i}", cpu="1", queue="team") for i in range(4)]
    run = simulate(objs, conf=conf_text("guide"))
    assert len(running(run, "team-")) == 4 and running(run, "be-") == []


def test_hierarchy_sample_parents_bound_their_children() -> None:
    """dev is bounded by eng's 6 cpu less prod's guarantee (4), dev and prod together by eng's
    capability (6); research gets the rest. Shares: dev and prod alternate (deserved 2 and 3),
    eng's subtree goes before research (Volcano keeps an ancestor's share as it was at session
    open), so dev and prod take 3 each."""
    run = simulate(sample("hierarchy"), conf=conf_text("hierarchy"))
    dev, prod, research = (len(running(run, p)) for p in ("dev-", "prod-", "research-"))
    assert (dev, prod, research) == (3, 3, 2)


def test_hierarchy_a_job_in_a_parent_queue_stops_the_capacity_plugin() -> None:
    """Only leaf queues take jobs; Volcano treats a job in a parent queue as a broken
    hierarchy and the plugin admits and places nothing until it is fixed."""
    objs = [*sample("hierarchy"), make_pod("misplaced", cpu="1", queue="eng")]
    with capture_logs() as logs:
        run = simulate(objs, conf=conf_text("hierarchy"))
    assert run.binds() == {}
    errors = {entry["error"] for entry in logs if entry["log_level"] == "error"}
    assert len(errors) == 1
    assert errors.pop().startswith("queue hierarchy unusable: Queue eng: holds PodGroup ")


def test_hierarchy_missing_parent_leaves_only_that_queue_out() -> None:
    """A queue whose parent does not exist is left out with one warning; the sample binds as
    it does without it."""
    alone = simulate(sample("hierarchy"), conf=conf_text("hierarchy"))
    objs = [*sample("hierarchy"), make_queue("lost")]
    objs[-1]["spec"]["parent"] = "nowhere"
    with capture_logs() as logs:
        run = simulate(objs, conf=conf_text("hierarchy"))
    assert run.binds() == alone.binds()
    warned = [entry for entry in logs if entry["log_level"] == "warning"]
    assert any("nowhere" in str(entry) for entry in warned)


@pytest.mark.skipif(not HAVE_RECLAIM, reason="needs the reclaim action")
def test_reclaim_stops_at_the_victim_queues_guarantee() -> None:
    """Design story 4: org2 (deserves 6 GPUs) reclaims from org1, which borrowed 7 of the 8,
    but not below org1's guarantee of 2."""
    gpu: dict[str, Any] = {"limits": {"nvidia.com/gpu": "1"}}
    conf = conf_text("guide", reclaim=True)
    org1 = make_queue("org1")
    org1["spec"].update(guarantee={"resource": {"nvidia.com/gpu": "2"}},
                        capability={"nvidia.com/gpu": "7"})
    org2 = make_queue("org2")
    org2["spec"]["deserved"] = {"nvidia.com/gpu": "6"}
    nodes = [make_node(f"gpu-{i}", cpu="8", memory="32Gi", extra={"nvidia.com/gpu": "4"})
             for i in (1, 2)]
    first = simulate([*nodes, org1, org2,
                      *(make_pod(f"train-{i}", cpu="1", queue="org1", **gpu) for i in range(8))],
                     conf=conf)
    assert len(running(first, "train-")) == 7
    objs = [copy.deepcopy(o) for o in first.cluster.all_objects() if o["kind"] != "Event"]
    objs += [make_pod(f"eval-{i}", cpu="1", queue="org2", **gpu) for i in range(8)]
    run = simulate(objs, conf=conf)
    assert len(running(run, "eval-")) == 6
    assert len(running(run, "train-")) == 2


def _then(run: Run, *pods: dict[str, Any], conf: str) -> Run:
    """Submit ``pods`` to the cluster as ``run`` left it."""
    objs = [copy.deepcopy(o) for o in run.cluster.all_objects() if o["kind"] != "Event"]
    return simulate([*objs, *pods], conf=conf)


@pytest.mark.skipif(not HAVE_RECLAIM, reason="needs the reclaim action")
def test_hierarchical_reclaim_respects_parents_and_takes_from_siblings_first() -> None:
    """Guide's hierarchy conf (ancestorReclaimLevel 1): research reclaims from dev only while
    dev's parent eng is above its deserved 4; prod then reclaims from its sibling dev (research
    is within its deserved), down to dev's deserved 2."""
    conf = conf_text("hierarchy", reclaim=True)
    queues = []
    for name, parent, deserved in (("eng", None, "4"), ("dev", "eng", "2"),
                                   ("prod", "eng", "2"), ("research", None, "4")):
        queue = make_queue(name)
        queue["spec"]["deserved"] = {"cpu": deserved}
        if parent:
            queue["spec"]["parent"] = parent
        queues.append(queue)
    nodes = [make_node(f"node-{i}", cpu="4", memory="16Gi") for i in (1, 2)]

    def pods(queue: str, count: int) -> list[dict[str, Any]]:
        return [make_pod(f"{queue}-{i}", cpu="1", queue=queue) for i in range(count)]

    run = simulate([*nodes, *queues, *pods("dev", 8)], conf=conf)
    assert len(running(run, "dev-")) == 8
    run = _then(run, *pods("research", 8), conf=conf)
    assert (len(running(run, "dev-")), len(running(run, "research-"))) == (4, 4)
    run = _then(run, *pods("prod", 4), conf=conf)
    assert [len(running(run, f"{q}-")) for q in ("dev", "prod", "research")] == [2, 2, 4]


@pytest.mark.parametrize(("conf", "cluster"), [("guide", "guide"), ("guide", "queues"),
                                               ("hierarchy", "hierarchy")])
def test_samples_run_from_the_command_line(conf: str, cluster: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    conf_file = tmp_path / "capacity.conf"
    conf_file.write_text(conf_text(conf, reclaim=HAVE_RECLAIM))
    assert main(["simulate", "--conf", str(conf_file),
                 str(SAMPLES / f"capacity-{cluster}.yaml")]) == 0
    out, err = capsys.readouterr()
    assert "settled" in out and "error" not in err
