"""Job order as Volcano's drf and gang plugins decide it, and binpack's weight defaults."""

from types import SimpleNamespace
from typing import Any

import numpy as np

from plugins.binpack import Binpack, BinpackArgs
from plugins.drf import Drf
from scheduler.api.node import node_from_object
from scheduler.api.resource import Resource
from scheduler.api.task import task_from_pod
from scheduler.api.types import Vote
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.plugin import NoArgs
from tests.builders import make_node, make_pod, make_podgroup, simulate

Obj = dict[str, Any]

NO_DRF_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def _running(name: str, group: str, cpu: str, **kwargs: Any) -> Obj:
    return make_pod(name, group=group, cpu=cpu, node="n1", phase="Running", **kwargs)


def test_drf_share_counts_pods() -> None:
    """Volcano ``drf.go`` calculateShare walks ``totalResource.ResourceNames()``, ``pods``
    included: a job of many small pods on a node with few pod slots has the larger share
    (2/4 pods beats 4/10 cpu) and goes after the cpu-heavy job."""
    objs = [
        make_node("n1", cpu="10", memory="32Gi", pods="4"),
        make_podgroup("small", phase="Running"),
        _running("small-run-0", "small", "100m"),
        _running("small-run-1", "small", "100m"),
        make_pod("small-new-0", group="small", cpu="1"),
        make_podgroup("heavy", phase="Running"),
        _running("heavy-run-0", "heavy", "4"),
        make_pod("heavy-new-0", group="heavy", cpu="1"),
    ]
    run = simulate(objs)
    assert run.node_of("heavy-new-0") == "n1"
    assert run.node_of("small-new-0") is None


def test_gang_job_order_looks_at_the_gang_count_only() -> None:
    """Volcano ``gang.go`` JobOrderFn compares ``JobInfo.IsReady()`` (ready tasks against
    ``minMember``), not the per-role minimums of JobReadyFn: a job with its gang count met
    but a role still short goes after a job that has nothing yet."""
    role = {"volcano.sh/task-spec": "worker"}
    objs = [
        make_node("n1", cpu="3"),
        make_podgroup("roles", min_member=2, min_task_member={"ps": 1, "worker": 1},
                      phase="Running"),
        _running("roles-worker-0", "roles", "1", annotations=role),
        _running("roles-worker-1", "roles", "1", annotations=role),
        make_pod("roles-ps-0", group="roles", cpu="1",
                 annotations={"volcano.sh/task-spec": "ps"}),
        make_podgroup("fresh"),
        make_pod("fresh-0", group="fresh", cpu="1"),
    ]
    run = simulate(objs, conf=NO_DRF_CONF)
    assert run.node_of("fresh-0") == "n1"
    assert run.node_of("roles-ps-0") is None


def test_binpack_negative_weights_count_as_one() -> None:
    """Volcano ``binpack.go`` calculateWeight: a negative ``binpack.cpu``, ``binpack.memory``
    or ``binpack.resources.<name>`` is replaced by 1; ``binpack.cpu`` wins over ``cpu``
    listed in ``binpack.resources``."""
    args = BinpackArgs(
        cpu=-3,
        memory=-1,
        resources="example.com/foo, cpu",
        resource_weights={"binpack.resources.example.com/foo": -2, "binpack.resources.cpu": 7},
    )
    assert args.weights == {"example.com/foo": 1, "cpu": 1, "memory": 1}
    nodes = [node_from_object(make_node("a", cpu="4")), node_from_object(make_node("b", cpu="2"))]
    table = NodeTable(nodes)
    task = task_from_pod(make_pod("p", cpu="1", memory="1Gi"))
    scores = Binpack(args).score_nodes(task, table, np.arange(2))
    defaults = Binpack(BinpackArgs()).score_nodes(task, table, np.arange(2))
    assert np.allclose(scores, defaults)
    assert scores[1] > scores[0] > 0


def test_drf_preemption_lowers_the_victim_share_with_each_victim() -> None:
    """Volcano ``drf.go`` preemptableFn: ``allocations[job].Sub(preemptee.Resreq)`` keeps
    subtracting from the same job, so after one victim the job's share may drop below the
    preemptor's and its next task is spared."""
    total = Resource(10000, 0)
    plugin = Drf(NoArgs())
    plugin.session = SimpleNamespace(total_resource=total)  # type: ignore[assignment]
    preemptor = task_from_pod(make_pod("p", cpu="1", group="me"))
    victims = [task_from_pod(make_pod(f"v{i}", cpu="2", group="big")) for i in range(3)]
    plugin.allocated = {
        preemptor.job: Resource(2000, 0),
        victims[0].job: Resource(6000, 0),
    }
    chosen, _ = plugin.preemptable(preemptor, victims)
    # Mine with the request: 0.3. Theirs: 0.4 after one victim, 0.2 after two, 0 after three.
    assert [t.name for t in chosen] == ["v0"]
    stranger = task_from_pod(make_pod("s", cpu="1", group="unknown"))
    assert plugin.preemptable(stranger, victims) == ([], Vote.PERMIT)
