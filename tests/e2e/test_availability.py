"""A scheduler restarted mid-workload, and two replicas under leader election."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Case
from tests.e2e.kube import eventually, raw


def _requested_milli(pod: dict[str, Any]) -> int:
    from scheduler.api.resource import parse_quantity

    total = 0
    for container in pod["spec"]["containers"]:
        cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
        total += int(parse_quantity(cpu) * 1000) if cpu else 0
    return total


def test_restart_mid_workload_never_double_allocates(own_case: Case) -> None:
    case = own_case
    (node,) = case.add_nodes(1, units=4)
    first = case.start_scheduler()
    first.wait_serving()
    before = case.job("before", pods=2)
    eventually(lambda: len(case.bound(before)) == 2, what="first job bound")
    first.kill()  # no goodbye: the next process only knows what the API server says
    later = case.job("later-a", pods=2) + case.job("later-b", pods=2)
    second = case.start_scheduler()
    second.wait_serving()
    eventually(lambda: len(case.bound(later)) >= 2, what="one more job bound after restart")
    for _ in range(10):  # several more cycles: nothing else may fit
        on_node = [p for p in case.kube.pods(case.namespace) if p["spec"].get("nodeName")]
        assert sum(_requested_milli(p) for p in on_node) <= 4 * case.unit
    assert len(case.bound(later)) == 2
    assert all(case.node_of(pod) == node for pod in before)
    assert second.alive()


def test_only_the_leader_binds_and_a_standby_takes_over(own_case: Case) -> None:
    case = own_case
    case.add_nodes(1, units=8)
    lease = f"{case.scheduler}-lock"
    replicas = [case.start_scheduler(leader_elect=True, lease_namespace=case.namespace,
                                     lease_name=lease) for _ in range(2)]
    for replica in replicas:
        replica.wait_serving()  # the standby is ready too: it has nothing to sync
    first = case.job("first", pods=3)
    eventually(lambda: len(case.bound(first)) == 3, what="first job bound")
    working = [replica for replica in replicas if replica.cycles() > 0]
    assert len(working) == 1, [replica.cycles() for replica in replicas]
    leader = working[0]
    standby = next(replica for replica in replicas if replica is not leader)
    lease_namespace, lease = leader.lease  # the suite may have named another one
    holder = raw(case.kube.coordination.read_namespaced_lease, lease, lease_namespace)
    assert holder["spec"]["holderIdentity"]
    assert leader.terminate() == 0  # graceful: the lease is released at once
    second = case.job("second", pods=2)
    eventually(lambda: len(case.bound(second)) == 2, timeout=60.0,
               what="the standby binds after taking over")
    assert standby.cycles() > 0
    taken = raw(case.kube.coordination.read_namespaced_lease, lease, lease_namespace)
    assert taken["spec"]["holderIdentity"] != holder["spec"]["holderIdentity"]
