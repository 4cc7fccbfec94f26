"""``lahar node-agent --dra``: the conflict check of ``--dra-cards``, the card split, and the
health loop re-publishing the pool (NVIDIA ``k8s-dra-driver-gpu``
``cmd/gpu-kubelet-plugin/device_health.go``: an unhealthy device is re-published; HAMi's DRA
driver publishes from the same inventory the device plugin serves)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.commands.cli import build_parser
from scheduler.commands.nodeagent import node_agent_main
from scheduler.devices.base import DeviceConfig
from scheduler.devices.node.dra.agent import CardSplit, DraAgent, check_split, parse_cards
from scheduler.devices.node.dra.checkpoint import Checkpoint
from scheduler.devices.node.dra.plugin import DraPlugin
from scheduler.devices.node.dra.prepare import Preparer
from scheduler.devices.node.inventory import FakeSource, Inventory
from scheduler.devices.node.resources import AgentConfig
from tests.devices.nodeagent.conftest import inventory
from tests.devices.nodeagent.drakubelet import FakeDraKubelet
from tests.devices.nodeagent.test_dra_plugin import Claims, result


def _run(socket_dir: str, *flags: str) -> int:
    args = build_parser(only="node-agent").parse_args(
        ["node-agent", "--master", "http://127.0.0.1:1", "--node-name", "gpu-1",
         "--kubelet-dir", socket_dir, "--fake-gpus", "2", *flags])
    return int(node_agent_main(args))


@pytest.mark.parametrize(("flags", "says"), [
    (("--dra", "--vgpu"), "--dra and --vgpu would both serve every GPU"),
    (("--dra", "--vgpu", "--dra-cards", "0-1"), "--dra-cards names every GPU"),
    (("--dra", "--gpu-share", "--dra-cards", "5"), "no GPU with index 5"),
    (("--dra", "--vgpu", "--dra-cards", "x"), "--dra-cards: 'x' is not a GPU index"),
    (("--vgpu", "--dra-cards", "0"), "--dra-cards: needs --dra"),
])
def test_both_paths_on_one_card_are_refused_at_start(socket_dir: str, flags: tuple[str, ...],
                                                     says: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(socket_dir, *flags) == 2
    assert says in capsys.readouterr().err


def test_the_split_gives_each_side_its_own_cards() -> None:
    source = FakeSource(inventory(gpus=4))
    assert parse_cards("0,2-3") == {0, 2, 3}
    assert check_split(legacy=["--vgpu"], cards={2, 3}, inventory=source.read()) is None
    dra, legacy = CardSplit(source, frozenset({2, 3}), dra=True), \
        CardSplit(source, frozenset({2, 3}), dra=False)
    assert [g.index for g in dra.read().gpus] == [2, 3]
    assert [g.index for g in legacy.read().gpus] == [0, 1]


@dataclass
class Publisher:
    synced: list[Inventory] = field(default_factory=list)
    deleted: int = 0

    def sync(self, inventory: Inventory, mig: Any = None) -> bool:
        self.synced.append(inventory)
        return True

    def delete_all(self) -> int:
        self.deleted += 1
        return 1


def test_health_change_republishes_and_prepare_refuses_the_card(socket_dir: str) -> None:
    source = FakeSource(inventory(gpus=2))
    claims = Claims()
    preparer = Preparer(driver="gpu.lahar.dev", node_name="gpu-1",
                        config=AgentConfig(node_name="gpu-1",
                                           devices=DeviceConfig(profile="hami")),
                        inventory=source.read, claims=claims,
                        checkpoint=Checkpoint(os.path.join(socket_dir, "cp.json")),
                        cdi_root=os.path.join(socket_dir, "cdi"))
    plugin = DraPlugin(driver="gpu.lahar.dev", preparer=preparer,
                       registry_dir=os.path.join(socket_dir, "reg"),
                       plugins_dir=os.path.join(socket_dir, "plugins"))
    publisher = Publisher()
    agent = DraAgent(plugin=plugin, source=source, publisher=publisher, health_interval=0.02,
                     delete_slices=True)
    agent.start()
    kubelet = FakeDraKubelet(os.path.join(socket_dir, "reg"))
    try:
        assert len(publisher.synced) == 1  # published before kubelet can register
        kubelet.discover()
        gpu = source.read().gpus[1]
        source.set_health(gpu.uuid, False)
        for _ in range(200):
            if len(publisher.synced) == 2:
                break
            time.sleep(0.01)
        assert not publisher.synced[-1].gpus[1].healthy
        claim = claims.add("c", [result("gpu-1")])
        assert "unhealthy" in kubelet.prepare(claim)["uid-c"].error
    finally:
        kubelet.close()
        agent.stop()
    assert publisher.deleted == 1
    assert not os.path.exists(plugin.dra_socket)


def test_a_failed_publication_is_tried_again(socket_dir: str) -> None:
    """The API server down at start: the pool is published once it answers, without waiting
    for a health change."""

    class Flaky(Publisher):
        def sync(self, inventory: Inventory, mig: Any = None) -> bool:
            if not self.synced:
                self.synced.append(inventory)
                raise OSError("connection refused")
            return super().sync(inventory, mig)

    source = FakeSource(inventory(gpus=1))
    preparer = Preparer(driver="gpu.lahar.dev", node_name="gpu-1",
                        config=AgentConfig(node_name="gpu-1"), inventory=source.read,
                        claims=Claims(), checkpoint=Checkpoint(os.path.join(socket_dir, "c")))
    plugin = DraPlugin(driver="gpu.lahar.dev", preparer=preparer,
                       registry_dir=os.path.join(socket_dir, "reg"),
                       plugins_dir=os.path.join(socket_dir, "plugins"))
    publisher = Flaky()
    agent = DraAgent(plugin=plugin, source=source, publisher=publisher, health_interval=0.02)
    agent.start()
    try:
        for _ in range(200):
            if agent.published:
                break
            time.sleep(0.01)
        assert agent.published == 1 and len(publisher.synced) == 2
    finally:
        agent.stop()
