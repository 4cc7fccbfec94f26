"""vGPU memory and cores in use: the same numbers in the queue status, the simulate table and
``lahar inspect gpushare``.

A vGPU pod's requests do not say what it holds (a percentage, or no memory request at all for
a whole card); the device annotation written at allocation does, and that is what Volcano
counts (``vgpu.GPUDevices.AddQueueResource``) and what HAMi-core enforces on the node.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.commands.cli import main
from scheduler.devices.names import HAMI, VOLCANO
from scheduler.devices.usage import vgpu_held
from tests.builders import simulate
from tests.devices.conftest import (
    card,
    devices_of,
    gpu_node,
    gpu_pod,
    gpushare_conf,
    vgpu_conf,
    vgpu_node,
    vgpu_pod,
)

ROOT = Path(__file__).resolve().parents[2]


def queue_allocated(run: Any, name: str = "default") -> dict[str, str]:
    queue = run.cluster.objects["Queue"][name]
    return dict((queue.get("status") or {}).get("allocated") or {})


def test_queue_allocated_counts_vgpu_memory_and_cores_as_held() -> None:
    """Volcano ``updateQueueStatus`` → ``addNodeSharableDeviceUsage`` → vgpu
    ``AddQueueResource``: the decoded device annotation's MiB and cores of every allocated pod
    go into ``status.allocated`` under ``volcano.sh/vgpu-memory`` / ``volcano.sh/vgpu-cores``."""
    objs = [vgpu_node("n1", [card("GPU-0", memory=16000), card("GPU-1", memory=16000)]),
            vgpu_pod("half", number=2, percentage=50),        # 2 × 8000 MiB, no MiB requested
            vgpu_pod("whole", cores=100),                     # a whole card, no memory asked
            vgpu_pod("slice", memory=3000, cores=20)]
    run = simulate(objs, conf=vgpu_conf(), max_cycles=3)
    held = [device for name in ("half", "whole", "slice") if run.node_of(name)
            for container in devices_of(run.pod(name)) for device in container]
    assert run.node_of("half") and run.node_of("slice")
    allocated = queue_allocated(run)
    assert allocated["volcano.sh/vgpu-memory"] == str(sum(memory for _, memory, _ in held))
    assert allocated["volcano.sh/vgpu-cores"] == str(sum(cores for _, _, cores in held))
    assert int(allocated["volcano.sh/vgpu-memory"]) >= 16000 + 3000


def test_gpushare_adds_nothing_beyond_requests() -> None:
    """gpushare ``AddQueueResource`` returns an empty map: GPU share memory is a plain
    request and is counted as one already."""
    objs = [gpu_node("n1", cards=2, card_memory=16000), gpu_pod("p", memory=4000),
            gpu_pod("q", memory=6000)]
    run = simulate(objs, conf=gpushare_conf(), max_cycles=3)
    assert queue_allocated(run)["volcano.sh/gpu-memory"] == "10000"


def test_simulate_table_and_inspect_agree_on_the_vgpu_sample(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On ``conf/samples/vgpu.yaml`` node ``vgpu-a`` holds a pod asking 50 % of two cards and
    one asking a whole card with no memory request: both views show the MiB the cards hold."""
    conf, sample = ROOT / "conf/vgpu.conf", ROOT / "conf/samples/vgpu.yaml"
    assert main(["simulate", "--conf", str(conf), str(sample)]) == 0
    table = capsys.readouterr().out
    assert main(["simulate", "--conf", str(conf), str(sample), "-o", "yaml"]) == 0
    listing = tmp_path / "out.yaml"
    listing.write_text(capsys.readouterr().out)
    assert main(["inspect", "gpushare", str(listing), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    inspected = {node["name"]: (sum(c["memoryUsed"] for c in node["cards"]),
                                sum(c["memoryTotal"] for c in node["cards"]),
                                sum(c["coresUsed"] for c in node["cards"]))
                 for node in report["nodes"]}
    rows = {line.split()[0]: line for line in table.splitlines() if line.startswith("vgpu-")}
    for node, (used, total, cores) in inspected.items():
        assert f"volcano.sh/vgpu-memory {used}/{total} " in rows[node], (node, rows[node])
        assert f"volcano.sh/vgpu-cores {cores}/" in rows[node], (node, rows[node])
    assert inspected["vgpu-a"][0] == 80000  # 2 × 50 % of 40000 + one whole 40000 card
    queue = next(item for item in yaml.safe_load(listing.read_text())["items"]
                 if item["kind"] == "Queue" and item["metadata"]["name"] == "default")
    assert queue["status"]["allocated"]["volcano.sh/vgpu-memory"] == str(
        sum(used for used, _, _ in inspected.values()))


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({VOLCANO.allocated: "GPU-0,NVIDIA,3000,20:GPU-1,NVIDIA,3000,20:;"
                                         "GPU-0,NVIDIA,1000,0:"},
                     ("volcano", 3, 7000, 40), id="volcano-two-containers"),
        pytest.param({VOLCANO.to_allocate: "GPU-0,NVIDIA,5000,0:"}, ("volcano", 1, 5000, 0),
                     id="volcano-to-allocate-only"),
        pytest.param({HAMI.allocated: "GPU-0,NVIDIA,2000,10:;;"}, ("hami", 1, 2000, 10),
                     id="hami"),
        pytest.param({VOLCANO.allocated: "GPU-0,NVIDIA,lots,0:"}, None, id="unreadable"),
        pytest.param({}, None, id="none"),
    ],
)
def test_vgpu_held_reads_the_durable_annotation(annotations: dict[str, str],
                                                expected: tuple[str, int, int, int] | None
                                                ) -> None:
    held = vgpu_held(annotations)
    if expected is None:
        assert held is None
        return
    assert held is not None
    assert (held.names.profile, held.devices, held.memory, held.cores) == expected
