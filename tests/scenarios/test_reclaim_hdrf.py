"""Hierarchical DRF (``drf`` with ``enableHierarchy``): queue order and reclaim.

Matched against ``plugins/drf/drf.go`` (``buildHierarchy``, ``updateHierarchicalShare``,
``compareQueues`` and the hierarchical ``reclaimFn``). The two allocation cases are
``TestHDRF`` of ``plugins/drf/hdrf_test.go`` with the outcome its cases list (that test's
final comparison never fails, so the numbers are checked here for the first time).
"""

from __future__ import annotations

from tests.builders import make_node, make_pod, make_podgroup, make_queue, simulate
from tests.scenarios.preemption_helpers import evicted

ALLOCATE = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: drf, enableHierarchy: true}]
- plugins: [{name: predicates}]
"""

RECLAIM = """
actions: "enqueue, allocate, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false, enableJobStarving: false}]
- plugins: [{name: drf, enableHierarchy: true}, {name: predicates}, {name: nodeorder}]
"""
"""priority says which jobs starve (all their tasks wanted), gang only keeps the job whole;
HDRF alone names the victims."""


def _queue(name: str, path: str, weights: str) -> dict:
    queue = make_queue(name)
    queue["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": path, "volcano.sh/hierarchy-weights": weights}
    return queue


def _pods(count: int, cpu: str, memory: str, group: str, queue: str,
          *, node: str | None = None) -> list[dict]:
    return [
        make_podgroup(group, min_member=0 if node is None else 1, queue=queue,
                      phase="Running" if node else None),
        *[make_pod(f"{group}-p{i}", cpu=cpu, memory=memory, group=group, node=node)
          for i in range(count)],
    ]


def _placed(run: object, groups: list[str]) -> dict[str, int]:
    binds = run.binds()  # type: ignore[attr-defined]
    return {g: sum(1 for pod in binds if pod.startswith(f"{g}-p")) for g in groups}


def test_rescaling() -> None:
    objs = [
        make_node("n", cpu="10", memory="10G", pods="50"),
        _queue("root-sci", "root/sci", "100/50"),
        _queue("root-eng-dev", "root/eng/dev", "100/50/50"),
        _queue("root-eng-prod", "root/eng/prod", "100/50/50"),
        *_pods(10, "1", "1G", "pg1", "root-sci"),
        *_pods(10, "1", "0", "pg21", "root-eng-dev"),
        *_pods(10, "0", "1G", "pg22", "root-eng-prod"),
    ]
    run = simulate(objs, conf=ALLOCATE)
    assert _placed(run, ["pg1", "pg21", "pg22"]) == {"pg1": 5, "pg21": 5, "pg22": 5}


def test_blocking_nodes() -> None:
    """pg32 sits in pg31's queue, as in Volcano's case."""
    objs = [
        make_node("n", cpu="30", memory="30G", pods="500"),
        _queue("root-pg1", "root/pg1", "100/25"),
        _queue("root-pg2", "root/pg2", "100/25"),
        _queue("root-pg3-pg31", "root/pg3/pg31", "100/25/50"),
        _queue("root-pg3-pg32", "root/pg3/pg32", "100/25/50"),
        _queue("root-pg4", "root/pg4", "100/25"),
        *_pods(30, "1", "0", "pg1", "root-pg1"),
        *_pods(30, "1", "0", "pg2", "root-pg2"),
        *_pods(30, "1", "0", "pg31", "root-pg3-pg31"),
        *_pods(30, "0", "1G", "pg32", "root-pg3-pg31"),
        *_pods(30, "0", "1G", "pg4", "root-pg4"),
    ]
    run = simulate(objs, conf=ALLOCATE)
    assert _placed(run, ["pg1", "pg2", "pg31", "pg32", "pg4"]) == {
        "pg1": 10, "pg2": 10, "pg31": 10, "pg32": 15, "pg4": 15}


def _reclaim_cluster(b_weight: str) -> list[dict]:
    return [
        make_node("n", cpu="4", memory="8Gi"),
        _queue("qa", "root/a", "1/1"),
        _queue("qb", "root/b", f"1/{b_weight}"),
        *_pods(4, "1", "0", "ja", "qa", node="n"),
        make_podgroup("jb", min_member=1, queue="qb"),
        *[make_pod(f"jb-p{i}", cpu="1", group="jb") for i in range(3)],
    ]


def test_hdrf_reclaims_while_the_reclaimer_stays_strictly_below() -> None:
    """Equal weights: the first task of queue b takes one of a's four slots (b 1/4 < a 3/4);
    a second would tie (2/4 each), and a tie is no reclaim."""
    run = simulate(_reclaim_cluster("1"), conf=RECLAIM)
    assert len(evicted(run)) == 1
    assert _placed(run, ["jb", "ja"]) == {"jb": 1, "ja": 3}


def test_hdrf_weights_scale_the_comparison() -> None:
    """Weight 2 for b: b gets a second slot (share 2/4 over weight 2 is below a's 2/4)."""
    run = simulate(_reclaim_cluster("2"), conf=RECLAIM)
    assert len(evicted(run)) == 2
    assert _placed(run, ["jb", "ja"]) == {"jb": 2, "ja": 2}
