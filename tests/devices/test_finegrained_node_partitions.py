"""GPU partitions chosen by the Node's labels when the Device object has no partition table.

Koordinator reads the table and the ``Honor`` policy from the Device object only when it
carries ``scheduling.koordinator.sh/gpu-partitions``; otherwise ``GPUAllocator.Allocate``
(``pkg/scheduler/plugins/deviceshare/allocator_gpu.go:77-82``) asks
``GetDesignatedGPUPartitionIndexer`` (``allocator_gpu_helper.go:150-162``), which reads the
*Node's* ``node.koordinator.sh/gpu-model`` and ``gpu-partition-policy`` labels. The cases are
``TestAllocateByPartition`` of ``allocator_gpu_test.go`` (GPU part; its node is labelled with
the model and ``Honor``, its Device object has neither label nor table).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.commands.cli import main
from tests.builders import simulate
from tests.devices.finegrained_helpers import (
    bound_pod,
    device_object,
    fg_node,
    fg_pod,
    finegrained_conf,
    gpu,
    minors,
    shared_gpu,
)

MODEL = "node.koordinator.sh/gpu-model"
POLICY = "node.koordinator.sh/gpu-partition-policy"
PARTITIONS = "scheduling.koordinator.sh/gpu-partitions"

# fakeH800DeviceCR (allocator_gpu_test.go:42): every GPU on its own PCIe root, minors 0-3 on
# NUMA node 0, 4-7 on NUMA node 1.
H800_GPUS = [gpu(m, numa=m // 4, pcie=f"pci{m}") for m in range(8)]


def objects(pod: dict[str, Any], *, model: str = "H800", policy: str = "Honor",
            held: tuple[int, ...] = (), device_labels: dict[str, str] | None = None,
            device_annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    node_labels = {MODEL: model}
    if policy:
        node_labels[POLICY] = policy
    objs = [fg_node("test-node-1", gpus=8, labels=node_labels),
            device_object("test-node-1", H800_GPUS, labels=device_labels,
                          annotations=device_annotations)]
    if held:
        objs.append(bound_pod("assigned-pod", node="test-node-1", allocation={
            "gpu": [shared_gpu(m, 100) for m in held]}, nvidia=len(held)))
    return [*objs, pod]


def place(pod: dict[str, Any], **kwargs: Any) -> Any:
    return simulate(objects(pod, **kwargs), conf=finegrained_conf())


@pytest.mark.parametrize(("wanted", "held", "expected"), [
    pytest.param(1, (), [0], id="allocate-1-GPU"),                                # :93
    pytest.param(2, (), [0, 1], id="allocate-2-GPU"),                             # :123
    pytest.param(3, (), None, id="allocate-3-GPU-refused"),                       # :171
    pytest.param(4, (), [0, 1, 2, 3], id="allocate-4-GPU"),                       # :178
    pytest.param(6, (), None, id="allocate-6-GPU-refused"),                       # :262
    pytest.param(8, (), list(range(8)), id="allocate-8-GPU"),                     # :269
    pytest.param(2, (2, 3), [0, 1], id="2-GPU-with-assigned-2-3"),                # :425
    pytest.param(2, (4,), [6, 7], id="2-GPU-with-assigned-4-binpack"),            # :516
    pytest.param(1, (4,), [5], id="1-GPU-with-assigned-4-binpack"),               # :589
])
def test_h800_node_labelled_honor(wanted: int, held: tuple[int, ...],
                                  expected: list[int] | None) -> None:
    """allocator_gpu_test.go:56 TestAllocateByPartition, H800 cases (line of each case in
    its id's comment): the Node's labels give the Hopper table and make it binding, so 3 and
    6 GPUs are refused instead of placed by the topology tree."""
    run = place(fg_pod("p", nvidia=wanted), held=held)
    if expected is None:
        assert run.node_of("p") is None
        assert "Unsupported number of GPU requests" in run.reason("p")
    else:
        assert sorted(minors(run, "p")) == expected


def test_h100_node_labelled_honor() -> None:
    """allocator_gpu_test.go:644 "allocate 2 GPU ... with assigned devices; H100"."""
    run = place(fg_pod("p", nvidia=2), model="H100", held=(2, 3))
    assert sorted(minors(run, "p")) == [0, 1]


def test_h100_node_preferring_partitions_falls_through_to_the_tree() -> None:
    """allocator_gpu_test.go:735 "...; H100; gpuPartitionPolicyPrefer": 3 GPUs, 2 and 3 held:
    no partition of 3, so the tree places them in the NUMA node with room, 4-6."""
    run = place(fg_pod("p", nvidia=3), model="H100", policy="Prefer", held=(2, 3))
    assert sorted(minors(run, "p")) == [4, 5, 6]


def test_a_node_without_the_policy_label_only_prefers() -> None:
    """GetGPUPartitionPolicy (apis/extension) is Prefer unless the label says Honor."""
    run = place(fg_pod("p", nvidia=3), policy="")
    assert sorted(minors(run, "p")) == [0, 1, 2]


def test_device_labels_do_not_choose_without_a_table() -> None:
    """allocator_gpu.go:79-80: without the Device's table the Node's labels replace the
    Device's policy too; a Device labelled Honor on an unlabelled Node only prefers. The
    ignored labels are named in a warning."""
    objs = objects(fg_pod("p", nvidia=3), model="", policy="",
                   device_labels={MODEL: "H800", POLICY: "Honor"})
    run = simulate(objs, conf=finegrained_conf())
    assert sorted(minors(run, "p")) == [0, 1, 2]


def test_the_device_table_carries_the_device_policy() -> None:
    """device_cache.go updateNodeDevice: with the Device's own table its label decides and the
    Node's Honor is not read (allocator_gpu.go:77-79)."""
    table = {"2": [{"minors": [6, 7], "allocationScore": 1}]}
    annotations = {PARTITIONS: json.dumps(table)}
    run = place(fg_pod("p", nvidia=3), device_annotations=annotations)
    assert sorted(minors(run, "p")) == [0, 1, 2]  # Node says Honor; the Device does not
    honoured = place(fg_pod("p", nvidia=3), device_annotations=annotations,
                     device_labels={POLICY: "Honor"}, policy="")
    assert honoured.node_of("p") is None


def test_an_unreadable_device_table_falls_back_to_the_node() -> None:
    """apis/extension GetGPUPartitionTable errors, the indexer stays nil and
    GetDesignatedGPUPartitionIndexer decides: the H800 Honor node refuses 3 GPUs."""
    run = place(fg_pod("p", nvidia=3), device_annotations={PARTITIONS: "{nope"})
    assert run.node_of("p") is None


def test_cli_simulate_reads_the_node_labels(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``lahar simulate`` with a manifest whose Node carries the labels."""
    conf = tmp_path / "fg.conf"
    conf.write_text(finegrained_conf())
    cluster = tmp_path / "cluster.yaml"
    objs = [*objects(fg_pod("p", nvidia=3)), fg_pod("q", nvidia=4)]
    cluster.write_text(yaml.safe_dump_all(objs))
    assert main(["simulate", "--conf", str(conf), str(cluster), "-o", "yaml"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)["items"]
    bound = {p["metadata"]["name"] for p in out
             if p["kind"] == "Pod" and (p.get("spec") or {}).get("nodeName")}
    assert bound == {"q"}
