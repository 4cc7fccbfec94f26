"""Dynamic Resource Allocation in the session, through the embedded cluster.

The behaviour is kube-scheduler's ``DynamicResources`` plugin
(pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go): PreFilter finds the pod's
claims (``claimsForPod``, a template's claim through ``status.resourceClaimStatuses``), Filter
runs the structured allocator per node, Reserve keeps the allocation in memory so no other pod
of the cycle gets the device (``inFlightAllocations``), Unreserve drops it, and PreBind writes
``status.allocation`` and ``status.reservedFor`` (``bindClaim``) before the Binding. Gangs are
Volcano's: a gang's claims are committed or discarded with the gang's Statement.
"""

from __future__ import annotations

import copy

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import ConflictError
from scheduler.cluster.simulation import SimulationResult, build_simulation
from tests.builders import Run, conf_of, make_node, make_podgroup, simulate
from tests.scenarios.dra_builders import (
    GATED_CONF,
    claim_pod,
    make_claim,
    make_class,
    make_slice,
    make_template,
    reserved_names,
    results_of,
)


def _claim_of(run, pod: str) -> dict:  # type: ignore[no-untyped-def]
    """The claim a pod's ``gpu`` entry stands for (its own or its template's)."""
    obj = run.pod(pod)
    entry = obj["spec"]["resourceClaims"][0]
    source = entry.get("source", entry)
    name = source.get("resourceClaimName") or next(
        s["resourceClaimName"] for s in obj["status"]["resourceClaimStatuses"]
        if s["name"] == entry["name"])
    return run.cluster.objects["ResourceClaim"][f"default/{name}"]


def _cluster(nodes: int = 2, gpus: int = 2) -> list[dict]:
    objs = [make_class()]
    for i in range(nodes):
        objs += [make_node(f"n{i}", cpu="16"),
                 make_slice(f"n{i}", [f"gpu-{g}" for g in range(gpus)])]
    return objs


