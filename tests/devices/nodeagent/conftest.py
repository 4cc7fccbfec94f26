"""Fixtures of the node agent's tests: a short socket directory, a fake kubelet, an agent."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.node.agent import NodeAgent
from scheduler.devices.node.inventory import FakeSource, Inventory, Nic, fake_gpus
from scheduler.devices.node.resources import AgentConfig
from tests.devices.nodeagent.cluster import MemoryCluster
from tests.devices.nodeagent.fakekubelet import FakeKubelet

GIB = 2**30


@pytest.fixture
def socket_dir() -> Iterator[str]:
    """Unix socket paths are limited to ~107 bytes: pytest's tmp_path can be longer."""
    path = tempfile.mkdtemp(prefix="la-", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubelet(socket_dir: str) -> Iterator[FakeKubelet]:
    fake = FakeKubelet(socket_dir)
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def inventory(gpus: int = 2, memory: int = 16 * GIB, nics: int = 0) -> Inventory:
    return Inventory(gpus=fake_gpus("gpu-1", gpus, memory), driver="fake", fake=True,
                     nics=tuple(Nic(minor=i, bus_id=f"0000:{0x18 + i:02x}:00.0",
                                    pcie=f"pci0000:{(i // 2) * 0x20:02x}",
                                    vfs=(f"0000:{0x18 + i:02x}:00.1",)) for i in range(nics)))


@dataclass
class Running:
    agent: NodeAgent
    source: FakeSource
    cluster: MemoryCluster


@pytest.fixture
def start_agent(socket_dir: str) -> Iterator[Callable[..., Running]]:
    started: list[NodeAgent] = []

    def start(devices: DeviceConfig, *, cluster: MemoryCluster | None = None,
              source: FakeSource | None = None, **options: Any) -> Running:
        cluster = cluster or MemoryCluster()
        source = source or FakeSource(inventory())
        config = AgentConfig(node_name="gpu-1", devices=devices,
                             **{k: v for k, v in options.items()
                                if k in AgentConfig.__dataclass_fields__})
        agent = NodeAgent(config=config, source=source, access=cluster, kubelet_dir=socket_dir,
                          health_interval=options.get("health_interval", 0.05),
                          checkpoint_path=options.get("checkpoint_path", ""),
                          new_id=lambda: "cache-id", events=options.get("events"),
                          xid_recovery=options.get("xid_recovery", 0.0), environ={})
        agent.start()
        started.append(agent)
        return Running(agent, source, cluster)

    yield start
    for agent in started:
        agent.stop()
