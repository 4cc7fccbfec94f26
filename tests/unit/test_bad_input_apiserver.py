"""``lahar simulate`` refuses what the API server (and kubectl) refuse, naming file#doc, object
and field, in messages of bounded length.

* a key written twice in one YAML map: kubectl's go-yaml v3 (``yaml: unmarshal errors: mapping
  key "resources" already defined at line 9``), which PyYAML would take silently;
* a request above its limit: ``ValidateResourceRequirements`` (pkg/apis/core/validation/
  validation.go, "must be less than or equal to cpu limit of 1");
* a container name given twice: ``validateContainers`` (``field.Duplicate``);
* a label value over 63 characters, a label or annotation key that is not a qualified name,
  annotations over 256 KiB: apimachinery ``ValidateLabels`` / ``ValidateAnnotations``
  (pkg/apis/meta/v1/validation, pkg/api/validation/objectmeta.go);
* a 100k-character name: refused as before, in a short message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.api.errors import ObjectError
from scheduler.api.validation import validate_object
from scheduler.api.validation_meta import metadata_problem
from tests.builders import make_pod

REPO = Path(__file__).resolve().parents[2]
BAD = "tests/data/bad"


@pytest.mark.parametrize(("name", "message"), [
    ("dup-key.yaml",
     "#1: not valid YAML: line 11: mapping key 'resources' already defined at line 9"),
    ("request-over-limit.yaml",
     "#1: Pod default/over: field spec.containers[0].resources.requests: Invalid value '2': "
     "must be less than or equal to cpu limit of 1"),
    ("dup-container.yaml",
     "#1: Pod default/twins: field spec.containers[1].name: Duplicate value: 'c'"),
    ("long-label.yaml",
     "#1: Pod default/label: field metadata.labels: Invalid value 'aaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa': must be no more than 63 characters"),
    ("big-annotations.yaml",
     "#1: Pod default/notes: field metadata.annotations: Too long: must have at most 262144 "
     "bytes (has 262203)"),
])
def test_simulate_refuses_what_the_api_server_refuses(name: str, message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", "simulate", f"{BAD}/{name}"], cwd=REPO,
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stdout[-500:]
    assert result.stderr.splitlines() == [f"error: {BAD}/{name}{message}"]


def test_a_100k_character_name_gives_a_short_message() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", "simulate", f"{BAD}/long-name.yaml"], cwd=REPO,
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert len(result.stderr) < 400, len(result.stderr)
    assert "(100000 characters)" in result.stderr and "must be no more than 253" in result.stderr


@pytest.mark.parametrize(("meta", "field"), [
    ({"labels": {"-bad": "x"}}, "metadata.labels"),
    ({"labels": {"UPPER.example.com/x": "y"}}, "metadata.labels"),
    ({"labels": {"x": "has space"}}, "metadata.labels"),
    ({"labels": {"a/b/c": "x"}}, "metadata.labels"),
    ({"annotations": {"": "x"}}, "metadata.annotations"),
    ({"annotations": {"k" * 64: "x"}}, "metadata.annotations"),
])
def test_label_and_annotation_rules(meta: dict[str, dict[str, str]], field: str) -> None:
    problem = metadata_problem(meta)
    assert problem is not None and problem[0] == field


def test_valid_labels_annotations_and_limits_pass() -> None:
    assert metadata_problem({
        "labels": {"app.kubernetes.io/name": "x", "empty": "", "a": "A_b.c-1"},
        "annotations": {"Example.COM/Note": "anything at all", "k": "v" * 100_000},
    }) is None
    pod = make_pod("p", cpu="1")
    pod["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "1000m", "memory": "1Gi"}
    validate_object("Pod", pod)
    pod["spec"]["initContainers"] = [{"name": "c0", "image": "x"}]
    pod["spec"]["containers"][0]["name"] = "c0"
    with pytest.raises(ObjectError, match=r"spec.containers\[0\].name: Duplicate value"):
        validate_object("Pod", pod)