def test_gang_claims_from_a_template_get_distinct_devices() -> None:
    """Reserve's inFlightAllocations: four pods of one cycle, four different devices; PreBind's
    bindClaim writes each claim's allocation and reserves it for its pod."""
    objs = [*_cluster(), make_template("one-gpu"), make_podgroup("train", min_member=4)]
    objs += [claim_pod(f"train-{i}", template="one-gpu", group="train") for i in range(4)]
    run = simulate(objs)
    assert len(run.binds()) == 4
    devices = []
    for i in range(4):
        claim = _claim_of(run, f"train-{i}")
        assert reserved_names(claim) == [f"train-{i}"]
        (pool, device), = results_of(claim)
        assert pool == run.node_of(f"train-{i}")  # a node-local device of the pod's node
        devices.append((pool, device))
        meta = claim["metadata"]
        assert meta["ownerReferences"][0]["name"] == f"train-{i}"
        assert meta["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
        assert meta["name"].startswith(f"train-{i}-gpu-")
    assert len(set(devices)) == 4


def test_a_gang_that_cannot_get_all_its_devices_allocates_none() -> None:
    """Three devices for a gang of four: the gang's Statement is discarded, and with it every
    claim it had allocated in the session (Unreserve); nothing is written."""
    objs = [make_class(), make_node("n0", cpu="16"), make_slice("n0", ["gpu-0", "gpu-1", "gpu-2"]),
            make_template("one-gpu"), make_podgroup("train", min_member=4)]
    objs += [claim_pod(f"train-{i}", template="one-gpu", group="train") for i in range(4)]
    run = simulate(objs)
    assert run.binds() == {}
    for i in range(4):
        claim = _claim_of(run, f"train-{i}")
        assert "allocation" not in claim.get("status", {})
    # the devices are free for a later pod of the same cycle
    run = simulate([*objs, make_template("solo"), claim_pod("solo", template="solo")])
    assert run.node_of("solo") == "n0"


def test_two_pods_never_get_the_same_exclusive_device() -> None:
    """One device, two claims: the second pod waits with the allocator's reason, naming its
    claim (kube-scheduler: "cannot allocate all claims")."""
    objs = [make_class(), make_node("n0", cpu="16"), make_slice("n0", ["gpu-0"]),
            make_claim("a"), make_claim("b"), claim_pod("pa", claim="a"), claim_pod("pb", claim="b")]
    run = simulate(objs)
    assert len(run.binds()) == 1
    waiting = "pb" if run.node_of("pa") else "pa"
    assert run.condition(waiting)["reason"] == "Unschedulable"
    assert f"default/{waiting[1]}" in run.reason(waiting)


def test_a_shared_claim_is_allocated_once_and_reserved_for_each_pod() -> None:
    """A claim referenced by two pods (claimsForPod, claim already allocated): the second pod
    goes where the allocation is available and is added to reservedFor."""
    objs = [*_cluster(nodes=3, gpus=1), make_claim("shared"),
            claim_pod("p1", claim="shared"), claim_pod("p2", claim="shared")]
    run = simulate(objs)
    assert run.node_of("p1") and run.node_of("p1") == run.node_of("p2")
    claim = run.cluster.objects["ResourceClaim"]["default/shared"]
    assert sorted(reserved_names(claim)) == ["p1", "p2"]
    assert len(results_of(claim)) == 1


def test_devices_allocated_before_a_restart_are_not_handed_out_again() -> None:
    """The allocated state is built from the claims' status.allocation before the first cycle
    (the informer's claims in kube-scheduler's allocatedDevices tracker)."""
    used = make_claim("used", status={
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                                 "pool": "n0", "device": "gpu-0"}]},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                           {"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]}},
        "reservedFor": [{"resource": "pods", "name": "old", "uid": "old-uid"}]})
    objs = [make_class(), make_node("n0", cpu="16"), make_slice("n0", ["gpu-0", "gpu-1"]), used,
            make_template("one-gpu"), claim_pod("new-0", template="one-gpu"),
            claim_pod("new-1", template="one-gpu")]
    run = simulate(objs)
    placed = [p for p in ("new-0", "new-1") if run.node_of(p)]
    assert len(placed) == 1
    assert results_of(_claim_of(run, placed[0])) == [("n0", "gpu-1")]


def test_sharing_a_device_by_consumable_capacity() -> None:
    """DRAConsumableCapacity on through the conf: two 16Gi claims share a 40Gi device; a third
    would exceed its capacity and waits."""
    objs = [make_class("shared", mode="shared"), make_node("n0", cpu="16"),
            make_slice("n0", ["gpu-0"], shared_memory="40Gi"),
            make_template("half", device_class="shared", memory="16Gi")]
    objs += [claim_pod(f"p{i}", template="half") for i in range(3)]
    run = simulate(objs, conf=GATED_CONF)
    assert len(run.binds()) == 2
    waiting = next(p for p in ("p0", "p1", "p2") if not run.node_of(p))
    assert run.condition(waiting)["reason"] == "Unschedulable"


def test_an_allocator_error_is_a_scheduler_error() -> None:
    """A request for a gated feature that is off is an error, not "no device fits": the pod's
    condition has reason SchedulerError and the allocator's text (schedulingCycle's
    FitError vs. error in kube-scheduler)."""
    objs = [make_class("shared", mode="shared"), make_node("n0", cpu="16"),
            make_slice("n0", ["gpu-0"], shared_memory="40Gi"),
            make_claim("c", device_class="shared", memory="16Gi"), claim_pod("p", claim="c")]
    run = simulate(objs)
    assert run.binds() == {}
    assert run.condition("p")["reason"] == "SchedulerError"
    assert "DRAConsumableCapacity" in run.reason("p")


