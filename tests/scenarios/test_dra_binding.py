"""The bind waits for the devices' binding conditions (``DRADeviceBindingConditions``).

kube-scheduler ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``:
``PreBind`` polls the written claim until ``isClaimReadyForBinding`` (every
``bindingConditions`` entry True in the device's ``status.devices`` conditions), fails on a
True ``bindingFailureConditions`` entry (``claim <name> binding failed: reason=..., message=...``)
and after ``bindingTimeout`` (``isClaimTimeout``: ``claim <name> binding timeout``); a failed
PreBind runs Unreserve, which releases the claim. Run on the embedded cluster as the API
double, its claim reads scripted.
"""

from __future__ import annotations

from typing import Any

from tests.scenarios.dra_builders import DRIVER, claim_pod, make_claim, make_class, make_slice
from tests.scenarios.test_dra import _simulate_with, _Writer

READY, FAILED = "dra.example.com/attached", "dra.example.com/failed"
GATES = "DRADeviceBindingConditions=true"


def _objects() -> list[dict[str, Any]]:
    from tests.builders import make_node

    slice_ = make_slice("n0", ["gpu-0"])
    device = slice_["spec"]["devices"][0]
    device["bindingConditions"] = [READY]
    device["bindingFailureConditions"] = [FAILED]
    device["bindsToNode"] = True
    return [make_class(), make_node("n0", cpu="16"), slice_, make_claim("c"),
            claim_pod("p", claim="c")]


def _run(condition: str | None, *, after_reads: int = 2,
         drivers_ready: bool = False) -> tuple[Any, list[float]]:
    """Simulate with the claim's device getting ``condition`` True after ``after_reads``
    reads of the claim by the bind (None: never)."""
    sleeps: list[float] = []
    now = [0.0]

    def setup(cluster, cache):  # type: ignore[no-untyped-def]
        cluster.drivers_ready = drivers_ready  # False: conditions come from the reads only
        writer = _Writer(cluster, cluster.update_resource_claim_status)
        reads = [0]

        def get(*, namespace: str, name: str):  # type: ignore[no-untyped-def]
            reads[0] += 1
            stored = cluster.objects["ResourceClaim"][f"{namespace}/{name}"]
            if condition is not None and reads[0] > after_reads and \
                    (stored.get("status") or {}).get("allocation"):
                stored["status"]["devices"] = [{
                    "driver": DRIVER, "pool": "n0", "device": "gpu-0",
                    "conditions": [{"type": condition, "status": "True", "reason": "Tested",
                                    "message": "as scripted"}]}]
            return cluster.get_resource_claim(namespace=namespace, name=name)

        writer.get_resource_claim = get  # type: ignore[method-assign]
        cache.writer = writer

        def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            now[0] += seconds

        cache.dra.sleep = sleep
        cache.dra.clock = lambda: now[0]
        cache.dra.binding_timeout = 10.0

    conf = ("actions: \"enqueue, allocate, backfill\"\ntiers:\n"
            "- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n"
            "- plugins:\n  - {name: predicates, arguments: "
            f"{{predicate.DRAFeatureGates: \"{GATES}\"}}}}\n  - {{name: nodeorder}}\n")
    return _simulate_with(_objects(), setup, max_cycles=2, conf=conf), sleeps


def test_bind_waits_until_the_binding_conditions_are_true() -> None:
    """``isClaimReadyForBinding`` false twice, then true: bound after two polls."""
    run, sleeps = _run(READY)
    assert run.node_of("p") == "n0"
    assert len(sleeps) == 2
    claim = run.cluster.objects["ResourceClaim"]["default/c"]
    result = claim["status"]["allocation"]["devices"]["results"][0]
    assert result["bindingConditions"] == [READY]


def test_a_binding_failure_condition_fails_the_bind_and_releases_the_claim() -> None:
    """A True ``bindingFailureConditions`` entry: PreBind's error, Unreserve frees the claim."""
    run, _ = _run(FAILED)
    assert run.node_of("p") is None
    messages = [e["message"] for e in run.events("FailedScheduling")]
    assert any("claim c binding failed: reason=Tested" in m for m in messages), messages
    claim = run.cluster.objects["ResourceClaim"]["default/c"]
    assert "allocation" not in (claim.get("status") or {})


def test_binding_conditions_never_true_time_out() -> None:
    """``isClaimTimeout``: past the binding timeout the bind fails."""
    run, sleeps = _run(None)
    assert run.node_of("p") is None
    assert sum(sleeps) >= 10.0
    messages = [e["message"] for e in run.events("FailedScheduling")]
    assert any("claim c binding timeout" in m for m in messages), messages


def test_the_simulated_drivers_report_the_conditions_and_the_pod_binds_at_once() -> None:
    """``lahar simulate`` has no driver to set the conditions; its cluster reports them True
    when the allocation is written (as a healthy driver does), so the bind does not wait."""
    run, sleeps = _run(None, drivers_ready=True)
    assert run.node_of("p") == "n0"
    assert sleeps == []
    claim = run.cluster.objects["ResourceClaim"]["default/c"]
    device = claim["status"]["devices"][0]
    assert device["conditions"][0]["type"] == READY
    assert device["conditions"][0]["status"] == "True"
