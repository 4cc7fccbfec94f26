"""DeviceClass quota in the ``capacity`` plugin, through ``lahar simulate``'s embedded cluster.

Volcano ``pkg/scheduler/plugins/capacity/capacity.go``: ``parseDRAResourceList`` reads
``deviceclass/<class>`` (devices) and ``<dimension>.deviceclass/<class>`` (capacity) from a
queue's lists; ``queueAllocatableWithReserved`` refuses a task whose claims
(``incrementalTaskDRA``: those the queue does not hold yet) would exceed them
(``checkDRAAllocatable``); ``jobEnqueueable`` refuses a job whose ``GetMinDRAResources`` would,
with reason ``dra-resource-exceeded``; ``addTaskDRAAllocated``/``removeTaskDRAAllocated`` count
a claim once per queue (``resourceClaimRefs``). A task's request per DeviceClass is the cache's
``buildTaskDRAInfo`` (``pkg/scheduler/cache/cache.go``).
"""

from __future__ import annotations

from typing import Any

from tests.builders import make_node, make_podgroup, make_queue, simulate
from tests.scenarios.dra_builders import (
    DRIVER,
    claim_pod,
    make_claim,
    make_class,
    make_slice,
    make_template,
)

Obj = dict[str, Any]

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: drf}
  - {name: predicates, arguments: {predicate.DRAFeatureGates: "DRAConsumableCapacity=true"}}
  - {name: capacity}
  - {name: nodeorder}
"""

SHARED = "shared-gpu.example.com"


def _queue(capability: dict[str, str]) -> Obj:
    obj = make_queue("q")
    obj["spec"]["capability"] = {"cpu": "100", "memory": "100Gi", **capability}
    return obj


def _cluster(gpus: int = 4) -> list[Obj]:
    return [make_class(), make_node("n0", cpu="16"),
            make_slice("n0", [f"gpu-{g}" for g in range(gpus)])]


def _pods(count: int, *, template: str = "one-gpu", claim: str = "") -> list[Obj]:
    out: list[Obj] = []
    for i in range(count):
        out.append(make_podgroup(f"j{i}", queue="q", min_member=1))
        out.append(claim_pod(f"p{i}", template="" if claim else template, claim=claim,
                             group=f"j{i}"))
    return out


def test_device_count_quota_stops_the_third_pod() -> None:
    """``checkDRAAllocatable``: allocated + request > ``deviceclass/<class>`` capability is
    refused; the pod waits with Volcano's log text as its reason."""
    objs = [*_cluster(), make_template("one-gpu"), _queue({f"deviceclass/{DRIVER}": "2"}),
            *_pods(3)]
    run = simulate(objs, conf=CONF)
    assert len(run.binds()) == 2
    pending = [f"p{i}" for i in range(3) if not run.node_of(f"p{i}")]
    assert len(pending) == 1
    message = run.condition(pending[0])["message"]
    assert f"Queue <q> DRA resource insufficient for candidate <{pending[0]}>" in message
    assert f"deviceclass/{DRIVER}" in message


def test_without_a_device_class_quota_every_pod_fits() -> None:
    """A DeviceClass the capability does not name is not limited (``checkDRAAllocatable``:
    no capability for the class passes through)."""
    objs = [*_cluster(), make_template("one-gpu"),
            _queue({"deviceclass/other.example.com": "1"}), *_pods(3)]
    assert len(simulate(objs, conf=CONF).binds()) == 3


def test_a_shared_claim_is_counted_once() -> None:
    """``incrementalTaskDRA`` / ``addTaskDRAAllocated``: pods of one queue sharing one claim
    take one device of the quota, so with quota 1 all three bind."""
    objs = [*_cluster(), make_claim("shared"), _queue({f"deviceclass/{DRIVER}": "1"}),
            *_pods(3, claim="shared")]
    run = simulate(objs, conf=CONF)
    assert len(run.binds()) == 3


def test_capacity_dimension_quota_with_consumable_capacity() -> None:
    """``<dimension>.deviceclass/<class>``: with the ``DRAConsumableCapacity`` gate the
    claims' ``capacity.requests`` count (``buildTaskDRAInfo``: count × request); 16Gi + 16Gi
    fit in 40Gi, a third 16Gi does not."""
    objs = [make_class(SHARED, mode="shared"), make_node("n0", cpu="16"),
            make_slice("n0", ["gpu-0", "gpu-1"], shared_memory="80Gi"),
            make_template("one-gpu", device_class=SHARED, memory="16Gi"),
            _queue({f"memory.deviceclass/{SHARED}": "40Gi"}), *_pods(3)]
    run = simulate(objs, conf=CONF)
    assert len(run.binds()) == 2
    pending = next(f"p{i}" for i in range(3) if not run.node_of(f"p{i}"))
    assert f"memory.deviceclass/{SHARED}" in run.condition(pending)["message"]


