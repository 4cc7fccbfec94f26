"""Keyword builders for the Kubernetes objects tests feed the scheduler, and a run helper."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.cluster.manifests import Manifest
from scheduler.cluster.sim import SimCluster
from scheduler.cluster.simulation import SimulationResult, run_simulation
from scheduler.conf import SchedulerConf, load_conf, parse_conf

Obj = dict[str, Any]


class IgnoredWrites:
    """A cluster writer that takes every write and does nothing: for a cache tested alone."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def make_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": {},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }
    if taints:
        node["spec"]["taints"] = [dict(t) for t in taints]
    if unschedulable:
        node["spec"]["unschedulable"] = True
    return node


def make_pod(
    name: str,
    *,
    cpu: str | None = "1",
    memory: str | None = None,
    group: str | None = None,
    namespace: str = "default",
    node: str | None = None,
    phase: str | None = None,
    scheduler: str = "volcano",
    priority: int | None = None,
    priority_class: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    host_port: int | None = None,
    affinity: Mapping[str, Any] | None = None,
    limits: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    deleting: bool = False,
    queue: str | None = None,
) -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: Obj = {"name": "main", "image": "busybox", "resources": {"requests": requests}}
    if limits:
        container["resources"]["limits"] = dict(limits)
    if host_port is not None:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    meta: Obj = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
    if group is not None:
        meta["annotations"]["scheduling.k8s.io/group-name"] = group
    if queue is not None:
        meta["annotations"]["scheduling.volcano.sh/queue-name"] = queue
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: Obj = {"schedulerName": scheduler, "containers": [container]}
    for key, value in (
        ("nodeName", node),
        ("priority", priority),
        ("priorityClassName", priority_class),
        ("nodeSelector", node_selector),
        ("affinity", affinity),
    ):
        if value is not None:
            spec[key] = value
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase is not None or node is not None:
        pod["status"] = {"phase": phase or "Running"}
    return pod


def make_podgroup(
    name: str,
    *,
    min_member: int = 1,
    queue: str = "default",
    namespace: str = "default",
    min_resources: Mapping[str, str] | None = None,
    priority_class: str | None = None,
    min_task_member: Mapping[str, int] | None = None,
    phase: str | None = None,
    network_topology: Mapping[str, Any] | None = None,
    sub_group_policy: Sequence[Mapping[str, Any]] | None = None,
) -> Obj:
    spec: Obj = {"minMember": min_member, "queue": queue}
    if network_topology is not None:
        spec["networkTopology"] = dict(network_topology)
    if sub_group_policy is not None:
        spec["subGroupPolicy"] = [dict(p) for p in sub_group_policy]
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if min_task_member is not None:
        spec["minTaskMember"] = dict(min_task_member)
    group: Obj = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if phase is not None:
        group["status"] = {"phase": phase}
    return group


def make_hypernode(
    name: str,
    *,
    tier: int,
    nodes: Sequence[str] = (),
    hypernodes: Sequence[str] = (),
    regex: str | None = None,
    labels: Mapping[str, str] | None = None,
    tier_name: str | None = None,
) -> Obj:
    """A HyperNode whose members are ``nodes`` / ``hypernodes`` by exact name, plus a node
    member by ``regex`` or ``labels`` when given."""
    members: list[Obj] = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": h}}} for h in hypernodes]
    if regex is not None:
        members.append({"type": "Node", "selector": {"regexMatch": {"pattern": regex}}})
    if labels is not None:
        members.append({"type": "Node", "selector": {"labelMatch": {"matchLabels": dict(labels)}}})
    spec: Obj = {"tier": tier, "members": members}
    if tier_name is not None:
        spec["tierName"] = tier_name
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def make_queue(
    name: str,
    *,
    weight: int = 1,
    capability: Mapping[str, str] | None = None,
    state: str | None = None,
    priority: int | None = None,
) -> Obj:
    spec: Obj = {"weight": weight}
    if capability is not None:
        spec["capability"] = dict(capability)
    if priority is not None:
        spec["priority"] = priority
    queue: Obj = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }
    if state is not None:
        queue["status"] = {"state": state}
    return queue


def make_priority_class(name: str, value: int, *, global_default: bool = False) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
    }


def gang(
    name: str,
    size: int,
    *,
    min_member: int | None = None,
    cpu: str = "1",
    queue: str = "default",
    **pod_kwargs: Any,
) -> list[Obj]:
    """A PodGroup and ``size`` pods named ``<name>-task-<i>``."""
    objs = [make_podgroup(name, min_member=size if min_member is None else min_member, queue=queue)]
    objs += [make_pod(f"{name}-task-{i}", cpu=cpu, group=name, **pod_kwargs) for i in range(size)]
    return objs


PACKING_TIERS = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: overcommit}
  - {name: drf}
  - {name: predicates}
  - {name: proportion}
  - {name: nodeorder, arguments: {leastrequested.weight: 0, balancedresource.weight: 0}}
"""
"""The default tiers with the spreading node scores off; append plugins to the last tier."""

BINPACK_CONF = PACKING_TIERS + "  - {name: binpack, arguments: {binpack.weight: 10}}\n"


@dataclass
class Run:
    result: SimulationResult

    @property
    def cluster(self) -> SimCluster:
        return self.result.cluster

    def pod(self, name: str, namespace: str = "default") -> Obj:
        return self.cluster.objects["Pod"][f"{namespace}/{name}"]

    def binds(self) -> dict[str, str]:
        return {
            pod["metadata"]["name"]: pod["spec"]["nodeName"]
            for pod in self.cluster.objects.get("Pod", {}).values()
            if pod["spec"].get("nodeName")
        }

    def node_of(self, name: str) -> str | None:
        return self.pod(name)["spec"].get("nodeName")

    def condition(self, name: str) -> Obj | None:
        for condition in self.pod(name).get("status", {}).get("conditions", []):
            if condition["type"] == "PodScheduled":
                return condition
        return None

    def reason(self, name: str) -> str:
        condition = self.condition(name)
        return "" if condition is None else str(condition.get("message", ""))

    def podgroup(self, name: str, namespace: str = "default") -> Obj:
        return self.cluster.objects["PodGroup"][f"{namespace}/{name}"]

    def phase(self, name: str) -> str:
        return str(self.podgroup(name).get("status", {}).get("phase", ""))

    def events(self, reason: str | None = None) -> list[Obj]:
        return [e for e in self.cluster.events if reason is None or e["reason"] == reason]


def conf_of(text: str | None) -> SchedulerConf:
    return load_conf(None) if text is None else parse_conf(text)


def simulate(
    objects: Iterable[Obj], *, conf: str | None = None, seed: int = 0, max_cycles: int = 20
) -> Run:
    manifests = [Manifest(f"test#{i}", obj) for i, obj in enumerate(objects)]
    return Run(run_simulation(manifests, conf=conf_of(conf), seed=seed, max_cycles=max_cycles))
