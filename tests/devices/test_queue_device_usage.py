"""``queue_device_usage``: which ledgers add to a queue's ``status.allocated`` at close.

The check of a ledger's kind is kept per class; a class with ``queue_resources`` counts, one
without does not, whatever was asked first (Volcano's ``addNodeSharableDeviceUsage`` adds
only the devices that implement ``AddQueueResource``).
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.api.node import NodeInfo
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo, task_from_pod
from scheduler.devices.base import queue_device_usage
from tests.builders import make_pod


class _Charged:
    def queue_resources(self, task: TaskInfo) -> Mapping[str, float]:
        return {"example.com/share": 250.0}


class _Plain:
    queue_resources = None  # an attribute of that name that is no method does not count


def _node(**others: object) -> NodeInfo:
    return NodeInfo(name="n1", allocatable=Resource(), capacity=Resource(), others=dict(others))


def test_only_ledgers_with_queue_resources_add_to_the_queue() -> None:
    task = task_from_pod(make_pod("p1", cpu="1"))
    assert queue_device_usage(_node(plain=_Plain()), task).get("example.com/share") == 0
    usage = queue_device_usage(_node(plain=_Plain(), charged=_Charged(), again=_Charged()), task)
    assert usage.get("example.com/share") == 500.0
    assert queue_device_usage(_node(plain=_Plain()), task).get("example.com/share") == 0
    assert queue_device_usage(None, task).get("example.com/share") == 0
