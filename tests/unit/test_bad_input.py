"""Bad input files through the command line: exit 2 and a message naming what is wrong, never
a traceback.

Each file under ``tests/data/bad/`` is run as a user runs it (``python -m scheduler ...`` in a
subprocess, from the repository root so the paths in the messages are the ones given). What the
Kubernetes API server refuses (names that are not DNS-1123, a pod without containers, ``int32``
fields out of range, a PriorityClass that does not exist) is refused the same way; the
validators' boundaries are tested in process below.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.errors import ObjectError
from scheduler.api.validation import (
    INT32_MAX,
    INT32_MIN,
    dns1123_label_problem,
    dns1123_subdomain_problem,
    int32_problem,
    validate_object,
)
from scheduler.cluster.manifests import ManifestError, load_manifests
from scheduler.confyaml import UnreadableFile, read_text
from tests.builders import make_node, make_pod, make_podgroup

REPO = Path(__file__).resolve().parents[2]
BAD = "tests/data/bad"
QUICKSTART = "conf/samples/quickstart.yaml"


def _lahar(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", *args], cwd=REPO, capture_output=True, text=True,
        timeout=120, check=False, stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


# -- files that are not UTF-8 --------------------------------------------------------------------
_BINARY_YAML = f"error: {BAD}/binary.yaml: not UTF-8 text (byte 0xd3 at offset 28, line 3)"
_BINARY_CONF = f"error: {BAD}/binary.conf: not UTF-8 text (byte 0xe9 at offset 21, line 1)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("simulate", f"{BAD}/binary.yaml"), _BINARY_YAML, id="simulate"),
        pytest.param(("simulate", f"{BAD}/utf16.yaml"),
                     f"error: {BAD}/utf16.yaml: not UTF-8 text (UTF-16, by its byte order mark",
                     id="simulate-utf16"),
        pytest.param(("conf", "check", f"{BAD}/binary.conf"), _BINARY_CONF, id="conf-check"),
        pytest.param(("simulate", QUICKSTART, "--conf", f"{BAD}/binary.conf"), _BINARY_CONF,
                     id="simulate-conf"),
        pytest.param(("inspect", "gpushare", f"{BAD}/binary.yaml"), _BINARY_YAML,
                     id="inspect-gpushare"),
        pytest.param(("inspect", "devices", f"{BAD}/binary.yaml"), _BINARY_YAML,
                     id="inspect-devices"),
    ],
)
def test_a_file_that_is_not_utf8_is_named_with_where_decoding_stopped(
    args: tuple[str, ...], message: str
) -> None:
    result = _lahar(*args)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith(message)


def test_read_text_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(UnreadableFile, match=rf"^{missing}: cannot read: No such file"):
        read_text(missing)
    accented = tmp_path / "accented.yaml"
    accented.write_bytes("# défaut, ノード\r\nkind: Node\n".encode())
    assert read_text(accented) == "# défaut, ノード\r\nkind: Node\n"


# -- files without objects -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("files", "message"),
    [
        pytest.param((f"{BAD}/empty.yaml",), f"error: no objects in {BAD}/empty.yaml",
                     id="empty"),
        pytest.param((f"{BAD}/comments-only.yaml",),
                     f"error: no objects in {BAD}/comments-only.yaml", id="comments-only"),
        pytest.param((f"{BAD}/empty.yaml", f"{BAD}/comments-only.yaml"),
                     f"error: no objects in {BAD}/empty.yaml, {BAD}/comments-only.yaml",
                     id="both"),
    ],
)
def test_no_objects_in_any_file_is_an_error_naming_them(
    files: tuple[str, ...], message: str
) -> None:
    result = _lahar("simulate", *files)
    assert result.returncode == 2
    assert result.stderr.strip() == message


def test_a_file_without_objects_beside_others_is_a_warning() -> None:
    result = _lahar("simulate", f"{BAD}/empty.yaml", f"{BAD}/system-priorityclass.yaml",
                    "-o", "json")
    assert result.returncode == 0
    assert f"warning: {BAD}/empty.yaml: no objects in the file" in result.stderr.splitlines()
    pods = [i for i in yaml.safe_load(result.stdout)["items"] if i["kind"] == "Pod"]
    assert [p["spec"].get("nodeName") for p in pods] == ["node-a"]


def test_inspect_warns_of_a_file_without_objects() -> None:
    result = _lahar("inspect", "gpushare", f"{BAD}/empty.yaml")
    assert result.returncode == 0
    assert result.stderr.strip() == f"warning: {BAD}/empty.yaml: no objects in the file"


# -- what the API server refuses -----------------------------------------------------------------
REFUSED = {
    "no-containers": "no-containers.yaml#2: Pod team-a/empty-pod: field spec.containers: "
    "Required value",
    "minmember-overflow": "minmember-overflow.yaml#1: PodGroup default/train: field "
    "spec.minMember: must be an int32 (at most 2147483647), got 2147483648",
    "minmember-negative": "minmember-negative.yaml#1: PodGroup default/train: field "
    "spec.minMember: must be greater than or equal to 0, got -1",
    "priority-overflow": "priority-overflow.yaml#1: Pod default/urgent: field spec.priority: "
    "must be an int32 (at most 2147483647), got 3000000000",
    "bad-node-name": "bad-node-name.yaml#2: Node My Node: field metadata.name: Invalid value "
    "'My Node': a lowercase RFC 1123 subdomain must consist of",
    "bad-namespace": "bad-namespace.yaml#1: Pod Team_A/web: field metadata.namespace: Invalid "
    "value 'Team_A': a lowercase RFC 1123 label must consist of",
    "missing-priorityclass": "missing-priorityclass.yaml#2: Pod team-a/report: field "
    "spec.priorityClassName: no PriorityClass with name batch-high was found",
}
"""File under ``tests/data/bad/`` → the start of its error (after ``error: tests/data/bad/``)."""


@pytest.mark.parametrize(("name", "message"), REFUSED.items(), ids=list(REFUSED))
def test_what_the_api_server_refuses_is_refused_naming_file_document_object_field(
    name: str, message: str
) -> None:
    result = _lahar("simulate", f"{BAD}/{name}.yaml")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {BAD}/{message}")


def test_the_built_in_priority_classes_need_no_manifest() -> None:
    result = _lahar("simulate", f"{BAD}/system-priorityclass.yaml")
    assert result.returncode == 0, result.stderr
    assert "kube-system/dns" in result.stdout


# -- the validators' boundaries, in process ------------------------------------------------------
def test_int32_bounds() -> None:
    assert int32_problem(INT32_MAX) is None and int32_problem(2147483647) is None
    assert int32_problem(INT32_MIN) is None
    assert int32_problem(2147483648) == "must be an int32 (at most 2147483647), got 2147483648"
    assert int32_problem(INT32_MIN - 1) is not None
    assert int32_problem(0, minimum=0) is None
    assert int32_problem(-1, minimum=0) == "must be greater than or equal to 0, got -1"
    assert int32_problem(True) == "must be an integer, got True"
    assert int32_problem("5") == "must be an integer, got '5'"


def _subdomain(length: int) -> str:
    """A valid-looking name of ``length`` characters: 63-character labels joined by dots."""
    labels: list[str] = []
    while sum(map(len, labels)) + len(labels) < length:
        room = length - (sum(map(len, labels)) + len(labels))
        labels.append("a" * min(63, room))
    return ".".join(labels)


def test_subdomain_length_and_characters() -> None:
    assert len(_subdomain(253)) == 253 and len(_subdomain(254)) == 254
    assert dns1123_subdomain_problem(_subdomain(253)) is None
    assert dns1123_subdomain_problem(_subdomain(254)) == "must be no more than 253 characters"
    for good in ("node-a", "node-a.example.com", "0", "10.0.0.1"):
        assert dns1123_subdomain_problem(good) is None, good
    for bad in ("My Node", "Node-A", "-a", "a-", "a..b", ".a", "a_b", "", "ノード"):
        assert dns1123_subdomain_problem(bad) is not None, bad


def test_label_length_and_characters() -> None:
    assert dns1123_label_problem("a" * 63) is None
    assert dns1123_label_problem("a" * 64) == "must be no more than 63 characters"
    for bad in ("team.a", "Team", "team_a", "-team", ""):
        assert dns1123_label_problem(bad) is not None, bad


@pytest.mark.parametrize(
    ("namespace", "refused"),
    [("a" * 63, False), ("a" * 64, True), ("team.a", True), ("kube-system", False)],
)
def test_a_pods_namespace_is_a_label(namespace: str, refused: bool) -> None:
    pod = make_pod("p", namespace=namespace)
    if not refused:
        validate_object("Pod", pod)
        return
    with pytest.raises(ObjectError, match=r"field metadata\.namespace: Invalid value"):
        validate_object("Pod", pod)


@pytest.mark.parametrize(
    ("kind", "obj", "field"),
    [
        pytest.param("Namespace", {"metadata": {"name": "team.a"}}, "metadata.name",
                     id="namespace-name-is-a-label"),
        pytest.param("PriorityClass", {"metadata": {"name": "high"}, "value": 2**31},
                     "value", id="priorityclass-value"),
        pytest.param("Queue", {"metadata": {"name": "q"}, "spec": {"priority": 2**31}},
                     "spec.priority", id="queue-priority"),
        pytest.param("PodGroup", {"metadata": {"name": "g"},
                                  "spec": {"minTaskMember": {"worker": 2**31}}},
                     "spec.minTaskMember[worker]", id="min-task-member"),
        pytest.param("Pod", {"metadata": {"name": "p"}, "spec": {"containers": [{}],
                                                                 "priority": "high"}},
                     "spec.priority", id="pod-priority-not-an-integer"),
        pytest.param("Pod", {"metadata": {"name": "p"}, "spec": {}}, "spec.containers",
                     id="pod-without-containers-key"),
        pytest.param("Pod", {"metadata": {"name": "p"}, "spec": "none"}, "spec",
                     id="pod-spec-not-a-map"),
        pytest.param("Device", {"metadata": {"name": "Node A"}}, "metadata.name",
                     id="custom-resource-name"),
        pytest.param("Node", {"metadata": {"name": "n"}, "status": "Ready"}, "status",
                     id="node-status-not-a-map"),
        pytest.param("Node", {"metadata": {"name": "n"}, "status": {"allocatable": 4}},
                     "status.allocatable", id="node-allocatable-not-a-map"),
        pytest.param("Pod", {"metadata": {"name": "p"}, "spec": {
            "containers": [{"resources": {"requests": ["cpu"]}}]}},
                     "spec.containers[0].resources.requests", id="requests-not-a-map"),
        pytest.param("Pod", {"metadata": {"name": "p"}, "spec": {
            "containers": [{}], "schedulerName": ["volcano"]}},
                     "spec.schedulerName", id="scheduler-name-not-a-string"),
        pytest.param("PodGroup", {"metadata": {"name": "g"}, "status": {"running": "3"}},
                     "status.running", id="podgroup-running-not-an-integer"),
        pytest.param("Queue", {"metadata": {"name": "q"}, "spec": {"guarantee": 1.5}},
                     "spec.guarantee", id="queue-guarantee-not-a-map"),
    ],
)
def test_validate_object_refuses(kind: str, obj: dict[str, Any], field: str) -> None:
    with pytest.raises(ObjectError) as info:
        validate_object(kind, obj)
    assert info.value.field == field


def _write(tmp_path: Path, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_int32_max_min_member_loads_and_one_more_is_refused(tmp_path: Path) -> None:
    manifests, _ = load_manifests([_write(tmp_path, [make_podgroup("g", min_member=INT32_MAX)])])
    assert len(manifests) == 1
    with pytest.raises(ManifestError, match=r"cluster\.yaml#1: PodGroup default/g: field "
                                            r"spec\.minMember: must be an int32"):
        load_manifests([_write(tmp_path, [make_podgroup("g", min_member=INT32_MAX + 1)])])


def test_a_253_character_node_name_loads_and_254_is_refused(tmp_path: Path) -> None:
    manifests, _ = load_manifests([_write(tmp_path, [make_node(_subdomain(253))])])
    assert len(manifests) == 1
    with pytest.raises(ManifestError, match=r"field metadata\.name: .*no more than 253"):
        load_manifests([_write(tmp_path, [make_node(_subdomain(254))])])


def test_a_priority_class_given_in_another_file_is_found(tmp_path: Path) -> None:
    classes = tmp_path / "classes.yaml"
    classes.write_text(yaml.safe_dump({"apiVersion": "scheduling.k8s.io/v1",
                                       "kind": "PriorityClass", "metadata": {"name": "high"},
                                       "value": 1000}))
    pods = _write(tmp_path, [make_pod("p", priority_class="high"),
                             make_pod("q", priority_class="system-node-critical")])
    manifests, warnings = load_manifests([pods, str(classes)])
    assert len(manifests) == 3 and warnings == []


# -- input the API server takes, which stopped Lahar ---------------------------------------------
def test_an_unquoted_timestamp_is_read_as_text_as_kubernetes_reads_it(tmp_path: Path) -> None:
    """``sigs.k8s.io/yaml`` keeps ``2026-01-01T00:00:00Z`` a string; PyYAML makes a datetime,
    which ``-o json`` could not write."""
    path = tmp_path / "cluster.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n"
                    "  creationTimestamp: 2026-01-01T00:00:00Z\n"
                    "status:\n  allocatable: {cpu: \"4\"}\n")
    manifests, _ = load_manifests([str(path)])
    assert manifests[0].obj["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    result = _lahar("simulate", str(path), "-o", "json")
    assert result.returncode == 0
    nodes = [i for i in yaml.safe_load(result.stdout)["items"] if i["kind"] == "Node"]
    assert nodes[0]["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
