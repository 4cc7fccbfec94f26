#!/usr/bin/env bash
# Check lahar's node side on a machine with NVIDIA GPUs (no cluster needed):
#  1. `lahar device report --dry-run` lists every GPU with the minor, UUID, memory and PCI bus
#     that `nvidia-smi -q` shows;
#  2. `lahar node-agent` (real NVML) registers with the test suite's fake kubelet and its
#     ListAndWatch lists every GPU healthy (fine-grained nvidia.com/gpu: one ID per UUID);
#  3. a program run under the environment an Allocate returned sees only the assigned card
#     (`nvidia-smi -L` under NVIDIA_VISIBLE_DEVICES; torch if it is installed);
#  4. the DRA path: `node-agent --dra`'s plugin (real NVML) registers with the test suite's fake
#     DRA kubelet, prepares a whole-GPU claim and a 1 GiB / 30 % share of the last card, and the
#     CDI specs name the card's device node (which exists) and UUID (which nvidia-smi knows),
#     with HAMi-core's limits for the share.
# Needs: nvidia-smi, python with `pip install -e '.[nodeagent,test]'`. Exit 0 when all pass.
#
#   hack/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: not a GPU machine"

echo "== nvidia-smi -L"; nvidia-smi -L
echo "== 1. lahar device report --dry-run"
python -m scheduler device report --dry-run --node-name gpu-check > /tmp/lahar-gpu-report.yaml
cat /tmp/lahar-gpu-report.yaml
python - <<'PY'
import subprocess, yaml, re
report = yaml.safe_load(open("/tmp/lahar-gpu-report.yaml"))
devices = {d["id"]: d for d in report["spec"]["devices"] if d["type"] == "gpu"}
query = subprocess.run(["nvidia-smi", "--query-gpu=uuid,pci.bus_id,memory.total",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True,
                       check=True).stdout
smi = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, check=True).stdout
minors = dict(zip(re.findall(r"GPU UUID\s+:\s+(\S+)", smi),
                  map(int, re.findall(r"Minor Number\s+:\s+(\d+)", smi))))
for line in query.strip().splitlines():
    uuid, bus, mib = (x.strip() for x in line.split(","))
    d = devices.get(uuid)
    assert d is not None, f"{uuid} missing from the report"
    assert d["health"] is True, f"{uuid} unhealthy"
    assert d["minor"] == minors[uuid], (uuid, d["minor"], minors[uuid])
    assert d["topology"]["busID"] == bus.lower()[4:], (d["topology"]["busID"], bus)
    reported = int(str(d["resources"]["koordinator.sh/gpu-memory"]).rstrip("i").rstrip("GMK") or 0)
    print(f"ok {uuid} minor {d['minor']} bus {d['topology']['busID']} memory {mib} MiB")
assert len(devices) == len(query.strip().splitlines()), "GPU count differs"
PY

echo "== 2 and 3. node-agent + fake kubelet + Allocate"
python - <<'PY'
import json, os, shutil, subprocess, sys, tempfile, threading, time
sys.path.insert(0, os.getcwd())
from scheduler.devices.base import DeviceConfig
from scheduler.devices.node.agent import NodeAgent
from scheduler.devices.node.inventory import NvmlSource
from scheduler.devices.node.report import load_nvml
from scheduler.devices.node.resources import AgentConfig
from tests.devices.nodeagent.cluster import MemoryCluster, pod
from tests.devices.nodeagent.fakekubelet import FakeKubelet

directory = tempfile.mkdtemp(prefix="la-", dir="/tmp")
kubelet = FakeKubelet(directory); kubelet.start()
nvml, error = load_nvml()
source = NvmlSource(nvml=nvml, error=error)
cluster = MemoryCluster()
agent = NodeAgent(config=AgentConfig(node_name="gpu-1", devices=DeviceConfig(finegrained=True)),
                  source=source, access=cluster, kubelet_dir=directory)
