"""The Device object and the register annotations written as the peers write them.

* koordlet ``pkg/koordlet/statesinformer/impl/states_device_linux.go`` (koordinator-sh/
  koordinator): ``buildBasicDevice`` (owner reference with ``Controller`` and
  ``BlockOwnerDeletion``), ``buildGPUDevice`` (``Topology`` nil unless NUMA node, PCIe root and
  bus id are known), ``fillGPUDevice`` / ``getGPUDriverAndModel`` (model label only when every
  card has the same name, ``NVIDIA `` trimmed and spaces as dashes; driver only when known);
* volcano-vgpu ``pkg/plugin/vgpu/register.go`` ``apiDevices`` (memory ÷ ``GPUMemoryFactor``,
  type ``NVIDIA-<model>``, mode) with ``util.go`` ``EncodeNodeDevices``;
* HAMi ``pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go`` ``getAPIDevices``
  (memory × ``DeviceMemoryScaling`` and cores ``DeviceCoreScaling × 100`` except in MIG mode,
  ``NVIDIA-`` prefixed only when the name lacks it) and ``pkg/device/devices.go``
  ``MarshalNodeDevices`` (``DeviceInfo`` fields all ``omitempty``).
"""

from __future__ import annotations

import json
from dataclasses import replace

from scheduler.devices.base import DeviceConfig
from scheduler.devices.codec import parse_register
from scheduler.devices.finegrained.model import parse_device_object
from scheduler.devices.node.report import Sysfs, build_device_object
from scheduler.devices.node.reporter import Reporter
from scheduler.devices.node.resources import AgentConfig, endpoints
from tests.devices.nodeagent.cluster import MemoryCluster
from tests.devices.nodeagent.conftest import inventory

MODEL = "node.koordinator.sh/gpu-model"
DRIVER = "node.koordinator.sh/gpu-driver-version"


def _reporter(cluster: MemoryCluster, **config: object) -> Reporter:
    devices = config.pop("devices", DeviceConfig(finegrained=True))
    agent = AgentConfig(node_name="gpu-1", devices=devices, split_count=4,  # type: ignore[arg-type]
                        **config)  # type: ignore[arg-type]
    return Reporter(access=cluster, config=agent, endpoints=endpoints(agent),
                    clock=lambda: 0.0, sleep=lambda _: None)


def test_device_owner_reference_is_the_controller_as_koordlet_sets_it() -> None:
    """koordlet ``buildBasicDevice``: ``Controller: &blocker, BlockOwnerDeletion: &blocker``."""
    cluster = MemoryCluster()
    _reporter(cluster).report(inventory(1))
    owner = cluster.devices["gpu-1"]["metadata"]["ownerReferences"][0]
    assert owner == {"apiVersion": "v1", "kind": "Node", "name": "gpu-1", "uid": "node-uid-1",
                     "controller": True, "blockOwnerDeletion": True}


def test_no_topology_when_the_pcie_root_is_unknown() -> None:
    """koordlet ``buildGPUDevice``: ``if gpu.NodeID >= 0 && gpu.PCIE != "" && gpu.BusID != ""``,
    else the DeviceInfo has no ``Topology``; the scheduler then treats the card as having no
    PCIe root instead of a root named ''."""
    cluster = MemoryCluster()
    inv = inventory(2)
    inv = replace(inv, gpus=(inv.gpus[0], replace(inv.gpus[1], pcie="")))
    _reporter(cluster).report(inv)
    gpus = cluster.devices["gpu-1"]["spec"]["devices"]
    assert gpus[0]["topology"] == {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:00",
                                   "busID": "0000:10:00.0"}
    assert "topology" not in gpus[1]
    spec = parse_device_object(cluster.devices["gpu-1"], lambda _: None)
    assert [d.has_topology for d in spec.devices] == [True, False]


def test_dry_run_device_object_leaves_out_unknown_topology_and_labels(tmp_path: object) -> None:
    """The NVML report (``lahar device report``) follows the same rules."""

    class Memory:
        total = 16 * 2**30

    class Pci:
        busId = b"00000000:3B:00.0"

    class FakeNvml:
        names = [b"NVIDIA A100-SXM4-80GB", b"NVIDIA H100 80GB HBM3"]

        def nvmlInit(self) -> None: ...
        def nvmlShutdown(self) -> None: ...
        def nvmlDeviceGetCount(self) -> int: return 2
        def nvmlDeviceGetHandleByIndex(self, index: int) -> int: return index
        def nvmlDeviceGetUUID(self, handle: int) -> str: return f"GPU-{handle}"
        def nvmlDeviceGetMinorNumber(self, handle: int) -> int: return handle
        def nvmlDeviceGetMemoryInfo(self, handle: int) -> Memory: return Memory()
        def nvmlDeviceGetPciInfo(self, handle: int) -> Pci: return Pci()
        def nvmlDeviceGetName(self, handle: int) -> bytes: return self.names[handle]
        def nvmlSystemGetDriverVersion(self) -> str: return ""

    obj = build_device_object("n1", FakeNvml(), sysfs=Sysfs(str(tmp_path)))
    assert obj["metadata"]["labels"] == {"node.koordinator.sh/gpu-vendor": "nvidia"}
    assert all("topology" not in d for d in obj["spec"]["devices"])  # no sysfs: no PCIe root


