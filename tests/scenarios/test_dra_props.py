"""Property tests of DRA in the session: whatever the cluster and the mix of gangs, single
pods and shared claims, no exclusive device is allocated to two claims, every bound pod's claims
are allocated and reserved for it, no claim of an unbound pod is left reserved for it, and a gang
is bound whole or not at all (kube-scheduler's allocatedDevices tracking across Reserve and
Unreserve; Volcano's gang Statement)."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_podgroup, simulate
from tests.scenarios.dra_builders import (
    claim_pod,
    make_claim,
    make_class,
    make_slice,
    make_template,
    reserved_names,
    results_of,
)

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

workload = st.fixed_dictionaries({
    "nodes": st.integers(1, 3),
    "devices": st.integers(0, 3),
    "gangs": st.lists(st.integers(1, 4), max_size=3),
    "singles": st.integers(0, 3),
    "shared": st.integers(0, 3),
})


@SETTINGS
@given(workload)
def test_devices_are_never_handed_out_twice(shape: dict) -> None:  # type: ignore[type-arg]
    objs = [make_class(), make_template("one-gpu"), make_claim("shared")]
    for n in range(shape["nodes"]):
        objs += [make_node(f"n{n}", cpu="64"),
                 make_slice(f"n{n}", [f"gpu-{d}" for d in range(shape["devices"])])]
    gangs: dict[str, list[str]] = {}
    for g, size in enumerate(shape["gangs"]):
        objs.append(make_podgroup(f"g{g}", min_member=size))
        gangs[f"g{g}"] = [f"g{g}-{i}" for i in range(size)]
        objs += [claim_pod(name, template="one-gpu", group=f"g{g}") for name in gangs[f"g{g}"]]
    objs += [claim_pod(f"s{i}", template="one-gpu") for i in range(shape["singles"])]
    objs += [claim_pod(f"sh{i}", claim="shared") for i in range(shape["shared"])]
    run = simulate(objs)
    claims = run.cluster.objects["ResourceClaim"]
    held = Counter(device for claim in claims.values() for device in results_of(claim))
    assert all(count == 1 for count in held.values()), held
    bound = run.binds()
    for claim in claims.values():
        for pod in reserved_names(claim):
            assert pod in bound, f"{claim['metadata']['name']} reserved for unbound {pod}"
        if reserved_names(claim):
            (pool, _), = results_of(claim)
            assert all(bound[pod] == pool for pod in reserved_names(claim))
    for pod in bound:
        obj = run.pod(pod)
        entry = obj["spec"]["resourceClaims"][0]
        name = entry.get("resourceClaimName") or obj["status"]["resourceClaimStatuses"][0][
            "resourceClaimName"]
        assert pod in reserved_names(claims[f"default/{name}"])
    for members in gangs.values():
        placed = [pod for pod in members if pod in bound]
        assert placed in ([], members)