def test_claims_that_do_not_exist_keep_the_pod_pending_with_the_reason() -> None:
    """PreFilter: a missing claim, and a template the controller could not use."""
    objs = [*_cluster(nodes=1), claim_pod("p1", claim="nope"),
            claim_pod("p2", template="no-template")]
    run = simulate(objs)
    assert run.binds() == {}
    assert 'resourceclaim "default/nope" not found' in run.reason("p1")
    assert "ResourceClaimTemplate default/no-template" in run.reason("p2")


def test_the_1_28_pod_shape_is_read() -> None:
    """spec.resourceClaims[].source.resourceClaimTemplateName (Kubernetes 1.28–1.30)."""
    objs = [*_cluster(nodes=1), make_template("one-gpu"), make_claim("named"),
            claim_pod("t", template="one-gpu", legacy=True),
            claim_pod("n", claim="named", legacy=True)]
    run = simulate(objs)
    assert run.node_of("t") == "n0" and run.node_of("n") == "n0"
    assert reserved_names(_claim_of(run, "n")) == ["n"]


def test_a_write_conflict_is_retried_on_the_claim_read_again() -> None:
    """PreBind's update with the claim's resourceVersion; a conflict re-reads the claim and
    writes again while it is still free."""
    objs = [*_cluster(nodes=1), make_claim("c"), claim_pod("p", claim="c")]
    conflicts = []

    def setup(cluster, cache):  # type: ignore[no-untyped-def]
        def once(claim):  # type: ignore[no-untyped-def]
            if not conflicts:
                conflicts.append(claim["metadata"]["name"])
                raise ConflictError("the object has been modified")
            return cluster.update_resource_claim_status(claim)

        cache.writer = _Writer(cluster, once)

    run = _simulate_with(objs, setup)
    assert conflicts == ["c"]
    assert run.node_of("p") == "n0"
    assert reserved_names(run.cluster.objects["ResourceClaim"]["default/c"]) == ["p"]


def test_a_claim_allocated_elsewhere_meanwhile_fails_the_bind_and_resyncs() -> None:
    """The claim was allocated by someone else after the cache read it: the bind fails as a
    failed Binding does (the task is rolled back and retried), no device is written twice."""
    objs = [*_cluster(nodes=1), make_claim("c"), claim_pod("p", claim="c")]

    def setup(cluster, cache):  # type: ignore[no-untyped-def]
        original = cluster.update_resource_claim_status

        def stale(claim):  # type: ignore[no-untyped-def]
            stored = cluster.objects["ResourceClaim"]["default/c"]
            if "allocation" not in stored.get("status", {}):
                other = copy.deepcopy(claim["status"]["allocation"])
                other["devices"]["results"][0]["device"] = "elsewhere"
                stored["status"] = {"allocation": other}
                stored["metadata"]["resourceVersion"] = "9999"
                raise ConflictError("the object has been modified")
            return original(claim)

        cache.writer = _Writer(cluster, stale)

    run = _simulate_with(objs, setup, max_cycles=3)
    assert run.node_of("p") is None
    failed = [e for e in run.events("FailedScheduling") if "allocated elsewhere" in e["message"]]
    assert failed


class _Writer:
    """The embedded cluster as the cache's writer, with the claim status write replaced."""

    def __init__(self, cluster, update) -> None:  # type: ignore[no-untyped-def]
        self.cluster = cluster
        self.update_resource_claim_status = update

    def get_resource_claim(self, *, namespace: str, name: str):  # type: ignore[no-untyped-def]
        return self.cluster.get_resource_claim(namespace=namespace, name=name)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.cluster, name)


def _simulate_with(objs, setup, max_cycles: int = 20, conf=None):  # type: ignore[no-untyped-def]
    manifests = [Manifest(f"test#{i}", obj) for i, obj in enumerate(objs)]
    cluster, cache, scheduler = build_simulation(manifests, conf=conf_of(conf), setup=setup)
    result = SimulationResult(cluster=cluster)
    cluster.take_changes()
    while result.cycles < max_cycles:
        scheduler.run_once()
        cache.flush()
        result.cycles += 1
        cluster.clock.advance(1.0)
        if cluster.take_changes() == 0:
            result.settled = True
            break
    return Run(result)


