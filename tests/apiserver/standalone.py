"""The double as a bare API server: every collection the scheduler and the e2e suite use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.apiserver.store import STANDALONE_COLLECTIONS, ApiServerDouble

__all__ = ["fake_node", "fake_pod", "populate", "start_standalone", "write_kubeconfig"]


def write_kubeconfig(url: str, path: str | Path, *, name: str = "lahar-double") -> Path:
    """A kubeconfig pointing at ``url`` without credentials (the double checks none)."""
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }
    target = Path(path)
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


def start_standalone(kubeconfig: str | Path, *, port: int = 0,
                     max_watch_seconds: float = 30.0) -> ApiServerDouble:
    """Start serving on 127.0.0.1 and write a kubeconfig for it; ``stop()`` when done."""
    double = ApiServerDouble(collections=STANDALONE_COLLECTIONS,
                             status_subresources=("queues", "pods", "nodes", "resourceclaims",
                                                 "nodeshards"),
                             max_watch_seconds=max_watch_seconds, port=port)
    double.start()
    write_kubeconfig(double.url, kubeconfig)
    double.create("v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": "default"}})
    return double


def fake_node(index: int) -> dict[str, Any]:
    """A Node as a kubelet would report it, less its image list."""
    name = f"node-{index:05d}"
    resources = {"cpu": "64", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"}
    conditions = [{"type": kind, "status": "False", "reason": f"KubeletHas{reason}",
                   "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}
                  for kind, reason in (("MemoryPressure", "SufficientMemory"),
                                       ("DiskPressure", "NoDiskPressure"),
                                       ("PIDPressure", "SufficientPID"))]
    conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                       "lastTransitionTime": "2026-01-01T00:00:00Z"})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": f"zone-{index % 3}",
            "node.kubernetes.io/instance-type": "m6i.16xlarge"}},
        "spec": {"podCIDR": f"10.{index // 256 % 256}.{index % 256}.0/24"},
        "status": {"capacity": dict(resources), "allocatable": dict(resources),
                   "conditions": conditions,
                   "addresses": [{"type": "InternalIP", "address": f"10.0.{index // 256}."
                                                                   f"{index % 256}"},
                                 {"type": "Hostname", "address": name}],
                   "nodeInfo": {"kubeletVersion": "v1.28.7", "osImage": "Debian GNU/Linux 12",
                                "containerRuntimeVersion": "containerd://1.7.13",
                                "kernelVersion": "6.1.0-18-amd64", "architecture": "amd64",
                                "operatingSystem": "linux"}},
    }


def fake_pod(index: int, *, nodes: int, scheduler: str, group_size: int) -> dict[str, Any]:
    """A running pod of a PodGroup (``group_size`` pods each), spread round-robin on nodes."""
    name = f"job-{index // group_size:06d}-{index % group_size}"
    node = f"node-{index % nodes:05d}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": f"team-{index // group_size % 20:02d}",
                     "labels": {"app": f"job-{index // group_size:06d}", "tier": "batch"},
                     "annotations": {"scheduling.k8s.io/group-name":
                                     f"job-{index // group_size:06d}"}},
        "spec": {"schedulerName": scheduler, "nodeName": node, "restartPolicy": "Never",
                 "terminationGracePeriodSeconds": 30, "priority": 0,
                 "containers": [{"name": "main", "image": "registry.example/train:1.0",
                                 "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                               "limits": {"cpu": "1", "memory": "1Gi"}}}],
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
                   "startTime": "2026-01-01T00:00:00Z", "qosClass": "Burstable",
                   "conditions": [{"type": kind, "status": "True",
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}
                                  for kind in ("Initialized", "Ready", "ContainersReady",
                                               "PodScheduled")]},
    }


def populate(double: ApiServerDouble, *, nodes: int, pods: int, scheduler: str = "volcano",
             group_size: int = 4) -> None:
    """Fill the double with ``nodes`` Nodes and ``pods`` running pods in PodGroups."""
    double.populate("v1/nodes", [fake_node(i) for i in range(nodes)])
    double.populate("v1/pods", [fake_pod(i, nodes=max(nodes, 1), scheduler=scheduler,
                                         group_size=group_size) for i in range(pods)])
    groups = {}
    for index in range(0, pods, group_size):
        name = f"job-{index // group_size:06d}"
        namespace = f"team-{index // group_size % 20:02d}"
        groups[(namespace, name)] = {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": group_size, "queue": "default"},
            "status": {"phase": "Running", "running": group_size}}
    double.populate("scheduling.volcano.sh/v1beta1/podgroups", list(groups.values()))
