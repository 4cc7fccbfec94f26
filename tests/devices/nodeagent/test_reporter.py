"""The reporter: the Device object as koordlet's ``states_device_linux.go`` reports it, the
register annotations as volcano-vgpu's ``RegistrInAnnotation`` / HAMi's ``WatchAndRegister``
write them, status quantities as koord-manager's ``GPUDeviceResource`` sums them, and kubelet's
checkpoint read as Koordinator's gpu-checkpoints proposal describes it."""

from __future__ import annotations

import json
from pathlib import Path

from scheduler.devices.base import DeviceConfig
from scheduler.devices.codec import parse_register
from scheduler.devices.finegrained.model import parse_device_object
from scheduler.devices.names import HAMI, VOLCANO
from scheduler.devices.node.reporter import Reporter
from scheduler.devices.node.resources import AgentConfig, endpoints
from tests.devices.nodeagent.cluster import MemoryCluster
from tests.devices.nodeagent.conftest import inventory

GIB = 2**30


def reporter(cluster: MemoryCluster, devices: DeviceConfig, checkpoint: str = "") -> Reporter:
    config = AgentConfig(node_name="gpu-1", devices=devices, split_count=5)
    return Reporter(access=cluster, config=config, endpoints=endpoints(config),
                    checkpoint_path=checkpoint, clock=lambda: 0.0, sleep=lambda _: None)


def test_device_object_is_created_then_updated_without_clobbering(tmp_path: Path) -> None:
    cluster = MemoryCluster()
    inv = inventory(2, nics=1)
    checkpoint = tmp_path / "kubelet_internal_checkpoint"
    checkpoint.write_text(json.dumps({"Data": {"PodDeviceEntries": [
        {"PodUID": "u1", "ContainerName": "c", "ResourceName": "nvidia.com/gpu-other",
         "DeviceIDs": {"0": [inv.gpus[1].uuid + "::2"]}},
        {"PodUID": "u2", "ContainerName": "c", "ResourceName": "nvidia.com/gpu",
         "DeviceIDs": [inv.gpus[0].uuid]}]}}))
    report = reporter(cluster, DeviceConfig(finegrained=True), str(checkpoint))
    report.report(inv)
    obj = cluster.devices["gpu-1"]
    assert obj["metadata"]["ownerReferences"][0]["uid"] == "node-uid-1"
    warnings: list[str] = []
    spec = parse_device_object(obj, warnings.append)  # the scheduler reads what we write
    assert not warnings
    assert [(d.type, d.minor, d.healthy) for d in spec.devices] == [
        ("gpu", 0, True), ("gpu", 1, True), ("rdma", 0, True)]
    assert spec.devices[0].total["koordinator.sh/gpu-memory"] == 16 * GIB
    assert spec.devices[2].vfs[0].bus_id == "0000:18:00.1"
    # only the GPU handed out by a resource the agent does not serve counts
    assert spec.checkpoint_minors == {"u1": (1,)}
    # someone else's label and annotation survive an update; a conflict is retried
    obj["metadata"]["labels"]["team"] = "a"
    obj["metadata"]["annotations"]["other"] = "b"
    cluster.device_conflicts = 2
    broken = inv.gpus[1].uuid
    from dataclasses import replace
    inv2 = replace(inv, gpus=(inv.gpus[0], replace(inv.gpus[1], healthy=False)))
    report.report(inv2)
    obj = cluster.devices["gpu-1"]
    assert obj["metadata"]["labels"]["team"] == "a"
    assert obj["metadata"]["annotations"]["other"] == "b"
    assert [d["health"] for d in obj["spec"]["devices"] if d["type"] == "gpu"] == [True, False]
    assert broken in json.dumps(obj)
    writes = report.writes
    report.report(inv2)  # nothing changed: the Device object is not written again
    assert report.writes == writes + 2  # node metadata and status are patched each period
    status = cluster.nodes["gpu-1"]["status"]["allocatable"]
    assert status["koordinator.sh/gpu-memory"] == str(16 * GIB)  # healthy cards only
    assert "koordinator.sh/gpu" not in status  # an endpoint: kubelet counts it
    labels = cluster.nodes["gpu-1"]["metadata"]["labels"]
    assert labels["node.koordinator.sh/gpu-model"] == "Lahar-Fake-GPU"


def test_vgpu_register_annotations_parse_as_the_scheduler_reads_them() -> None:
    for names in (VOLCANO, HAMI):
        cluster = MemoryCluster()
        inv = inventory(2)
        reporter(cluster, DeviceConfig(vgpu=True, profile=names.profile)).report(inv)
        annotations = cluster.node_annotations()
        cards = parse_register(annotations[names.register], json_format=names.register_json)
        assert [(c.uuid, c.split, c.memory, c.healthy) for c in cards] == [
            (g.uuid, 5, 16384, True) for g in inv.gpus]
        handshake = "volcano.sh/node-vgpu-handshake" if names is VOLCANO else \
            "hami.io/node-handshake"
        assert annotations[handshake].startswith("Reported ")
    status = cluster.nodes["gpu-1"].get("status", {}).get("allocatable", {})
    assert "volcano.sh/vgpu-memory" not in status  # the hami profile counts nvidia.com/gpu only


def test_gpushare_reports_card_count_and_unhealthy_ids() -> None:
    cluster = MemoryCluster()
    inv = inventory(3)
    from dataclasses import replace
    inv = replace(inv, gpus=(inv.gpus[0], replace(inv.gpus[1], healthy=False), inv.gpus[2]))
    report = reporter(cluster, DeviceConfig(gpu_sharing=True))
    report.report(inv)
    assert cluster.node_annotations()["volcano.sh/gpu-unhealthy-ids"] == "1"
    assert cluster.nodes["gpu-1"]["status"]["capacity"]["volcano.sh/gpu-number"] == "3"
    report.report(inventory(3))
    assert "volcano.sh/gpu-unhealthy-ids" not in cluster.node_annotations()
