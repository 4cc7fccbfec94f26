"""The API double checks custom objects against the CRD schemas of ``conf/crds/``, as
kube-apiserver's apiextensions validation does (``staging/src/k8s.io/apiextensions-apiserver/
pkg/apiserver/validation``): what the server refuses with 422 the double refuses too, and
every custom object the project ships (``conf/``) is one the server takes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver.crdschema import crd_errors, invalid_message, schemas

ROOT = Path(__file__).resolve().parents[2]
PODGROUPS = "scheduling.volcano.sh/v1beta1/podgroups"
DEVICES = "scheduling.koordinator.sh/v1alpha1/devices"
COLLECTIONS = {kind: key for key, (kind, _, _) in schemas().items()}


def _gpu(**condition: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
            "metadata": {"name": "n1"},
            "spec": {"devices": [{"type": "gpu", "minor": 0, "health": False,
                                  "conditions": [condition]}]}}


def test_every_crd_the_project_ships_is_loaded() -> None:
    assert {"PodGroup", "Queue", "Device", "HyperNode"} <= set(COLLECTIONS)


def test_a_condition_without_its_transition_time_is_refused_as_the_server_says() -> None:
    obj = _gpu(type="Healthy", status="False", reason="Unhealthy", message="broken")
    errors = crd_errors(DEVICES, obj)
    assert errors == ["spec.devices[0].conditions[0].lastTransitionTime: Required value"]
    assert invalid_message(DEVICES, obj, errors) == (
        'Device.scheduling.koordinator.sh "n1" is invalid: '
        "spec.devices[0].conditions[0].lastTransitionTime: Required value")
    assert crd_errors(DEVICES, _gpu(type="Healthy", status="False", reason="Unhealthy",
                                    message="broken",
                                    lastTransitionTime="2026-01-01T00:00:00Z")) == []


@pytest.mark.parametrize(("spec", "problem"), [
    ({"minMember": "two"}, "spec.minMember: Invalid value: \"two\": spec.minMember in body "
                           "must be of type integer"),
    ({"minResources": {"cpu": "lots"}}, "spec.minResources.cpu: Invalid value: \"lots\""),
    ({"minResources": {"cpu": True}}, "spec.minResources.cpu: Invalid value: true"),
])
def test_podgroup_type_and_quantity_errors(spec: dict[str, Any], problem: str) -> None:
    obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
           "metadata": {"name": "pg", "namespace": "default"}, "spec": spec}
    (error,) = crd_errors(PODGROUPS, obj)
    assert error.startswith(problem), error


def test_an_enum_and_a_device_quantity_in_min_resources() -> None:
    device = _gpu(type="Healthy", status="Broken", reason="r", message="m",
                  lastTransitionTime="2026-01-01T00:00:00Z")
    (error,) = crd_errors(DEVICES, device)
    assert "Unsupported value: \"Broken\"" in error
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "pg"},
             "spec": {"minMember": 1, "minResources": {"nvidia.com/gpumem": "3000", "cpu": 1}}}
    assert crd_errors(PODGROUPS, group) == []


def _shipped() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((ROOT / "conf").rglob("*.yaml")):
        if "crds" in path.parts:
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in COLLECTIONS:
                out.append((f"{path.relative_to(ROOT)}:{doc['metadata']['name']}", doc))
    return out


@pytest.mark.parametrize(("where", "obj"), _shipped(), ids=[w for w, _ in _shipped()])
def test_shipped_custom_objects_pass_their_schema(where: str, obj: dict[str, Any]) -> None:
    assert crd_errors(COLLECTIONS[obj["kind"]], obj) == [], where
