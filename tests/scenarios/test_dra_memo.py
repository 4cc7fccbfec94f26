"""The session's memo of the DRA node check (``scheduler/framework/dracache.py``) and the CEL
program cache, seen from whole cycles.

kube-scheduler runs the structured allocator in its DynamicResources Filter for every node
(pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, ``Filter``) and compiles
each CEL expression once through its cache (k8s.io/dynamic-resource-allocation/cel/cache.go,
``Cache.GetOrCompile``). Lahar keeps the Filter's answer per claim contents and node until the
node's devices change; these tests check the answers stay those of the allocator: no device goes
twice, reasons name each pod's own claim, and the allocator runs about once per node and
placement, not once per pod and node.
"""

from __future__ import annotations

import uuid

import pytest

from scheduler.devices.dra import cel
from scheduler.framework import dra as dra_module
from tests.builders import make_node, simulate
from tests.scenarios.dra_builders import (
    DRIVER,
    GATED_CONF,
    claim_pod,
    make_class,
    make_slice,
    make_template,
    results_of,
)


def _claim_of(run, pod: str) -> dict:  # type: ignore[no-untyped-def]
    obj = run.pod(pod)
    name = obj["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    return run.cluster.objects["ResourceClaim"][f"default/{name}"]


def test_pods_of_one_template_fill_the_devices_exactly_once() -> None:
    """Many pods of one claim shape over a few nodes in one cycle: the memo answers most node
    checks, and every device still goes to one claim only (Reserve's inFlightAllocations);
    the pods left over wait, each with its own claim in its reason."""
    objs = [make_class(), make_template("one-gpu")]
    for i in range(3):
        objs += [make_node(f"n{i}", cpu="64"), make_slice(f"n{i}", ["gpu-0", "gpu-1"])]
    objs += [claim_pod(f"p{i}", template="one-gpu", cpu="1") for i in range(9)]
    run = simulate(objs)
    placed = [f"p{i}" for i in range(9) if run.node_of(f"p{i}")]
    assert len(placed) == 6
    devices = [results_of(_claim_of(run, pod))[0] for pod in placed]
    assert len(set(devices)) == 6
    for pod in (f"p{i}" for i in range(9)):
        if pod in placed:
            continue
        own = _claim_of(run, pod)["metadata"]["name"]
        reason = run.reason(pod)
        assert f"default/{own}" in reason, reason
        others = [_claim_of(run, p)["metadata"]["name"] for p in placed]
        assert not any(f"default/{name}" in reason for name in others), reason


def test_the_allocator_runs_once_per_node_and_placement(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """20 pods of one shape on 10 nodes of 4 GPUs: without the memo the Filter would run the
    allocator for every pod on every node (200 runs and more); with it about one run per node
    and two per placement (the check on the node that changed, and the allocation)."""
    calls = [0]
    real = dra_module.allocate

    def counting(**kwargs):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return real(**kwargs)

    monkeypatch.setattr(dra_module, "allocate", counting)
    objs = [make_class(), make_template("one-gpu")]
    for i in range(10):
        objs += [make_node(f"n{i}", cpu="64"),
                 make_slice(f"n{i}", [f"gpu-{g}" for g in range(4)])]
    objs += [claim_pod(f"p{i}", template="one-gpu", cpu="1") for i in range(20)]
    run = simulate(objs)
    assert len(run.binds()) == 20
    assert calls[0] <= 10 + 3 * 20, calls[0]


def test_a_node_whose_devices_were_taken_is_checked_again() -> None:
    """One GPU per node: once a pod of the cycle holds it, the memo's "fits" for the node is
    stale and the next pod of the same shape goes elsewhere or waits."""
    objs = [make_class(), make_template("one-gpu")]
    for i in range(2):
        objs += [make_node(f"n{i}", cpu="64"), make_slice(f"n{i}", ["gpu-0"])]
    objs += [claim_pod(f"p{i}", template="one-gpu", cpu="1") for i in range(3)]
    run = simulate(objs)
    nodes = sorted(run.node_of(f"p{i}") or "" for i in range(3))
    assert nodes == ["", "n0", "n1"]


def test_cel_selectors_are_compiled_once_per_expression_not_per_device() -> None:
    """Two classes (one that no pod asks for) and a claim selector over 40 nodes of 8 GPUs, 60
    pods: two programs are compiled in the whole run (the class asked for and the claim's
    selector; the other class is never compiled), however many devices and nodes they are
    evaluated on (kube-scheduler's CEL cache, ``GetOrCompile``)."""
    mark = uuid.uuid4().hex  # expressions no earlier test compiled
    classes = []
    for name, mode in (("gpu", "exclusive"), ("shared", "shared")):
        obj = make_class(name, mode=mode)
        obj["spec"]["selectors"][0]["cel"]["expression"] += f' && "{mark}" != ""'
        classes.append(obj)
    template = make_template("h100", device_class="gpu")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "H100-{mark}"'}}]
    objs = [*classes, template, make_template("plain", device_class="gpu")]
    for i in range(40):
        objs.append(make_node(f"n{i}", cpu="64"))
        slice_ = make_slice(f"n{i}", [f"gpu-{g}" for g in range(8)])
        for device in slice_["spec"]["devices"]:
            device["attributes"]["model"] = {"string": f"H100-{mark}" if i % 2 else "A100"}
        objs.append(slice_)
    objs += [claim_pod(f"p{i}", template="h100" if i % 3 == 0 else "plain", cpu="1")
             for i in range(60)]
    before = cel.compile_count()
    run = simulate(objs)
    assert len(run.binds()) == 60
    assert cel.compile_count() - before == 2
    for i in range(0, 60, 3):
        pool, _ = results_of(_claim_of(run, f"p{i}"))[0]
        assert int(pool[1:]) % 2 == 1  # the H100 nodes


def test_shares_of_one_device_get_shareids_of_their_own() -> None:
    """Four 10Gi claims share a 40Gi device, a fifth waits: the placement reuses the check's
    devices but each result gets its own shareID (kube-scheduler draws a UUID per allocated
    share, allocator.go ``allocateDevice``), so the shares stay apart in the allocated state."""
    objs = [make_class("shared", mode="shared"), make_node("n0", cpu="64"),
            make_slice("n0", ["gpu-0"], shared_memory="40Gi"),
            make_template("tenth", device_class="shared", memory="10Gi")]
    objs += [claim_pod(f"p{i}", template="tenth", cpu="1") for i in range(5)]
    run = simulate(objs, conf=GATED_CONF)
    placed = [f"p{i}" for i in range(5) if run.node_of(f"p{i}")]
    assert len(placed) == 4
    shares = [_claim_of(run, p)["status"]["allocation"]["devices"]["results"][0]["shareID"]
              for p in placed]
    assert len(set(shares)) == 4 and "check" not in shares


def test_claims_of_other_shapes_see_a_device_taken() -> None:
    """Claims of three shapes on one node: a plain one-GPU claim and one whose CEL selector
    picks the same GPU compete for it (taking it concerns both shapes' memo), while two shares
    of the other, shared GPU concern neither: one exclusive claim gets the GPU, the other
    waits, both shares fit."""
    exclusive = {"name": "gpu-0", "attributes": {"mode": {"string": "exclusive"},
                                                 "model": {"string": "H100"}},
                 "capacity": {"memory": {"value": "40Gi"}}}
    shared = make_slice("n0", ["gpu-1"], shared_memory="40Gi")["spec"]["devices"][0]
    slice_ = make_slice("n0", [])
    slice_["spec"]["devices"] = [exclusive, shared]
    h100 = make_template("h100")
    h100["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "H100"'}}]
    objs = [make_class(), make_class("shared", mode="shared"), make_node("n0", cpu="64"),
            slice_, make_template("plain"), h100,
            make_template("tenth", device_class="shared", memory="10Gi"),
            claim_pod("s0", template="tenth"), claim_pod("a", template="h100"),
            claim_pod("s1", template="tenth"), claim_pod("b", template="plain")]
    run = simulate(objs, conf=GATED_CONF)
    assert sorted(run.binds()) in (["a", "s0", "s1"], ["b", "s0", "s1"])
    winner = "a" if run.node_of("a") else "b"
    assert results_of(_claim_of(run, winner)) == [("n0", "gpu-0")]
    assert {results_of(_claim_of(run, s))[0] for s in ("s0", "s1")} == {("n0", "gpu-1")}
