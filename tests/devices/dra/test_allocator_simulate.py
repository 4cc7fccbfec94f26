"""kube-scheduler's allocator table cases run through ``lahar simulate``.

Each ported case of ``test_allocator_cases.py`` (TestAllocator in k8s.io/dynamic-resource-allocation
``structured/internal/allocatortesting/allocator_testing.go``, the case of the same name) becomes
a simulate scenario: one Node (the case's node, with the case's node labels), the case's
DeviceClasses and ResourceSlices, each device the case has in use as a ResourceClaim already
allocated to it (a shared device's consumed capacity with a shareID), the case's claims, and one
pod referencing every claim. ``lahar simulate --feature-gates <the case's gates> FILE -o json``
runs it in-process and the claims' ``status.allocation`` must be the case's expected results
(kube-scheduler's comparison: results per claim and devices in any order, shareIDs not compared
by value), with the pod bound; a case expecting an error leaves the pod ``SchedulerError`` with
the allocator's text, and "no allocation" leaves it ``Unschedulable`` with the reason.

The cases whose shape does not fit a single pod on a single node are listed in ``UNFIT`` with
why, and in docs/dra.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from scheduler.api.resource import parse_quantity
from scheduler.commands.cli import main
from tests.devices.dra.builders import FIXED_SHARE, Case, _canon, labels
from tests.devices.dra.test_allocator_cases import CASES

V1 = "resource.k8s.io/v1"
_NO_SLICE = ("no slice serves the node: the session's vector filter rules the node out "
             "(`cannot allocate all claims: no ResourceSlice serves the node`) before the "
             "allocator runs, so the allocator's ")
UNFIT: dict[str, str] = {
    "no-slices": _NO_SLICE + "reason (`no device ... matches the selectors`) is not given",
    "too-many-devices-single-request": _NO_SLICE + "error (`exceeds the claim limit`) is "
    "not given: the pod is Unschedulable, not SchedulerError",
    "all-devices-invalid-CEL": _NO_SLICE + "error (`exceeds the claim limit`) is not given: "
    "the pod is Unschedulable, not SchedulerError",
}
"""Ported cases that do not run as a simulate scenario, and why."""


@pytest.fixture(autouse=True)
def _keep_log_config() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def _gates(case: Case) -> str:
    return ",".join(f"{name}={'true' if on else 'false'}"
                    for name, on in sorted(case.features.to_gates().items()))


def _in_use_claims(case: Case) -> list[dict[str, Any]]:
    """One allocated claim per device in use (reserved for a pod that is not in the
    scenario, as for a pod of another scheduler); shared devices with their consumption."""
    out = []
    entries = [(device, None) for device in case.allocated]
    entries += list(case.allocated_capacity.items())
    for i, (device, consumed) in enumerate(entries):
        result: dict[str, Any] = {"request": "r", "driver": device.driver, "pool": device.pool,
                                  "device": device.device}
        if consumed is not None:
            result["shareID"] = f"00000000-0000-4000-8000-{i:012d}"
            result["consumedCapacity"] = dict(consumed)
        out.append({"apiVersion": V1, "kind": "ResourceClaim",
                    "metadata": {"name": f"in-use-{i}", "namespace": "default",
                                 "uid": f"in-use-{i}"},
                    "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                        "deviceClassName": "in-use"}}]}},
                    "status": {"allocation": {"devices": {"results": [result]}},
                               "reservedFor": [{"resource": "pods", "name": f"holder-{i}",
                                                "uid": f"holder-{i}"}]}})
    return out


def _objects(kind: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The case's slices or claims as objects; a name used twice (the allocator does not
    care, a cluster keeps one object per name) gets a suffix that keeps the order by name."""
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for item in items:
        obj = {"apiVersion": V1, "kind": kind, **json.loads(json.dumps(item))}
        name = obj["metadata"]["name"]
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            obj["metadata"]["name"] = f"{name}-{seen[name]}"
        out.append(obj)
    return out


def _scenario(case: Case) -> list[dict[str, Any]]:
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": case.node, "labels": labels(case.node)},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}
    objs: list[dict[str, Any]] = [node]
    objs += [{"apiVersion": V1, "kind": "DeviceClass", **c} for c in case.classes]
    objs += _objects("ResourceSlice", case.slices)
    objs += _in_use_claims(case)
    claims = _objects("ResourceClaim", case.claims)
    objs += claims
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod", "namespace": "default"},
        "spec": {"schedulerName": "volcano", "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}
    if claims:
        pod["spec"]["resourceClaims"] = [
            {"name": f"c{i}", "resourceClaimName": c["metadata"]["name"]}
            for i, c in enumerate(claims)]
    objs.append(pod)
    return objs


def _normalised(allocation: dict[str, Any]) -> dict[str, Any]:
    for entry in allocation["devices"]["results"]:
        if "shareID" in entry:
            entry["shareID"] = FIXED_SHARE
        if "consumedCapacity" in entry:
            entry["consumedCapacity"] = {k: str(int(Decimal(parse_quantity(v))))
                                         for k, v in entry["consumedCapacity"].items()}
    return allocation


def _run(case: Case, path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    path.write_text(yaml.safe_dump_all(_scenario(case)))
    assert main(["simulate", "--feature-gates", _gates(case), str(path), "-o", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    return {f"{i['kind']}/{i['metadata']['name']}": i for i in items}


SIMULATED = [c for c in CASES if c.name not in UNFIT]


@pytest.mark.parametrize("case", SIMULATED, ids=[c.name for c in SIMULATED])
def test_allocator_case_through_simulate(case: Case, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """allocator_testing.go TestAllocator: the case of the same name, as a scenario."""
    items = _run(case, tmp_path / "case.yaml", capsys)
    pod = items["Pod/pod"]
    condition = next((c for c in (pod.get("status") or {}).get("conditions") or []
                      if c["type"] == "PodScheduled"), {})
    claims = [items[f"ResourceClaim/{c['metadata']['name']}"]
              for c in _objects("ResourceClaim", case.claims)]
    if case.error:
        assert not pod["spec"].get("nodeName")
        assert condition.get("reason") == "SchedulerError", condition
        assert case.error in condition["message"]
        return
    if case.nothing or case.expect:
        assert pod["spec"].get("nodeName") == case.node, condition
        got = [_normalised((c.get("status") or {})["allocation"]) for c in claims]
        expect = [_normalised(json.loads(json.dumps(e))) for e in case.expect]
        assert _canon(got) == _canon(expect)
        for claim in claims:
            assert [r["name"] for r in claim["status"]["reservedFor"]] == ["pod"]
        return
    assert not pod["spec"].get("nodeName")
    assert condition.get("reason") == "Unschedulable", condition
    assert case.reason in condition["message"]
    assert all("allocation" not in (c.get("status") or {}) for c in claims)


def test_every_case_runs_or_says_why_not() -> None:
    names = {c.name for c in CASES}
    assert set(UNFIT) <= names
    assert len(SIMULATED) + len(UNFIT) == len(CASES)