def test_model_label_only_when_every_card_agrees() -> None:
    """koordlet ``getGPUDriverAndModel`` returns "" for mixed models and ``fillGPUDevice``
    writes no label then; a label written earlier is removed from the Device and the Node."""
    cluster = MemoryCluster()
    report = _reporter(cluster)
    inv = replace(inventory(2), driver="535.104.05")
    inv = replace(inv, gpus=tuple(replace(g, model="NVIDIA A100-SXM4-80GB") for g in inv.gpus))
    report.report(inv)
    assert cluster.devices["gpu-1"]["metadata"]["labels"][MODEL] == "A100-SXM4-80GB"
    assert cluster.nodes["gpu-1"]["metadata"]["labels"][MODEL] == "A100-SXM4-80GB"
    mixed = replace(inv, driver="", gpus=(inv.gpus[0], replace(inv.gpus[1],
                                                               model="NVIDIA H100 80GB HBM3")))
    report.report(mixed)
    device_labels = cluster.devices["gpu-1"]["metadata"]["labels"]
    node_labels = cluster.nodes["gpu-1"]["metadata"]["labels"]
    assert MODEL not in device_labels and DRIVER not in device_labels
    assert MODEL not in node_labels and DRIVER not in node_labels
    assert device_labels["node.koordinator.sh/gpu-vendor"] == "nvidia"


def test_volcano_register_divides_memory_by_the_factor_and_names_the_mode() -> None:
    """volcano-vgpu ``apiDevices``: ``Devmem: int32(*ndev.Memory) / int32(GPUMemoryFactor)``,
    ``Type: NVIDIA-<model>``, ``Mode: config.Mode``; ``EncodeNodeDevices`` joins
    ``id,count,devmem,type,health,mode:``."""
    cluster = MemoryCluster()
    inv = inventory(2)
    inv = replace(inv, gpus=(inv.gpus[0], replace(inv.gpus[1], healthy=False)))
    _reporter(cluster, devices=DeviceConfig(vgpu=True), gpu_memory_factor=1024,
              vgpu_mode="mig").report(inv)
    text = cluster.node_annotations()["volcano.sh/node-vgpu-register"]
    assert text == (f"{inv.gpus[0].uuid},4,16,NVIDIA-NVIDIA Lahar-Fake-GPU,true,mig:"
                    f"{inv.gpus[1].uuid},4,16,NVIDIA-NVIDIA Lahar-Fake-GPU,false,mig:")
    cards = parse_register(text)  # the scheduler's decoder
    assert [(c.memory, c.mode, c.healthy) for c in cards] == [(16, "mig", True),
                                                             (16, "mig", False)]
    status = cluster.nodes["gpu-1"]["status"]["allocatable"]
    assert status["volcano.sh/vgpu-memory"] == "16"  # the healthy card, in the same units


def test_hami_register_scales_and_omits_empty_fields_as_marshal_node_devices() -> None:
    """HAMi ``getAPIDevices``: ``registeredmem = MiB × DeviceMemoryScaling``, ``devcore =
    DeviceCoreScaling × 100``, the NVML name kept when it starts with ``NVIDIA``; Go's
    ``omitempty`` drops index 0, NUMA 0 and ``health: false``."""
    cluster = MemoryCluster()
    inv = inventory(2)
    inv = replace(inv, gpus=(inv.gpus[0], replace(inv.gpus[1], healthy=False, numa=1,
                                                  model="Tesla T4")))
    _reporter(cluster, devices=DeviceConfig(vgpu=True, profile="hami"),
              device_memory_scaling=1.5, device_cores_scaling=2.0).report(inv)
    text = cluster.node_annotations()["hami.io/node-nvidia-register"]
    assert json.loads(text) == [
        {"id": inv.gpus[0].uuid, "count": 4, "devmem": 24576, "devcore": 200,
         "type": "NVIDIA Lahar-Fake-GPU", "mode": "hami-core", "health": True},
        {"id": inv.gpus[1].uuid, "index": 1, "count": 4, "devmem": 24576, "devcore": 200,
         "type": "NVIDIA-Tesla T4", "numa": 1, "mode": "hami-core"}]
    cards = parse_register(text, json_format=True)  # the scheduler's decoder
    assert [(c.index, c.memory, c.cores, c.type, c.healthy) for c in cards] == [
        (0, 24576, 200, "NVIDIA Lahar-Fake-GPU", True),
        (1, 24576, 200, "NVIDIA-Tesla T4", False)]


def test_hami_register_in_mig_mode_is_not_scaled() -> None:
    """HAMi ``getAPIDevices``: ``if ... != 1 && !isMigMode`` / ``devcore := 100`` in MIG mode."""
    cluster = MemoryCluster()
    _reporter(cluster, devices=DeviceConfig(vgpu=True, profile="hami"),
              device_memory_scaling=2.0, device_cores_scaling=0.5,
              vgpu_mode="mig").report(inventory(1))
    card = json.loads(cluster.node_annotations()["hami.io/node-nvidia-register"])[0]
    assert (card["devmem"], card["devcore"], card["mode"]) == (16384, 100, "mig")


def test_hami_json_without_index_is_card_zero_wherever_it_stands() -> None:
    """HAMi's ``UnMarshalNodeDevices`` leaves a missing ``index`` at 0, and its plugin lists
    cards in map order, so card 0 need not come first."""
    text = ('[{"id":"GPU-b","index":1,"count":10,"devmem":100,"type":"NVIDIA A10","health":true},'
            '{"id":"GPU-a","count":10,"devmem":100,"type":"NVIDIA A10","health":true}]')
    assert [(c.uuid, c.index) for c in parse_register(text, json_format=True)] == [
        ("GPU-b", 1), ("GPU-a", 0)]
