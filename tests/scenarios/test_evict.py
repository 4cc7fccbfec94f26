"""Eviction as a user of the embedded cluster sees it: the pod goes, events stay, the
preemptor is nominated and placed on its nominated node by the next cycle's allocate.

The preempt and reclaim actions are not needed here: a test-only action evicts one victim
and pipelines the preemptor through a Statement, exactly as they do (Volcano's
``preempt.go``: ``stmt.Evict(preemptee, "preempt")`` then ``stmt.Pipeline(preemptor, node,
evictionOccurred)``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import SimCluster
from scheduler.cluster.simulation import build_simulation, run_simulation
from scheduler.commands.cli import main
from scheduler.commands.report import render_table
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.loop import Scheduler
from tests.builders import conf_of, make_node, make_pod, make_podgroup, simulate

Obj = dict[str, Any]


@dataclasses.dataclass
class EvictFor:
    """Test-only action: evict ``victim`` and pipeline ``preemptor`` onto its node."""

    victim: str
    preemptor: str
    reason: str = "preempt"
    NAME = "evict-for-test"

    def execute(self, session: Session) -> None:
        tasks = {t.name: t for job in session.jobs.values() for t in job.tasks.values()}
        victim, preemptor = tasks[self.victim], tasks[self.preemptor]
        node = session.nodes[victim.node_name]
        statement = Statement(session)
        statement.evict(victim, self.reason)
        assert statement.pipeline(preemptor, node) is None
        preemptor.nominated_node = node.name  # what preempt/reclaim record on eviction
        statement.commit()


def cluster_objects() -> list[Obj]:
    """``small`` holds the victim; ``big`` has more room, so a plain search prefers it."""
    return [
        make_node("small", cpu="4"),
        make_node("big", cpu="16"),
        make_podgroup("low"),
        make_pod("victim", cpu="4", group="low", node="small"),
        make_podgroup("high"),
        make_pod("preemptor", cpu="4", group="high"),
    ]


def build(objects: list[Obj]) -> tuple[SimCluster, Scheduler]:
    manifests = [Manifest(f"test#{i}", obj) for i, obj in enumerate(objects)]
    cluster, _, scheduler = build_simulation(manifests, conf=conf_of(None))
    return cluster, scheduler


def run_one_eviction(cluster: SimCluster, scheduler: Scheduler, reason: str) -> None:
    """One session whose only action evicts, then its writes, as a simulate cycle does."""
    default = scheduler.conf
    scheduler.actions[EvictFor.NAME] = EvictFor("victim", "preemptor", reason)
    scheduler.set_conf(dataclasses.replace(default, actions=(EvictFor.NAME,)))
    scheduler.run_once()
    scheduler.cache.flush()
    scheduler.set_conf(default)


def pod_events(cluster: SimCluster, reason: str) -> list[Obj]:
    return [e for e in cluster.events if e["reason"] == reason]


@pytest.mark.parametrize("reason", ["preempt", "reclaim"])
def test_evicted_pod_is_deleted_at_session_end_with_volcanos_events(reason: str) -> None:
    """Volcano ``SchedulerCache.Evict`` + ``defaultEvictor.Evict``: pod Warning Evict
    "Pod is evicted, because of <reason>", PodGroup Normal Evict "<reason>", pod deleted."""
    cluster, scheduler = build(cluster_objects())
    victim_uid = cluster.objects["Pod"]["default/victim"]["metadata"]["uid"]
    run_one_eviction(cluster, scheduler, reason)

    assert "default/victim" not in cluster.objects["Pod"]
    items = [o for o in cluster.all_objects() if o["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in items] == ["preemptor"]
    (pod_event,) = [e for e in pod_events(cluster, "Evict") if e["involvedObject"]["kind"] == "Pod"]
    assert pod_event["type"] == "Warning"
    assert pod_event["message"] == f"Pod is evicted, because of {reason}"
    assert pod_event["involvedObject"]["uid"] == victim_uid
    assert pod_event["related"]["name"] == "preemptor"
    (group_event,) = [
        e for e in pod_events(cluster, "Evict") if e["involvedObject"]["kind"] == "PodGroup"
    ]
    assert (group_event["type"], group_event["message"]) == ("Normal", reason)
    assert group_event["involvedObject"]["name"] == "low"
    # The victim's task is gone from the cache and its node's resources are free again.
    cache = scheduler.cache
    assert all(t.name != "victim" for t in cache.tasks.values())
    assert cache.nodes["small"].idle.milli_cpu == 4000


def test_preemptor_gets_nominated_node_and_pipelined_condition() -> None:
    """Volcano ``TaskSchedulingReason`` for a task pipelined with ``EvictionOccurred``:
    reason Unschedulable, "once resource is released" message, nominatedNodeName = node."""
    cluster, scheduler = build(cluster_objects())
    run_one_eviction(cluster, scheduler, "preempt")
    preemptor = cluster.objects["Pod"]["default/preemptor"]
    assert preemptor["status"]["nominatedNodeName"] == "small"
    assert "nodeName" not in preemptor["spec"]
    (condition,) = [c for c in preemptor["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == (
        "Pod default/preemptor can possibly be assigned to small, once resource is released "
        "and minAvailable is satisfied"
    )
    failed = [e for e in pod_events(cluster, "FailedScheduling")
              if e["involvedObject"]["name"] == "preemptor"]
    assert [e["message"] for e in failed] == [condition["message"]]


def test_next_cycle_places_the_preemptor_on_its_nominated_node_first() -> None:
    """Volcano ``allocateResourcesForTasks``: the nominated node is tried before the search.

    Without the nomination the preemptor would go to ``big`` (least requested wins)."""
    cluster, scheduler = build(cluster_objects())
    run_one_eviction(cluster, scheduler, "preempt")
    scheduler.run_once()
    scheduler.cache.flush()
    assert cluster.objects["Pod"]["default/preemptor"]["spec"]["nodeName"] == "small"

    plain = simulate([o for o in cluster_objects() if o["metadata"]["name"] != "victim"])
    assert plain.node_of("preemptor") == "big"


def nominated_pod(node: str) -> Obj:
    pod = make_pod("preemptor", cpu="4", group="high")
    pod["status"] = {"phase": "Pending", "nominatedNodeName": node}
    return pod


@pytest.mark.parametrize(
    ("nominated", "expected"),
    [
        pytest.param("small", "small", id="nominated-node-fits"),
        pytest.param("full", "big", id="nominated-node-full-falls-back"),
        pytest.param("cordoned", "big", id="nominated-node-fails-predicates-falls-back"),
        pytest.param("gone", "big", id="nominated-node-missing-falls-back"),
    ],
)
def test_nominated_node_is_taken_only_when_it_still_fits(nominated: str, expected: str) -> None:
    """Volcano ``allocateResourcesForTasks``: the nominated node must hold the request in
    future idle and pass the predicates, else the general search runs."""
    objects = [
        make_node("small", cpu="4"),
        make_node("big", cpu="16"),
        make_node("full", cpu="4"),
        make_node("cordoned", cpu="16", unschedulable=True),
        make_podgroup("other"),
        make_pod("filler", cpu="2", group="other", node="full"),
        make_podgroup("high"),
        nominated_pod(nominated),
    ]
    run = simulate(objects)
    assert run.node_of("preemptor") == expected


def test_table_shows_the_evicted_section() -> None:
    cluster, scheduler = build(cluster_objects())
    run_one_eviction(cluster, scheduler, "reclaim")
    table = render_table(cluster.all_objects())
    lines = table.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("EVICTED POD")))
    assert lines[header].split() == ["EVICTED", "POD", "REASON", "FOR"]
    assert lines[header + 1].split() == ["default/victim", "reclaim", "default/preemptor"]


def test_table_has_no_evicted_section_without_evictions() -> None:
    run = simulate(cluster_objects())
    assert "EVICTED POD" not in render_table(run.cluster.all_objects())


def test_max_cycles_one_runs_exactly_one_session() -> None:
    manifests = [Manifest(f"test#{i}", obj) for i, obj in enumerate(cluster_objects())]
    result = run_simulation(manifests, conf=conf_of(None), max_cycles=1)
    assert result.cycles == 1 and len(result.stats) == 1
    assert result.cluster.objects["Pod"]["default/preemptor"]["spec"]["nodeName"] == "big"


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """``main`` points structlog at this test's captured stderr; put the old setup back."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


@pytest.mark.usefixtures("logging_restored")
def test_cli_max_cycles_one_prints_one_sessions_decisions(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("\n---\n".join(json.dumps(obj) for obj in cluster_objects()))
    assert main(["simulate", str(path), "--max-cycles", "1"]) == 0
    out = capsys.readouterr().out
    assert "; 1 cycle(s), stopped at --max-cycles; " in out.rstrip().splitlines()[-1]
    assert main(["simulate", str(path), "--max-cycles", "1", "-o", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    pods = {o["metadata"]["name"]: o for o in items if o["kind"] == "Pod"}
    assert pods["preemptor"]["spec"]["nodeName"] == "big"
