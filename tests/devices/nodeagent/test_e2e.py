"""End to end: ``lahar run`` + ``lahar node-agent --fake-gpus`` + the fake kubelet, on an API
server (the double by default; a real one with ``LAHAR_NODEAGENT_KUBECONFIG``).

For each family a node gets its own agent process and fake kubelet; the scheduler binds a
device pod from what the agent reported (register annotations, status quantities, the Device
object), then the fake kubelet admits the pod as kubelet would, calling ``Allocate`` per
container and resource: the pod gets the environment for exactly the cards the scheduler
chose (volcano-device-plugin ``Allocate``, volcano-vgpu/HAMi ``Allocate``, koordlet's GPU and
RDMA hooks) and the node lock is released.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver import start_standalone
from tests.devices.nodeagent.fakekubelet import FakeKubelet
from tests.e2e.kube import KOORDINATOR, ROOT, Kube, annotations, eventually, make_pod, raw, short_id
from tests.e2e.processes import SchedulerProcess

CONF = (ROOT / "conf" / "finegrained.conf").read_text()


def deviceshare_conf(**arguments: Any) -> str:
    from scheduler.conf import DEFAULT_CONF

    lines = "".join(f"      deviceshare.{k}: {str(v).lower() if isinstance(v, bool) else v}\n"
                    for k, v in arguments.items())
    return DEFAULT_CONF + f"  - name: deviceshare\n    arguments:\n{lines}"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, str]]:
    real = os.environ.get("LAHAR_NODEAGENT_KUBECONFIG", "")
    if real:
        kube = Kube(real)
        for reason in (kube.ensure_volcano_crds(), kube.ensure_device_crd()):
            if reason:
                pytest.skip(reason)
        yield kube, real
        return
    kubeconfig = tmp_path_factory.mktemp("na") / "kubeconfig"
    double = start_standalone(kubeconfig)
    try:
        yield Kube(str(kubeconfig)), str(kubeconfig)
    finally:
        double.stop()


class NodeSide:
    """One fake node: its Node object, ``lahar node-agent`` and the fake kubelet."""

    def __init__(self, kube: Kube, kubeconfig: str, workdir: Path, agent_args: list[str]) -> None:
        self.kube = kube
        self.name = f"na-{short_id()}"
        self.dir = tempfile.mkdtemp(prefix="la-", dir="/tmp")
        resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
        raw(kube.core.create_node, {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": {"lahar.e2e/nodeagent": self.name}},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True"}]}})
        self.kubelet = FakeKubelet(self.dir, on_devices=self._node_status)
        self.kubelet.start()
        self.log = (workdir / f"{self.name}.log").open("wb")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
            str(ROOT), os.environ.get("PYTHONPATH", "")])))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scheduler", "node-agent", "--kubeconfig", kubeconfig,
             "--node-name", self.name, "--kubelet-dir", self.dir, "--health-interval", "0.2",
             *agent_args], cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def _node_status(self, resource: str, count: int) -> None:
        raw(self.kube.core.patch_node_status, self.name, {"status": {
            "capacity": {resource: str(count)}, "allocatable": {resource: str(count)}}})

    def admit(self, namespace: str, pod: str, requests: dict[str, int]) -> dict[str, Any]:
        """What kubelet does for a one-container pod: Allocate per resource, then Running.
        The answers merge as kubelet's ``GetDeviceRunContainerOptions``
        (``pkg/kubelet/cm/devicemanager/manager.go``) merges them: the first answer's value
        of a variable and the first device of a container path win."""
        envs: dict[str, Any] = {"_devices": []}
        for resource, count in requests.items():
            answer = self.kubelet.allocate(resource, count)
            for key, value in answer.envs.items():
                envs.setdefault(key, value)
            envs["_devices"].extend(d.host_path for d in answer.devices
                                    if d.host_path not in envs["_devices"])
        raw(self.kube.core.patch_namespaced_pod_status, pod, namespace,
            {"status": {"phase": "Running"}})
        return envs

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()
        self.kubelet.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(Exception):
            raw(self.kube.core.delete_node, self.name)

    def tail(self) -> str:
        return Path(self.log.name).read_text(errors="replace")[-3000:]


@pytest.fixture
def world(kube: tuple[Kube, str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    client, kubeconfig = kube
    namespace = f"na-{short_id()}"
    raw(client.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": namespace}})
    made: dict[str, Any] = {"kube": client, "kubeconfig": kubeconfig, "ns": namespace,
                            "dir": tmp_path, "close": []}
    try:
        yield made
    finally:
        for close in reversed(made["close"]):
            close()
        client.delete_namespace(namespace, finalize=True)  # no namespace controller runs


def start(world: dict[str, Any], agent_args: list[str], conf: str,
          resources: set[str]) -> tuple[NodeSide, str]:
    node = NodeSide(world["kube"], world["kubeconfig"], world["dir"], agent_args)
    world["close"].append(node.close)
    assert node.kubelet.wait_registered(resources, timeout=30), node.tail()
    name = f"lahar-na-{short_id()}"
    scheduler = SchedulerProcess(kubeconfig=world["kubeconfig"], name=name, workdir=world["dir"],
                                 conf=conf, node_selector={"lahar.e2e/nodeagent": node.name})
    world["close"].append(scheduler.terminate)
    scheduler.wait_serving()
    return node, name


def submit(world: dict[str, Any], scheduler: str, name: str, limits: dict[str, str],
           **extra: Any) -> dict[str, Any]:
    kube, namespace = world["kube"], world["ns"]
    kube.create_podgroup(namespace, name, min_member=1)
    kube.create_pod(namespace, make_pod(name, scheduler=scheduler, group=name, run_id="na",
                                        cpu_milli=100, limits=limits, **extra))
    return eventually(lambda: (lambda p: p if p["spec"].get("nodeName") else None)(
        kube.pod(namespace, name)), timeout=60, what=f"pod {name} bound")


def test_gpu_share_pod_gets_the_card_the_scheduler_chose(world: dict[str, Any]) -> None:
    node, scheduler = start(world, ["--gpu-share", "--fake-gpus", "2", "--fake-gpu-memory",
                                    "2Gi"], deviceshare_conf(GPUSharingEnable=True,
                                                             NodeLockEnable=True),
                            {"volcano.sh/gpu-memory"})
    first = submit(world, scheduler, "share-a", {"volcano.sh/gpu-memory": "1500"})
    envs = node.admit(world["ns"], "share-a", {"volcano.sh/gpu-memory": 1500})
    assert envs["NVIDIA_VISIBLE_DEVICES"] == annotations(first)["volcano.sh/gpu-index"]
    assert envs["VOLCANO_GPU_MEMORY_TOTAL"] == "2048"
    second = submit(world, scheduler, "share-b", {"volcano.sh/gpu-memory": "1500"})
    envs_b = node.admit(world["ns"], "share-b", {"volcano.sh/gpu-memory": 1500})
    assert envs_b["NVIDIA_VISIBLE_DEVICES"] == annotations(second)["volcano.sh/gpu-index"]
    assert envs_b["NVIDIA_VISIBLE_DEVICES"] != envs["NVIDIA_VISIBLE_DEVICES"]  # 1500 + 1500 > 2048
    kube = world["kube"]
    assert annotations(kube.pod(world["ns"], "share-b"))["volcano.sh/gpu-assigned"] == "true"
    assert "gpu" not in annotations(kube.node(node.name))


def test_vgpu_pod_with_node_lock(world: dict[str, Any]) -> None:
    node, scheduler = start(world, ["--vgpu", "--fake-gpus", "2", "--split-count", "4"],
                            deviceshare_conf(VGPUEnable=True, NodeLockEnable=True),
                            {"volcano.sh/vgpu-number"})
    kube = world["kube"]
    eventually(lambda: "volcano.sh/node-vgpu-register" in annotations(kube.node(node.name))
               and kube.node(node.name)["status"]["allocatable"].get("volcano.sh/vgpu-cores"),
               timeout=30, what="register annotation and vGPU status")
    pod = submit(world, scheduler, "train", {"volcano.sh/vgpu-number": "2",
                                             "volcano.sh/vgpu-memory": "3000",
                                             "volcano.sh/vgpu-cores": "30"})
    held = annotations(pod)["volcano.sh/vgpu-ids-new"]
    assert "hamivgpu" in annotations(kube.node(node.name))  # locked until the agent serves
    envs = node.admit(world["ns"], "train", {"volcano.sh/vgpu-number": 2})
    uuids = [entry.split(",")[0] for entry in held.strip(":;").split(":")]
    assert envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(uuids)
    assert envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m" and envs["CUDA_DEVICE_SM_LIMIT"] == "30"
    after = annotations(kube.pod(world["ns"], "train"))
    assert after["volcano.sh/bind-phase"] == "success"
    assert "hamivgpu" not in annotations(kube.node(node.name))


def test_fine_grained_pod_with_gpu_and_rdma(world: dict[str, Any]) -> None:
    inventory = world["dir"] / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({
        "gpus": [{"memory": "80Gi", "model": "NVIDIA A100-SXM4-80GB", "numa": 0,
                  "pcie": "pci0000:00"},
                 {"memory": "80Gi", "model": "NVIDIA A100-SXM4-80GB", "numa": 1,
                  "pcie": "pci0000:80"}],
        "rdma": [{"busID": "0000:81:00.0", "numa": 1, "pcie": "pci0000:80"}]}))
    node, scheduler = start(world, ["--fine-grained", "--fake-inventory", str(inventory)], CONF,
                            {"nvidia.com/gpu", "koordinator.sh/rdma"})
    kube = world["kube"]
    device = eventually(lambda: raw(kube.custom.get_cluster_custom_object, *KOORDINATOR,
                                    "devices", node.name), timeout=30, what="Device object")
    world["close"].append(lambda: raw(kube.custom.delete_cluster_custom_object, *KOORDINATOR,
                                      "devices", node.name))
    assert [d["type"] for d in device["spec"]["devices"]] == ["gpu", "gpu", "rdma"]
    joint = json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"})
    pod = submit(world, scheduler, "joint", {"nvidia.com/gpu": "1", "koordinator.sh/rdma": "1"},
                 annotations={"scheduling.koordinator.sh/device-joint-allocate": joint})
    allocated = json.loads(annotations(pod)["scheduling.koordinator.sh/device-allocated"])
    assert allocated["gpu"][0]["minor"] == 1  # the GPU on the NIC's PCIe root
    envs = node.admit(world["ns"], "joint", {"nvidia.com/gpu": 1, "koordinator.sh/rdma": 1})
    assert envs["NVIDIA_VISIBLE_DEVICES"] == "1"
    assert envs["_devices"] == ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"]
