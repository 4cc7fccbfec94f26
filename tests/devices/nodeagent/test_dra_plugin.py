"""The DRA kubelet plugin against a fake kubelet (:mod:`tests.devices.nodeagent.drakubelet`):
registration, NodePrepareResources / NodeUnprepareResources of whole, shared, MIG and RDMA
claims, the CDI specs written, idempotence, the checkpoint across a restart, an unhealthy card.

Peers: the kubelet plugin helper ``k8s.io/dynamic-resource-allocation/kubeletplugin``
(``draplugin.go`` ``Start``: registration socket ``<driver>-reg.sock``, ``nodeRegistrar``
``GetInfo``), NVIDIA ``k8s-dra-driver-gpu`` ``cmd/gpu-kubelet-plugin/driver.go``
``NodePrepareResources`` / ``device_state.go`` ``Prepare`` (results filtered by driver, CDI
spec per claim in ``cdi.go`` ``CreateClaimSpecFile``, checkpoint in ``checkpoint.go``), HAMi's
DRA driver (``consumedCapacity`` memory/cores to HAMi-core's environment).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.devices.base import DeviceConfig
from scheduler.devices.codec import ContainerDevice
from scheduler.devices.node.allocate import hami_core_edits
from scheduler.devices.node.dra.cdispec import claim_spec_path
from scheduler.devices.node.dra.checkpoint import Checkpoint
from scheduler.devices.node.dra.plugin import DraPlugin
from scheduler.devices.node.dra.prepare import Preparer
from scheduler.devices.node.inventory import FakeSource
from scheduler.devices.node.modes import FakeMig, parse_fake_mig
from scheduler.devices.node.resources import AgentConfig
from tests.devices.nodeagent.conftest import inventory
from tests.devices.nodeagent.drakubelet import FakeDraKubelet

DRIVER = "gpu.lahar.dev"
NODE = "gpu-1"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


@dataclass
class Claims:
    """The API server's ResourceClaims (namespace/name → object)."""

    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    reads: int = 0

    def get_resource_claim(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads += 1
        try:
            return self.objects[f"{namespace}/{name}"]
        except KeyError:
            raise LookupError(f"resourceclaims {name!r} not found") from None

    def add(self, name: str, results: list[dict[str, Any]]) -> tuple[str, str, str]:
        uid = f"uid-{name}"
        self.objects[f"ns/{name}"] = {
            "metadata": {"namespace": "ns", "name": name, "uid": uid},
            "status": {"allocation": {"devices": {"results": results}}}}
        return "ns", name, uid


def result(device: str, *, request: str = "gpu", driver: str = DRIVER, pool: str = NODE,
           **consumed: str) -> dict[str, Any]:
    out: dict[str, Any] = {"request": request, "driver": driver, "pool": pool, "device": device}
    if consumed:
        out["consumedCapacity"] = consumed
        out["shareID"] = f"share-{device}"
    return out


@dataclass
class Node:
    plugin: DraPlugin
    kubelet: FakeDraKubelet
    claims: Claims
    source: FakeSource
    cdi: str
    state: str

    def spec(self, uid: str) -> dict[str, Any]:
        with open(claim_spec_path(self.cdi, DRIVER, uid), encoding="utf-8") as f:
            return dict(json.load(f))


def _start(base: str, claims: Claims, source: FakeSource, **kwargs: Any) -> Node:
    config = AgentConfig(node_name=NODE, devices=DeviceConfig(vgpu=True, profile="hami"),
                         sysfs=os.path.join(base, "sys"))
    state = os.path.join(base, "plugins", DRIVER)
    preparer = Preparer(driver=DRIVER, node_name=NODE, config=config, inventory=source.read,
                        claims=claims, checkpoint=Checkpoint(os.path.join(state,
                                                                          "checkpoint.json")),
                        cdi_root=os.path.join(base, "cdi"), driver_root=os.path.join(base, "drv"),
                        mig=FakeMig(parse_fake_mig("1g.10gb:2")), new_id=lambda: "fixed",
                        **kwargs)
    plugin = DraPlugin(driver=DRIVER, preparer=preparer,
                       registry_dir=os.path.join(base, "registry"),
                       plugins_dir=os.path.join(base, "plugins"))
    plugin.start()
    kubelet = FakeDraKubelet(os.path.join(base, "registry"))
    kubelet.discover()
    return Node(plugin, kubelet, claims, source, os.path.join(base, "cdi"), state)


@pytest.fixture
def node(socket_dir: str) -> Iterator[Node]:
    started = _start(socket_dir, Claims(), FakeSource(inventory(gpus=4, nics=2)))
    try:
        yield started
    finally:
        started.kubelet.close()
        started.plugin.stop()


def test_registration_offers_v1_and_v1beta1(node: Node, socket_dir: str) -> None:
    """kubeletplugin ``nodeRegistrar.GetInfo``: type DRAPlugin, driver, endpoint, services."""
    info = node.kubelet.info
    assert info.type == "DRAPlugin" and info.name == DRIVER
    assert info.endpoint == os.path.join(socket_dir, "plugins", DRIVER, "dra.sock")
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    assert node.plugin.registered.wait(2.0)
    old = FakeDraKubelet(node.kubelet.registry_dir, versions=("v1beta1.DRAPlugin",))
    old.discover()
    claim = node.claims.add("c", [result("gpu-1")])
    assert old.service == "v1beta1.DRAPlugin"
    assert not old.prepare(claim)["uid-c"].error
    old.close()


def test_whole_gpu_claim_gets_its_card_by_cdi(node: Node) -> None:
    """NVIDIA ``device_state.go`` ``prepareDevices``: only this driver's results; one CDI
    device per result named ``<claim UID>-<device>``."""
    claim = node.claims.add("whole", [result("gpu-2"),
                                      result("x", driver="other.example.com")])
    answer = node.kubelet.prepare(claim)["uid-whole"]
    assert answer.error == ""
    [device] = answer.devices
    assert (device.pool_name, device.device_name, list(device.request_names)) == \
        (NODE, "gpu-2", ["gpu"])
    assert list(device.cdi_device_ids) == [f"k8s.{DRIVER}/claim=uid-whole-gpu-2"]
    spec = node.spec("uid-whole")
    assert spec["kind"] == f"k8s.{DRIVER}/claim"
    gpu = node.source.read().gpu_by_index(2)
    assert gpu is not None
    [edits] = [d["containerEdits"] for d in spec["devices"]]
    assert edits["env"] == [f"NVIDIA_VISIBLE_DEVICES={gpu.uuid}"]
    assert [n["path"] for n in edits["deviceNodes"]] == [f"/dev/nvidia{gpu.minor}"]


def test_shared_gpu_gets_hami_core_limits_from_consumed_capacity(node: Node) -> None:
    """HAMi's DRA driver: consumed ``memory`` → ``CUDA_DEVICE_MEMORY_LIMIT_0``, ``cores`` →
    ``CUDA_DEVICE_SM_LIMIT``; the same variables and mounts as the vGPU ``Allocate``
    (HAMi ``plugin/server.go`` ``Allocate``)."""
    a = node.claims.add("a", [result("gpu-0", memory="4Gi", cores="30")])
    b = node.claims.add("b", [result("gpu-0", memory="6Gi")])
    answers = node.kubelet.prepare(a, b)
    assert answers["uid-a"].devices[0].share_id == "share-gpu-0"
    env_a = node.spec("uid-a")["devices"][0]["containerEdits"]["env"]
    env_b = node.spec("uid-b")["devices"][0]["containerEdits"]["env"]
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=4096m" in env_a and "CUDA_DEVICE_SM_LIMIT=30" in env_a
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=6144m" in env_b and "CUDA_DEVICE_SM_LIMIT=100" in env_b
    assert "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/fixed.cache" in env_a
    mounts = {m["containerPath"]: m["hostPath"]
              for m in node.spec("uid-a")["devices"][0]["containerEdits"]["mounts"]}
    assert mounts["/usr/local/vgpu"] == "/usr/local/vgpu/containers/claim_uid-a"
    assert mounts["/etc/ld.so.preload"] == "/usr/local/vgpu/ld.so.preload"
    assert "/tmp/vgpulock" in mounts
    # the vGPU device-plugin path gives a container with the same share the same values
    gpu = node.source.read().gpu_by_index(0)
    assert gpu is not None
    envs, _ = hami_core_edits(node.plugin.preparer.config,
                              [ContainerDevice(gpu.uuid, "NVIDIA", 4096, 30)],
                              cache_id="fixed", cache_dir_name="x", container={})
    assert sorted(env_a) == sorted(f"{k}={v}" for k, v in envs.items())


def test_a_share_of_no_cores_is_prepared_unthrottled(node: Node) -> None:
    """The shared card's ``cores`` request policy starts at 0 (HAMi's
    ``HAMiGpuInfo.GetDevice``: ``ValidRange.Min`` 0), so an allocator gives a claim asking
    ``cores: 0`` a share; HAMi's driver (``hami_core.go`` ``GetCDIContainerEdits``) passes the
    consumed value on and HAMi-core reads ``CUDA_DEVICE_SM_LIMIT`` 0 as no limit
    (``rate_limiter`` in ``multiprocess_utilization_watcher.c``). Out of the range it is refused."""
    share = node.claims.add("z", [result("gpu-0", memory="2Gi", cores="0")])
    answer = node.kubelet.prepare(share)["uid-z"]
    assert answer.error == ""
    env = node.spec("uid-z")["devices"][0]["containerEdits"]["env"]
    assert "CUDA_DEVICE_SM_LIMIT=0" in env and "CUDA_DEVICE_MEMORY_LIMIT_0=2048m" in env
    over = node.claims.add("o", [result("gpu-0", memory="2Gi", cores="101")])
    assert "cores 101 is not a percentage in 0..100" in node.kubelet.prepare(over)["uid-o"].error


def test_mig_and_rdma_claims(node: Node) -> None:
    """MIG: the instance's UUID visible, the parent's node; RDMA: rdma_cm + uverbs (koordlet
    ``hooks/rdma/rdma.go``), a VF by its position."""
    claim = node.claims.add("m", [result("gpu-1-mig-1g10gb-1", request="mig"),
                                  result("rdma-1", request="nic"),
                                  result("rdma-0-vf-0", request="nic")])
    missing = node.kubelet.prepare(claim)["uid-m"].error
    assert "no uverbs device for RDMA function 0000:18:00.1" in missing
    sysfs = node.plugin.preparer.config.sysfs
    os.makedirs(os.path.join(sysfs, "bus/pci/devices/0000:18:00.1/infiniband_verbs/uverbs7"))
    answer = node.kubelet.prepare(claim)["uid-m"]
    assert answer.error == "" and [d.device_name for d in answer.devices] == \
        ["gpu-1-mig-1g10gb-1", "rdma-1", "rdma-0-vf-0"]
    gpu = node.source.read().gpu_by_index(1)
    assert gpu is not None
    mig = FakeMig(parse_fake_mig("1g.10gb:2")).instances(gpu)[1]
    assert mig is not None
    devices = {d["name"]: d["containerEdits"] for d in node.spec("uid-m")["devices"]}
    assert devices["uid-m-gpu-1-mig-1g10gb-1"]["env"] == [f"NVIDIA_VISIBLE_DEVICES={mig.uuid}"]
    assert [n["path"] for n in devices["uid-m-rdma-1"]["deviceNodes"]] == \
        ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs1"]
    assert [n["path"] for n in devices["uid-m-rdma-0-vf-0"]["deviceNodes"]] == \
        ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs7"]


def test_a_device_the_node_lacks_is_refused_with_a_clear_error(node: Node) -> None:
    claim = node.claims.add("bad", [result("gpu-9")])
    other = node.claims.add("ok", [result("gpu-0")])
    answers = node.kubelet.prepare(claim, other)
    assert "ResourceClaim ns/bad" in answers["uid-bad"].error
    assert "device gpu-9" in answers["uid-bad"].error and "has no such device" in \
        answers["uid-bad"].error
    assert answers["uid-ok"].error == ""
    assert not os.path.exists(claim_spec_path(node.cdi, DRIVER, "uid-bad"))
    stale = node.kubelet.prepare(("ns", "ok", "uid-older"))["uid-older"]
    assert "kubelet asks for uid-older" in stale.error


def test_unhealthy_card_is_not_prepared(node: Node) -> None:
    gpu = node.source.read().gpu_by_index(3)
    assert gpu is not None
    node.source.set_health(gpu.uuid, False)
    claim = node.claims.add("sick", [result("gpu-3")])
    assert "unhealthy" in node.kubelet.prepare(claim)["uid-sick"].error


def test_prepare_is_idempotent_and_unprepare_removes_the_spec(node: Node) -> None:
    claim = node.claims.add("i", [result("gpu-0", memory="2Gi")])
    first = node.kubelet.prepare(claim)["uid-i"]
    reads = node.claims.reads
    again = node.kubelet.prepare(claim)["uid-i"]
    assert again == first and node.claims.reads == reads
    assert node.kubelet.unprepare(claim)["uid-i"].error == ""
    assert not os.path.exists(claim_spec_path(node.cdi, DRIVER, "uid-i"))
    assert node.kubelet.unprepare(claim)["uid-i"].error == ""  # again: nothing to do


def test_a_restarted_agent_unprepares_what_it_prepared(socket_dir: str) -> None:
    """NVIDIA ``checkpoint.go``: the prepared claims survive the plugin."""
    claims, source = Claims(), FakeSource(inventory(gpus=2))
    first = _start(socket_dir, claims, source)
    claim = claims.add("r", [result("gpu-1")])
    answer = first.kubelet.prepare(claim)["uid-r"]
    first.kubelet.close()
    first.plugin.stop()
    del claims.objects["ns/r"]  # the claim is gone from the API server meanwhile
    second = _start(socket_dir, claims, source)
    try:
        assert second.kubelet.prepare(claim)["uid-r"] == answer  # from the checkpoint
        assert "uid-r" in second.plugin.preparer.prepared()
        assert second.kubelet.unprepare(claim)["uid-r"].error == ""
        assert second.plugin.preparer.prepared() == {}
        assert not os.path.exists(claim_spec_path(second.cdi, DRIVER, "uid-r"))
    finally:
        second.kubelet.close()
        second.plugin.stop()


def test_a_corrupt_checkpoint_is_set_aside(tmp_path: Any) -> None:
    path = str(tmp_path / "checkpoint.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"version": 1, "checksum": "x", "claims": {}}')
    assert Checkpoint(path).claims() == {}
    assert os.path.exists(f"{path}.bad")


def test_a_deleted_socket_is_served_again(node: Node) -> None:
    os.unlink(node.plugin.registration_socket)
    kubelet = FakeDraKubelet(node.kubelet.registry_dir)
    kubelet.discover()
    assert node.plugin.starts == 2
    kubelet.close()


def test_generated_stubs_are_current() -> None:
    """``hack/gen-dra-api.sh --check`` regenerates and compares."""
    pytest.importorskip("grpc_tools")
    done = subprocess.run([os.path.join(ROOT, "hack", "gen-dra-api.sh"), "--check"],
                          capture_output=True, text=True, env={**os.environ,
                                                               "PATH": os.path.dirname(
                                                                   sys.executable) + ":"
                                                               + os.environ.get("PATH", "")},
                          check=False)
    assert done.returncode == 0, done.stderr