def test_a_failed_binding_releases_the_claims_written_for_it() -> None:
    """Unreserve after a failed PreBind/Bind: the pod leaves reservedFor and a claim no other
    pod holds is deallocated; the pod is bound on a later cycle."""
    from scheduler.cache.interface import BindError

    objs = [*_cluster(nodes=1), make_claim("c"), claim_pod("p", claim="c")]
    seen: list[dict] = []
    writes: list[list[str]] = []

    def setup(cluster, cache):  # type: ignore[no-untyped-def]
        def update(claim):  # type: ignore[no-untyped-def]
            writes.append(reserved_names(claim))
            return cluster.update_resource_claim_status(claim)

        writer = _Writer(cluster, update)

        def bind(**kwargs):  # type: ignore[no-untyped-def]
            if not seen:
                seen.append(copy.deepcopy(cluster.objects["ResourceClaim"]["default/c"]))
                raise BindError("node is gone", status=500)
            return cluster.bind(**kwargs)

        writer.bind = bind  # type: ignore[attr-defined]
        cache.writer = writer

    run = _simulate_with(objs, setup)
    assert reserved_names(seen[0]) == ["p"]  # written before the Binding
    assert writes == [["p"], [], ["p"]]  # reserved, released after the failure, again
    assert run.node_of("p") == "n0"
    claim = run.cluster.objects["ResourceClaim"]["default/c"]
    assert reserved_names(claim) == ["p"] and len(results_of(claim)) == 1
    assert any("node is gone" in e["message"] for e in run.events("FailedScheduling"))


def test_preemption_counts_the_devices_a_victim_frees() -> None:
    """A high-priority pod whose claim needs the only GPU preempts the low-priority pod holding
    it: the victim's claim is freed in the session (kube-scheduler's DynamicResources
    PostFilter/preemption counts the victims' devices), and once the victim is gone the
    embedded cluster deletes its template claim as the garbage collector would."""
    from tests.builders import make_priority_class
    from tests.scenarios.preemption_helpers import e2e_conf

    objs = [make_class(), make_node("n0", cpu="16"), make_slice("n0", ["gpu-0"]),
            make_template("one-gpu"), make_priority_class("low", 10),
            make_priority_class("high", 1000),
            claim_pod("victim", template="one-gpu", priority_class="low")]
    first = simulate(objs)
    assert first.node_of("victim") == "n0"
    after = [copy.deepcopy(o) for o in first.cluster.all_objects() if o["kind"] != "Event"]
    after.append(claim_pod("boss", template="one-gpu", priority_class="high"))
    run = simulate(after, conf=e2e_conf(actions="enqueue, allocate, preempt, backfill"))
    evicted = [e["involvedObject"]["name"] for e in run.events("Evict")
               if e["involvedObject"]["kind"] == "Pod"]
    assert evicted == ["victim"]
    assert run.node_of("boss") == "n0"
    names = {c["metadata"]["name"] for c in run.cluster.objects["ResourceClaim"].values()}
    assert not any(name.startswith("victim-") for name in names)
    assert results_of(_claim_of(run, "boss")) == [("n0", "gpu-0")]


def test_a_claim_reserved_for_256_pods_takes_no_more() -> None:
    """ResourceClaimReservedForMaxSize (256): PreFilter refuses a further pod."""
    reserved = [{"resource": "pods", "name": f"old-{i}", "uid": f"uid-{i}"} for i in range(256)]
    full = make_claim("full", status={
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                                 "pool": "n0", "device": "gpu-0"}]}},
        "reservedFor": reserved})
    run = simulate([*_cluster(nodes=1), full, claim_pod("late", claim="full")])
    assert run.node_of("late") is None
    assert "in use by 256 pods" in run.reason("late")
