import json
from pathlib import Path

import pytest
import yaml

from scheduler.cluster.manifests import ManifestError, load_manifests
from scheduler.commands.cli import main

QUICKSTART = Path(__file__).resolve().parents[2] / "conf" / "samples" / "quickstart.yaml"


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: "
            "{requests: {cpu: lots}}}]}\n",
            "cluster.yaml#1: Pod default/p: field spec.containers[0].resources: resource 'cpu'",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: v1\nkind: Node\nmetadata: {}\n",
            "cluster.yaml#2: Node: field metadata.name is required",
        ),
        (
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: -1}\n",
            "PodGroup default/g: field spec.minMember",
        ),
        (
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: 0}\n",
            "Queue q: field spec.weight",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {taints: [{key: a}]}\n",
            "Node n: field spec.taints[0]",
        ),
        ("kind: Pod\napiVersion: v2\nmetadata: {name: p}\n", "field apiVersion"),
        ("a: [", "not valid YAML"),
    ],
)
def test_malformed_manifest_names_document_object_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ManifestError) as info:
        load_manifests([_write(tmp_path, text)])
    assert message in str(info.value)


def test_list_and_skipped_kinds(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "team"}},
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "1"}},
            },
        ],
    }
    manifests, warnings = load_manifests([_write(tmp_path, yaml.safe_dump(doc))])
    assert [m.kind for m in manifests] == ["Node"]
    assert warnings == [f"{tmp_path / 'cluster.yaml'}#1 [item 0]: skipping Secret team"]


def test_simulate_exit_code_2_on_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {priority: high}\n"
        "status: {}\n---\nkind: Node\n",
    )
    assert main(["simulate", path]) == 2
    assert "error:" in capsys.readouterr().err
    assert main(["simulate", str(QUICKSTART), "--conf", _write(tmp_path, "actions: nope")]) == 2


def test_quickstart_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(QUICKSTART)]) == 0
    out = capsys.readouterr().out
    assert "default/report-high" in out and "report-low" in out.split("PENDING POD")[1]
    assert "settled" in out


def test_quickstart_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(QUICKSTART), "-o", "json", "--seed", "7"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"
    kinds = [item["kind"] for item in doc["items"]]
    assert kinds == sorted(
        kinds, key=["Node", "Pod", "PodGroup", "Queue", "PriorityClass", "Event"].index
    )
    pods = {i["metadata"]["name"]: i for i in doc["items"] if i["kind"] == "Pod"}
    train = [pods[f"train-worker-{i}"] for i in range(3)]
    assert all(
        p["spec"]["nodeName"] in ("node-a", "node-b") and p["status"]["phase"] == "Running"
        for p in train
    )
    assert {c["type"]: c["status"] for c in train[0]["status"]["conditions"]} == {
        "PodScheduled": "True"
    }
    assert "nodeName" not in pods["big-gpu-0"]["spec"]
    pending = next(
        c for c in pods["report-low"]["status"]["conditions"] if c["type"] == "PodScheduled"
    )
    assert pending["status"] == "False" and pending["reason"] == "Unschedulable"
    assert pending["message"].startswith("0/3 nodes are unavailable")
    groups = {i["metadata"]["name"]: i for i in doc["items"] if i["kind"] == "PodGroup"}
    assert (
        groups["train"]["status"]["phase"] == "Running"
        and groups["train"]["status"]["running"] == 3
    )
    assert groups["big-gpu"]["status"]["conditions"][0]["type"] == "Unschedulable"
    queues = {i["metadata"]["name"]: i for i in doc["items"] if i["kind"] == "Queue"}
    assert queues["research"]["status"]["allocated"]["cpu"] == "6"
    events = [i for i in doc["items"] if i["kind"] == "Event"]
    assert all({"involvedObject", "type", "reason", "message"} <= set(e) for e in events)


def test_simulate_is_deterministic(capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    for _ in range(2):
        main(["simulate", str(QUICKSTART), "-o", "yaml", "--seed", "3"])
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


def test_conf_check(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["conf", "check"]) == 0
    assert "ok" in capsys.readouterr().out
    assert main(["conf", "check", _write(tmp_path, "tiers: [{plugins: [{name: nope}]}]")]) == 0
    assert "unknown plugin 'nope' skipped" in capsys.readouterr().err
    assert main(["conf", "check", _write(tmp_path, "actions: 'nope'")]) == 2
    assert "unknown action 'nope'" in capsys.readouterr().err
