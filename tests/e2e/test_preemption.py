"""Preemption and reclaim on a real (or bare) API server: the Eviction API, events, nomination."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Case
from tests.e2e.kube import eventually, raw, short_id

PREEMPT_CONF = (Path(__file__).resolve().parents[2] / "conf" / "preemption.conf").read_text()


def _priority_classes(case: Case) -> tuple[str, str]:
    high, low = f"lahar-e2e-high-{short_id()}", f"lahar-e2e-low-{short_id()}"
    for name, value in ((high, 1000), (low, 10)):
        raw(case.kube.scheduling.create_priority_class,
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name}, "value": value})
        case.cleanups.append(lambda name=name: raw(case.kube.scheduling.delete_priority_class,
                                                   name))
    return high, low


def test_high_priority_pod_evicts_a_low_priority_one_through_the_eviction_api(
        own_case: Case) -> None:
    """Volcano's e2e "Preemption when idle is not enough but preemptee is": the victim goes
    through the Eviction API with an Evict event, the preemptor is nominated to the node and
    bound there once the victim is gone."""
    case = own_case
    high, low = _priority_classes(case)
    (node,) = case.add_nodes(1, units=2)
    scheduler = case.start_scheduler(conf=PREEMPT_CONF)
    scheduler.wait_serving()
    low_pods = case.job("low", pods=2, min_member=1, priority_class=low)
    eventually(lambda: len(case.bound(low_pods)) == 2, what="low-priority pods bound")
    high_pods = case.job("high", pods=1, priority_class=high)
    eventually(lambda: case.bound(high_pods), what="high-priority pod bound", timeout=60.0)
    assert case.node_of(high_pods[0]) == node
    preemptor = case.kube.pod(case.namespace, high_pods[0])
    assert (preemptor.get("status") or {}).get("nominatedNodeName") == node
    remaining = {pod["metadata"]["name"] for pod in case.kube.pods(case.namespace)
                 if not (pod["metadata"].get("deletionTimestamp"))}
    assert len(remaining & set(low_pods)) == 1, remaining
    evicts = eventually(lambda: [e for e in case.kube.events(case.namespace, reason="Evict")
                                 if e["involvedObject"]["kind"] == "Pod"],
                        what="Evict event on the victim")
    assert evicts[0]["type"] == "Warning"
    assert evicts[0]["message"] == "Pod is evicted, because of preempt"
    assert evicts[0]["involvedObject"]["name"] in low_pods
