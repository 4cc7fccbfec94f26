"""``lahar simulate`` on conf/samples/dra.yaml, and ``lahar inspect dra`` on what it wrote."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from scheduler.commands.cli import main
from tests.scenarios.dra_builders import reserved_names, results_of

SAMPLE = Path(__file__).resolve().parents[2] / "conf" / "samples" / "dra.yaml"
GATES = ["--feature-gates", "DRAConsumableCapacity=true"]


@pytest.fixture(autouse=True)
def _keep_log_config() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def _claims_by_pod(items: list[dict]) -> dict[str, dict]:
    claims = {i["metadata"]["name"]: i for i in items if i["kind"] == "ResourceClaim"}
    out = {}
    for pod in (i for i in items if i["kind"] == "Pod"):
        entry = pod["spec"]["resourceClaims"][0]
        name = entry.get("resourceClaimName") or next(
            s["resourceClaimName"] for s in pod["status"]["resourceClaimStatuses"])
        out[pod["metadata"]["name"]] = claims[name]
    return out


def test_dra_sample(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The gang gets four distinct whole GPUs, the two inference pods share node-c's GPU by
    memory, the 48Gi claim waits with kube-scheduler's Unschedulable reason naming it."""
    assert main(["simulate", *GATES, str(SAMPLE), "-o", "json"]) == 0
    out = capsys.readouterr().out
    items = json.loads(out)["items"]
    pods = {i["metadata"]["name"]: i for i in items if i["kind"] == "Pod"}
    claims = _claims_by_pod(items)
    gang = [(p, results_of(claims[p])) for p in (f"train-{i}" for i in range(4))]
    assert all(pods[p]["spec"].get("nodeName") for p, _ in gang)
    assert len({device for _, devices in gang for device in devices}) == 4
    for pod, devices in gang:
        assert reserved_names(claims[pod]) == [pod]
        assert devices[0][0] in ("node-a", "node-b")
    for pod in ("infer-0", "infer-1"):
        assert pods[pod]["spec"]["nodeName"] == "node-c"
        assert results_of(claims[pod]) == [("node-c", "gpu-0")]
    waiting = pods["too-big"]
    assert not waiting["spec"].get("nodeName")
    condition = next(c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["reason"] == "Unschedulable"
    assert "default/gpu-48gi" in condition["message"]
    assert "allocation" not in claims["too-big"].get("status", {})

    written = tmp_path / "out.json"
    written.write_text(out)
    assert main(["inspect", "dra", str(written)]) == 0
    table = capsys.readouterr().out
    shared = next(line for line in table.splitlines() if "node-c/gpu-0" in line)
    assert "memory 32Gi/40Gi" in shared and "infer-0" in shared and "infer-1" in shared


def test_dra_sample_table_shows_each_pods_devices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", *GATES, str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("default/infer-")]
    assert rows and all(row[2] == "node-c/gpu-0" for row in rows)
    assert "7 pod(s): 6 bound, 1 pending" in out


def test_bad_feature_gates_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--feature-gates", "DRAConsumableCapacity=maybe", str(SAMPLE)])
    assert exc.value.code == 2
    assert "--feature-gates" in capsys.readouterr().err


def test_dra_sample_is_repeatable(capsys: pytest.CaptureFixture[str]) -> None:
    """The same input and seed give the same output, shareIDs included (kube-scheduler draws
    them as random UUIDs; here they come from the session's seed)."""
    outputs = []
    for _ in range(2):
        assert main(["simulate", *GATES, str(SAMPLE), "-o", "json"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert '"shareID"' in outputs[0]