agent.start()
try:
    assert kubelet.wait_registered({"nvidia.com/gpu"}, timeout=30), "no registration"
    gpus = source.read().gpus
    healthy = sorted(kubelet.healthy("nvidia.com/gpu"))
    print("ListAndWatch nvidia.com/gpu healthy:", healthy)
    assert healthy == sorted(g.uuid for g in gpus), "not every GPU is listed healthy"
    last = gpus[-1]
    allocated = {"gpu": [{"minor": last.minor, "resources": {"koordinator.sh/gpu-core": "100"}}]}
    cluster.pods.append(pod("check", containers=[("main", {"nvidia.com/gpu": "1"})],
                            annotations={"scheduling.koordinator.sh/device-allocated":
                                         json.dumps(allocated)}))
    answer = kubelet.allocate("nvidia.com/gpu", 1)
    env = dict(answer.envs)
    print("Allocate env:", env)
    # koordlet injects minors; nvidia-smi and CUDA read NVIDIA_VISIBLE_DEVICES as an index
    # only inside a container; on the host CUDA_VISIBLE_DEVICES takes the card by UUID.
    shown = subprocess.run(["nvidia-smi", "-L", "-i", last.uuid], capture_output=True,
                           text=True, check=True).stdout.strip()
    print("the assigned card:", shown)
    assert env["NVIDIA_VISIBLE_DEVICES"] == str(last.minor)
    probe = ("import torch; print(torch.cuda.device_count(), torch.cuda.get_device_name(0))")
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env=dict(os.environ, CUDA_VISIBLE_DEVICES=last.uuid), timeout=120)
        print("torch under the assigned card:", out.stdout.strip() or out.stderr.strip()[-200:])
        if out.returncode == 0:
            assert out.stdout.split()[0] == "1", "torch sees more than the assigned card"
    except FileNotFoundError:
        pass
finally:
    agent.stop(); kubelet.stop(); source.close(); shutil.rmtree(directory, ignore_errors=True)
print("PASS")
PY

echo "== 4. DRA: the kubelet plugin + fake DRA kubelet + NodePrepareResources"
python - <<'PY'
import json, os, shutil, subprocess, sys, tempfile
sys.path.insert(0, os.getcwd())
from scheduler.devices.base import DeviceConfig
from scheduler.devices.node.dra.checkpoint import Checkpoint
from scheduler.devices.node.dra.cdispec import claim_spec_path
from scheduler.devices.node.dra.plugin import DraPlugin
from scheduler.devices.node.dra.prepare import Preparer
from scheduler.devices.node.inventory import NvmlSource
from scheduler.devices.node.report import load_nvml
from scheduler.devices.node.resources import AgentConfig
from tests.devices.nodeagent.drakubelet import FakeDraKubelet

directory = tempfile.mkdtemp(prefix="la-", dir="/tmp")
nvml, error = load_nvml()
source = NvmlSource(nvml=nvml, error=error)
last = source.read().gpus[-1]
device = f"gpu-{last.minor}"
claims = {
    "whole": [{"request": "gpu", "driver": "gpu.lahar.dev", "pool": "gpu-1", "device": device}],
    "share": [{"request": "gpu", "driver": "gpu.lahar.dev", "pool": "gpu-1", "device": device,
               "consumedCapacity": {"memory": "1Gi", "cores": "30"}}]}

class Claims:
    def get_resource_claim(self, namespace, name):
        return {"metadata": {"uid": f"uid-{name}"},
                "status": {"allocation": {"devices": {"results": claims[name]}}}}

preparer = Preparer(driver="gpu.lahar.dev", node_name="gpu-1",
                    config=AgentConfig(node_name="gpu-1", devices=DeviceConfig(profile="hami")),
                    inventory=source.read, claims=Claims(),
                    checkpoint=Checkpoint(os.path.join(directory, "checkpoint.json")),
                    cdi_root=os.path.join(directory, "cdi"))
plugin = DraPlugin(driver="gpu.lahar.dev", preparer=preparer,
                   registry_dir=os.path.join(directory, "registry"),
                   plugins_dir=os.path.join(directory, "plugins"))
plugin.start()
kubelet = FakeDraKubelet(os.path.join(directory, "registry"))
try:
    kubelet.discover()
    answers = kubelet.prepare(("default", "whole", "uid-whole"), ("default", "share", "uid-share"))
    for name in ("whole", "share"):
        assert answers[f"uid-{name}"].error == "", answers[f"uid-{name}"].error
        with open(claim_spec_path(os.path.join(directory, "cdi"), "gpu.lahar.dev",
                                  f"uid-{name}")) as f:
            spec = json.load(f)
        print(f"CDI spec of the {name} claim:", json.dumps(spec["devices"]))
        edits = spec["devices"][0]["containerEdits"]
        env = dict(e.split("=", 1) for e in edits["env"])
        node = edits["deviceNodes"][0]["path"]
        assert os.path.exists(node), f"{node} does not exist"
        assert env["NVIDIA_VISIBLE_DEVICES"] == last.uuid
        shown = subprocess.run(["nvidia-smi", "-L", "-i", last.uuid], capture_output=True,
                               text=True, check=True).stdout.strip()
        print("the prepared card:", shown)
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1024m" and env["CUDA_DEVICE_SM_LIMIT"] == "30"
    kubelet.unprepare(("default", "whole", "uid-whole"), ("default", "share", "uid-share"))
    assert preparer.prepared() == {}
finally:
    kubelet.close(); plugin.stop(); source.close(); shutil.rmtree(directory, ignore_errors=True)
print("PASS")
PY