def test_capacity_dimensions_are_not_checked_with_the_gate_off() -> None:
    """``capacity.DRAConsumableCapacityEnable: false`` leaves the capacity dimensions out of
    the check (``checkDRAAllocatable``'s ``consumableCapacityEnabled``)."""
    conf = CONF.replace("{name: capacity}", "{name: capacity, arguments: "
                        "{capacity.DRAConsumableCapacityEnable: false}}")
    objs = [make_class(SHARED, mode="shared"), make_node("n0", cpu="16"),
            make_slice("n0", ["gpu-0", "gpu-1"], shared_memory="80Gi"),
            make_template("one-gpu", device_class=SHARED, memory="16Gi"),
            _queue({f"memory.deviceclass/{SHARED}": "40Gi"}), *_pods(3)]
    assert len(simulate(objs, conf=conf).binds()) == 3


def test_gang_over_the_quota_is_not_enqueued() -> None:
    """``jobEnqueueable``: a job whose ``GetMinDRAResources`` (the first ``minAvailable``
    tasks' claims) exceeds the class's capability stays Pending with
    ``insufficient dra-resource-exceeded``. As in Volcano's enqueue action, only a job with
    ``minResources`` is asked."""
    objs = [*_cluster(), make_template("one-gpu"), _queue({f"deviceclass/{DRIVER}": "2"}),
            make_podgroup("gang", queue="q", min_member=3, phase="Pending",
                          min_resources={"cpu": "3"})]
    objs += [claim_pod(f"g{i}", template="one-gpu", group="gang") for i in range(3)]
    run = simulate(objs, conf=CONF, max_cycles=4)
    assert not run.binds()
    assert run.phase("gang") == "Pending"
    messages = [e["message"] for e in run.events("Unschedulable")]
    assert "queue resource quota insufficient: insufficient dra-resource-exceeded" in messages


def test_dra_quota_can_be_switched_off() -> None:
    """``capacity.DynamicResourceAllocationEnable: false``: no DeviceClass quota."""
    conf = CONF.replace("{name: capacity}", "{name: capacity, arguments: "
                        "{capacity.DynamicResourceAllocationEnable: false}}")
    objs = [*_cluster(), make_template("one-gpu"), _queue({f"deviceclass/{DRIVER}": "2"}),
            *_pods(3)]
    assert len(simulate(objs, conf=conf).binds()) == 3


def _allocated(run: Any, name: str = "q") -> dict[str, str]:
    queue = run.cluster.objects["Queue"][name]
    return dict((queue.get("status") or {}).get("allocated") or {})


def test_queue_status_counts_devices_per_device_class() -> None:
    """``updateQueueStatus`` → ``addTaskDRAAllocatedByQueue`` and
    ``mergeDRAAllocatedIntoResourceList`` (``framework/session_dra_queue_status.go``): the
    queue's ``status.allocated`` gets ``deviceclass/<class>`` with the devices its bound pods'
    claims hold, a claim shared by several of its pods once."""
    objs = [*_cluster(), make_template("one-gpu"), make_claim("shared"),
            _queue({f"deviceclass/{DRIVER}": "4"}), *_pods(2)]
    objs += [make_podgroup("s", queue="q", min_member=1),
             claim_pod("s0", claim="shared", group="s"), claim_pod("s1", claim="shared", group="s")]
    run = simulate(objs, conf=CONF)
    assert len(run.binds()) == 4
    assert _allocated(run)[f"deviceclass/{DRIVER}"] == "3"


def test_queue_status_counts_capacity_per_device_class() -> None:
    """``mergeDRAAllocatedIntoResourceList``: ``<dimension>.deviceclass/<class>`` with the
    capacity the claims request (``buildTaskDRAInfo``, with ``DRAConsumableCapacity``)."""
    objs = [make_class(SHARED, mode="shared"), make_node("n0", cpu="16"),
            make_slice("n0", ["gpu-0"], shared_memory="80Gi"),
            make_template("one-gpu", device_class=SHARED, memory="16Gi"),
            _queue({}), *_pods(2)]
    run = simulate(objs, conf=CONF)
    assert len(run.binds()) == 2
    allocated = _allocated(run)
    assert allocated[f"deviceclass/{SHARED}"] == "2"
    assert int(allocated[f"memory.deviceclass/{SHARED}"]) == 32 * 2**30


PROPORTION = CONF.replace("{name: capacity}", "{name: proportion, arguments: "
                          "{proportion.DynamicResourceAllocationEnable: true}}")


def test_proportion_applies_the_quota_only_when_asked() -> None:
    """Ours: Volcano's ``proportion.go`` has no DRA quota (its capability keys name no task
    request, so they limit nothing); ``proportion.DynamicResourceAllocationEnable`` applies
    the ``capacity`` plugin's ``checkDRAAllocatable`` to the queue's capability."""
    objs = [*_cluster(), make_template("one-gpu"), _queue({f"deviceclass/{DRIVER}": "2"}),
            *_pods(3)]
    assert len(simulate(objs, conf=CONF.replace("{name: capacity}", "{name: proportion}"))
               .binds()) == 3
    run = simulate(objs, conf=PROPORTION)
    assert len(run.binds()) == 2
    pending = next(f"p{i}" for i in range(3) if not run.node_of(f"p{i}"))
    assert "DRA resource insufficient" in run.condition(pending)["message"]
