"""The ``dra`` scenario of ``hack/bench_throughput.py``: DRA claims against ``nvidia.com/gpu``.

    python hack/bench_throughput.py --scenario dra --nodes 1000 --pods 10000

Every node has 8 GPUs. In the DRA run they are published as devices of one ResourceSlice per
node (driver ``gpu.example.com``): 7 exclusive GPUs with a ``model`` attribute (half the nodes
``A100``, half ``H100``) and one GPU that several claims may share by memory
(``allowMultipleAllocations``, 80Gi of consumable ``memory``). The pods are single-pod jobs
of three kinds, each from its ResourceClaimTemplate (the embedded cluster makes the claims,
as the resourceclaim controller does): three fifths claim one GPU of the ``gpu`` class, a fifth
one GPU with a CEL selector on the ``model`` attribute (``H100``), a fifth 20Gi of a shared
GPU. The same pods with ``nvidia.com/gpu: 1`` (the node's allocatable 8) run next, in the same
process, and ``ratio`` is the DRA pods/s over theirs. With 10,000 pods on 8,000 GPUs not every
pod fits in either run; ``bound`` says how many did (both runs' pods/s count bound pods).

The conf is ``conf/binpack.conf`` with ``DRAConsumableCapacity`` on. Reported besides:
``cel_compiles``, the CEL programs compiled during the DRA run (one per distinct selector: the
two class selectors and the claim's), and the allocator's share of the run's time when
``--profile`` is given.
"""

from __future__ import annotations

from typing import Any

from scheduler.cluster.manifests import Manifest

DRIVER = "gpu.example.com"
GATES = "DRAConsumableCapacity=true"
EXCLUSIVE = 7
SHARED_MEMORY = "80Gi"
SHARE = "20Gi"
CEL_MODEL = "H100"

CLASSES = (
    ("gpu.example.com",
     f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].mode == "exclusive"'),
    ("shared-gpu.example.com",
     f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].mode == "shared"'),
)
CLAIM_SELECTOR = f'device.attributes["{DRIVER}"].model == "{CEL_MODEL}"'

TEMPLATES: dict[str, dict[str, Any]] = {
    "one-gpu": {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}},
    "one-h100": {"name": "gpu", "exactly": {
        "deviceClassName": "gpu.example.com",
        "selectors": [{"cel": {"expression": CLAIM_SELECTOR}}]}},
    "gpu-share": {"name": "gpu", "exactly": {
        "deviceClassName": "shared-gpu.example.com",
        "capacity": {"requests": {"memory": SHARE}}}},
}
KINDS = ("one-gpu", "one-gpu", "one-gpu", "one-h100", "gpu-share")
"""Pod ``i`` uses template ``KINDS[i % 5]``."""


def _slice(node: str, index: int) -> dict[str, Any]:
    model = "H100" if index % 2 else "A100"
    devices: list[dict[str, Any]] = [
        {"name": f"gpu-{minor}",
         "attributes": {"mode": {"string": "exclusive"}, "model": {"string": model},
                        "index": {"int": minor}},
         "capacity": {"memory": {"value": SHARED_MEMORY}}}
        for minor in range(EXCLUSIVE)]
    devices.append({
        "name": f"gpu-{EXCLUSIVE}", "allowMultipleAllocations": True,
        "attributes": {"mode": {"string": "shared"}, "model": {"string": model},
                       "index": {"int": EXCLUSIVE}},
        "capacity": {"memory": {"value": SHARED_MEMORY,
                                "requestPolicy": {"default": "8Gi",
                                                  "validRange": {"min": "1Gi"}}}}})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def dra_cluster(nodes: int, pods: int, seed: int, *, dra: bool = True) -> list[Manifest]:
    """``nodes`` nodes of 8 GPUs and ``pods`` one-GPU pods (see the module doc); with
    ``dra=False`` the same nodes and pods asking for ``nvidia.com/gpu`` instead."""
    del seed  # the cluster is the same for every seed
    out: list[Manifest] = []
    if dra:
        out += [Manifest("bench", {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}})
            for name, expression in CLASSES]
        out += [Manifest("bench", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"spec": {"devices": {"requests": [request]}}}})
            for name, request in TEMPLATES.items()]
    for i in range(nodes):
        name = f"node-{i:05d}"
        allocatable = {"cpu": "96", "memory": "1Ti", "pods": "110"}
        if not dra:
            allocatable["nvidia.com/gpu"] = "8"
        out.append(Manifest("bench", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": allocatable}}))
        if dra:
            out.append(Manifest("bench", _slice(name, i)))
    for i in range(pods):
        name = f"job-{i:05d}"
        out.append(Manifest("bench", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"minMember": 1, "queue": "default"}}))
        container: dict[str, Any] = {"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}
        spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [container]}
        if dra:
            container["resources"]["claims"] = [{"name": "gpu"}]
            spec["resourceClaims"] = [{"name": "gpu",
                                       "resourceClaimTemplateName": KINDS[i % len(KINDS)]}]
        else:
            container["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        out.append(Manifest("bench", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-0", "namespace": "bench",
                         "annotations": {"scheduling.k8s.io/group-name": name}},
            "spec": spec}))
    return out


def dra_conf_text(conf: str) -> str:
    """``conf`` (binpack.conf's text) with the predicates plugin's gates set."""
    return conf.replace(
        "  - name: predicates\n",
        f'  - name: predicates\n    arguments:\n      predicate.DRAFeatureGates: "{GATES}"\n', 1)


def device_check(cluster: Any) -> dict[str, float | int]:
    """Every exclusive device held by at most one claim, and shared devices within their
    memory: what the DRA run wrote."""
    exclusive: set[tuple[str, str]] = set()
    shared: dict[tuple[str, str], int] = {}
    double = 0
    for claim in cluster.objects.get("ResourceClaim", {}).values():
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            continue
        for result in allocation["devices"]["results"]:
            device = (result["pool"], result["device"])
            if result.get("shareID"):
                shared[device] = shared.get(device, 0) + 1
            elif device in exclusive:
                double += 1
            else:
                exclusive.add(device)
    per_gpu = int(SHARED_MEMORY[:-2]) // int(SHARE[:-2])
    over = sum(1 for count in shared.values() if count > per_gpu)
    return {"claims_allocated": len(exclusive) + sum(shared.values()),
            "devices_double_allocated": double, "shared_over_capacity": over}
