import numpy as np

from plugins.binpack import Binpack, BinpackArgs
from plugins.proportion import QueueAttr, compute_deserved
from scheduler.api.node import node_from_object
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.task import task_from_pod
from scheduler.api.types import QueueID
from scheduler.framework.nodetable import NodeTable
from tests.builders import make_node, make_pod


def _attr(name: str, weight: int, request_cpu: float, cap: float = 1e12) -> QueueAttr:
    return QueueAttr(
        queue=QueueInfo(uid=QueueID(name), name=name, weight=weight),
        weight=weight,
        request=Resource(request_cpu, 0),
        real_capability=Resource(cap, 1e15),
    )


def test_deserved_is_weighted_and_capped_by_request() -> None:
    a, b, c = _attr("a", 3, 100_000), _attr("b", 1, 100_000), _attr("c", 4, 1000)
    compute_deserved([a, b, c], Resource(16000, 0))
    assert c.deserved.milli_cpu == 1000  # capped by its request
    # the 15 cpu left go 3:1
    assert round(a.deserved.milli_cpu) == 11250
    assert round(b.deserved.milli_cpu) == 3750


def test_deserved_respects_capability() -> None:
    a, b = _attr("a", 1, 100_000, cap=2000), _attr("b", 1, 100_000)
    compute_deserved([a, b], Resource(10000, 0))
    assert a.deserved.milli_cpu == 2000
    assert round(b.deserved.milli_cpu) == 8000


def test_binpack_formula() -> None:
    nodes = [
        node_from_object(make_node("half", cpu="4", memory="8Gi")),
        node_from_object(make_node("empty", cpu="4", memory="8Gi")),
        node_from_object(make_node("small", cpu="1", memory="8Gi")),
    ]
    nodes[0].add_task(task_from_pod(make_pod("x", cpu="2", memory="4Gi", node="half")))
    table = NodeTable(nodes)
    plugin = Binpack(BinpackArgs(weight=2))
    task = task_from_pod(make_pod("p", cpu="1", memory="2Gi"))
    scores = plugin.score_nodes(task, table, np.arange(3))
    # half: cpu 3/4, mem 6/8 -> 75 * 2; empty: cpu 1/4, mem 2/8 -> 25 * 2; small: cpu 1/1, mem 2/8
    assert scores[0] == 150 and scores[1] == 50 and scores[2] == (1 + 0.25) / 2 * 100 * 2
    overflow = task_from_pod(make_pod("big", cpu="3", memory="1Gi"))
    assert plugin.score_nodes(overflow, table, np.arange(3))[0] == 0
