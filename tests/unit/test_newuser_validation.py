"""Bad input a new user hits: negative quantities and objects given twice.

Negative requests, limits and node capacities are what the API server refuses
(``ValidateResourceRequirements`` / ``ValidateNodeResources`` → "must be greater than or equal
to 0"), so ``lahar simulate`` refuses them at load naming file, object and field, and the cache
(``lahar run``) reports such an object by name and skips it while scheduling the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.resource import QuantityError, resource_from_list
from scheduler.cluster.manifests import ManifestError, load_manifests
from tests.builders import make_node, make_pod, simulate


def _write(tmp_path: Path, docs: list[dict[str, Any]], name: str = "cluster.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


@pytest.mark.parametrize(
    ("docs", "words"),
    [
        pytest.param(
            [make_node("n1"), make_pod("p", cpu="-2")],
            "cluster.yaml#2: Pod default/p: field spec.containers[0].resources: "
            "resource 'cpu': '-2' must be greater than or equal to 0",
            id="pod-cpu",
        ),
        pytest.param(
            [make_pod("p", cpu="1", memory="-1Gi")],
            "Pod default/p: field spec.containers[0].resources: resource 'memory': '-1Gi'",
            id="pod-memory",
        ),
        pytest.param(
            [make_pod("p", cpu=None, limits={"nvidia.com/gpu": "-1"})],
            "resource 'nvidia.com/gpu': '-1' must be greater than or equal to 0",
            id="pod-extended-limit",
        ),
        pytest.param(
            [make_node("n1", cpu="-4")],
            "cluster.yaml#1: Node n1: field status.allocatable: resource 'cpu': '-4'",
            id="node-allocatable",
        ),
        pytest.param(
            [make_node("n1", pods="-1")],
            "Node n1: field status.allocatable: resource 'pods': '-1'",
            id="node-pods",
        ),
        pytest.param(
            [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
              "metadata": {"name": "q"}, "spec": {"weight": 1, "capability": {"cpu": "-1"}}}],
            "Queue q: field spec.capability: resource 'cpu': '-1'",
            id="queue-capability",  # Volcano's queue webhook: ValidateResourceQuantityValue
        ),
    ],
)
def test_negative_quantity_is_a_load_error_naming_file_object_and_field(
    tmp_path: Path, docs: list[dict[str, Any]], words: str
) -> None:
    with pytest.raises(ManifestError) as info:
        load_manifests([_write(tmp_path, docs)])
    assert words in str(info.value)


def test_zero_and_positive_quantities_still_load() -> None:
    resource = resource_from_list({"cpu": "0", "memory": "0", "pods": 3})
    assert resource.milli_cpu == 0 and resource.scalars["pods"] == 3
    with pytest.raises(QuantityError, match="must be greater than or equal to 0"):
        resource_from_list({"example.com/foo": "-1m"})


def test_negative_pod_in_a_running_cluster_is_reported_and_skipped() -> None:
    """What ``lahar run`` does with such a pod: an event naming it, the others are placed."""
    run = simulate([make_node("n1", cpu="4"), make_pod("bad", cpu="-2"), make_pod("good")])
    assert run.binds() == {"good": "n1"}
    warnings = [e for e in run.events() if e["involvedObject"]["name"] == "bad"]
    assert warnings and warnings[0]["type"] == "Warning"
    assert "must be greater than or equal to 0" in warnings[0]["message"]


def test_negative_device_request_is_refused_like_any_other_quantity(tmp_path: Path) -> None:
    pod = make_pod("p", limits={"volcano.sh/gpu-memory": "-4000"})
    with pytest.raises(ManifestError, match=r"volcano\.sh/gpu-memory': '-4000' must be greater"):
        load_manifests([_write(tmp_path, [pod])])


def test_object_given_twice_warns_with_both_places_and_the_later_wins(tmp_path: Path) -> None:
    first = _write(tmp_path, [make_node("n1", cpu="4"), make_pod("p", cpu="1")], "a.yaml")
    second = _write(tmp_path, [make_pod("p", cpu="2"), make_pod("p", namespace="other")],
                    "b.yaml")
    manifests, warnings = load_manifests([first, second])
    assert warnings == [
        f"{second}#1: Pod default/p is also defined at {first}#2; the later one is used"
    ]
    run = simulate([m.obj for m in manifests])
    assert run.pod("p")["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"
    assert run.node_of("p") == "n1"
    assert run.pod("p", "other")["spec"]["nodeName"] == "n1"


def test_same_name_of_another_kind_or_namespace_is_not_a_duplicate(tmp_path: Path) -> None:
    docs = [make_node("x"), make_pod("x"), make_pod("x", namespace="team")]
    _, warnings = load_manifests([_write(tmp_path, docs)])
    assert warnings == []


def test_yaml_error_names_the_document(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(make_node("n1")) + "---\nkind: Pod\nmetadata: {name: [\n")
    with pytest.raises(ManifestError, match=r"cluster\.yaml#2: not valid YAML"):
        load_manifests([str(path)])
