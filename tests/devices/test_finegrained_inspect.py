"""``lahar inspect devices`` and the fine-grained part of the ``lahar simulate`` table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scheduler.commands.cli import main
from scheduler.commands.inspect_devices import inspect_devices
from tests.devices.finegrained_helpers import (
    ALLOCATED,
    bound_pod,
    device_object,
    gpu,
    nic,
    shared_gpu,
)

ROOT = Path(__file__).resolve().parents[2]


def _objects() -> list[dict[str, object]]:
    vf_pod = bound_pod("vf", node="n1", rdma=1, allocation={"rdma": [
        {"minor": 0, "resources": {"koordinator.sh/rdma": "1"},
         "extension": {"vfs": [{"minor": -1, "busID": "0000:50:00.1"}]}}]})
    gone = bound_pod("gone", node="n1", nvidia=1, allocation={"gpu": [shared_gpu(7, 100)]})
    done = bound_pod("done", node="n1", nvidia=1, allocation={"gpu": [shared_gpu(1, 100)]})
    done["status"] = {"phase": "Succeeded"}
    broken = bound_pod("broken", node="n1", nvidia=1, allocation={})
    broken["metadata"]["annotations"][ALLOCATED] = "{not json"
    return [device_object("n1", [gpu(0, numa=1, pcie="pciA"), gpu(1, healthy=False),
                                 nic(0, vfs=2)]),
            bound_pod("a", node="n1", allocation={"gpu": [shared_gpu(0, 30)]}),
            bound_pod("b", node="n1", allocation={"gpu": [shared_gpu(0, 20)]}),
            vf_pod, gone, done, broken]


def test_report_per_device_and_minor() -> None:
    report = inspect_devices(_objects())
    rows = {(r.type, r.minor): r for r in report.rows}
    gpu0 = rows[("gpu", 0)]
    assert gpu0.used["koordinator.sh/gpu-core"] == 50
    assert gpu0.free["koordinator.sh/gpu-memory-ratio"] == 50
    assert [pod for pod, _ in gpu0.pods] == ["default/a", "default/b"]
    assert (gpu0.numa, gpu0.pcie) == (1, "pciA")
    assert not rows[("gpu", 1)].healthy and rows[("gpu", 1)].pods == []
    assert rows[("rdma", 0)].vfs_used == ["0000:50:00.1"] and rows[("rdma", 0)].vfs_total == 2
    assert not rows[("gpu", 7)].present
    assert any("minor 7" in w for w in report.warnings)
    assert any("default/broken" in w for w in report.warnings)


def test_cli_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)  # no cluster: FILEs are needed
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(_objects()))
    assert main(["inspect", "devices", str(path)]) == 0
    out = capsys.readouterr()
    assert "gpu1 (unhealthy)" in out.out and "gpu7 (gone)" in out.out
    assert "core 50/100" in out.out and "1/2" in out.out
    assert "warning:" in out.err
    assert main(["inspect", "devices", str(path), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    devices = data["nodes"][0]["devices"]
    assert devices[0]["free"]["koordinator.sh/gpu-core"] == 50
    assert main(["inspect", "devices"]) == 2


def test_simulate_output_carries_device_objects_for_inspect(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = ROOT / "conf" / "finegrained.conf"
    sample = ROOT / "conf" / "samples" / "finegrained.yaml"
    assert main(["simulate", "--conf", str(conf), str(sample), "-o", "yaml"]) == 0
    out = tmp_path / "out.yaml"
    out.write_text(capsys.readouterr().out)
    assert main(["inspect", "devices", str(out)]) == 0
    table = capsys.readouterr().out
    assert "default/train-4gpu-rdma" in table and "rdma3" in table
    assert main(["simulate", "--conf", str(conf), str(sample)]) == 0
    assert "USED/TOTAL" in capsys.readouterr().out
