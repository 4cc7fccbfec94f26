"""The NUMA hint of ``ListAndWatch`` is sent only when asked for, as HAMi does.

HAMi ``pkg/device-plugin/nvidiadevice/nvinternal/rm/devices.go:195-216``
(``GetPluginDevices``: ``topology = nil`` unless ``numaTopology``) with
``nvinternal/plugin/server.go:1135-1138`` (``apiDevices`` reads ``EnableNUMATopology``,
``pkg/device/nvidia/device.go:124-127``: off by default to keep kubelet's admission as it was).
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.node.allocate import Allocator
from scheduler.devices.node.inventory import FakeSource
from scheduler.devices.node.plugin import DeviceState, PluginServicer
from scheduler.devices.node.resources import AgentConfig, Endpoint, endpoints
from tests.devices.nodeagent.cluster import MemoryCluster
from tests.devices.nodeagent.conftest import inventory

INV = inventory(gpus=2, nics=1)
ON_NUMA_1 = replace(INV, gpus=tuple(replace(g, numa=1) for g in INV.gpus),
                    nics=tuple(replace(n, numa=1) for n in INV.nics))


def numa_of_every_device(endpoint: Endpoint, config: AgentConfig) -> set[tuple[int, ...]]:
    state = DeviceState(FakeSource(ON_NUMA_1))
    allocator = Allocator(access=MemoryCluster(), config=config, inventory=state.inventory)
    servicer = PluginServicer(endpoint, state, allocator, config, threading.Event())
    return {tuple(n.ID for n in d.topology.nodes) if d.HasField("topology") else ()
            for d in servicer.devices().devices}


FAMILIES = [DeviceConfig(vgpu=True, profile="hami"), DeviceConfig(vgpu=True),
            DeviceConfig(gpu_sharing=True), DeviceConfig(finegrained=True)]


@pytest.mark.parametrize("devices", FAMILIES, ids=["hami", "volcano", "gpushare", "finegrained"])
def test_no_topology_unless_asked(devices: DeviceConfig) -> None:
    plain = AgentConfig(node_name="gpu-1", devices=devices, split_count=2,
                        gpu_memory_factor=1024)
    asked = replace(plain, numa_topology=True)
    for endpoint in endpoints(plain):
        assert numa_of_every_device(endpoint, plain) == {()}, endpoint.resource
        assert numa_of_every_device(endpoint, asked) == {(1,)}, endpoint.resource
