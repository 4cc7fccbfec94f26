"""The embedded cluster: an in-memory API server, controller and kubelet for ``lahar simulate``.

It stores ordinary Kubernetes objects, plays the parts of the control plane the scheduler relies
on (admission resolving pod priority, Volcano's podgroup controller giving plain pods a
one-member PodGroup named after and owned by the pod's controller, or the pod itself; the
default queue) and the node side (a bound pod starts Running; node-side
hooks such as a simulated device plugin run after each bind). It implements the scheduler's
:class:`~scheduler.cache.interface.ClusterWriter` and feeds every change back into the cache, so
the same scheduling code runs here as against a real API server.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.errors import ObjectError
from scheduler.api.hypernode import hypernode_from_object, status_node_count
from scheduler.api.task import GROUP_NAME_ANNOTATION
from scheduler.cache.dra import DRA_KINDS
from scheduler.cache.interface import BindError, ObjectRef, WriteError
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simdra import (
    create_template_claims,
    release_pod_claims,
    report_binding_conditions,
)
from scheduler.framework.close import rfc3339

__all__ = ["ConflictError", "SimClock", "SimCluster"]

Obj = dict[str, Any]
NodeSideHook = Callable[["SimCluster", str], None]
EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: simulated time starts here


class ConflictError(WriteError):
    """An update carried a stale ``resourceVersion``."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=409)


@dataclass(slots=True)
class SimClock:
    now: float = EPOCH

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _copy(value: Any) -> Any:
    """A deep copy of parsed YAML/JSON (maps, lists, scalars), several times faster than
    :func:`copy.deepcopy`, which matters for tens of thousands of manifests."""
    if type(value) is dict:
        return {key: _copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_copy(item) for item in value]
    if isinstance(value, dict | list | tuple | set):
        return copy.deepcopy(value)
    return value


def _controller_of(meta: Mapping[str, Any]) -> Obj:
    """The pod's controller reference (its PodGroup is shared by the controller's pods, as
    Volcano's podgroup controller names it), else a reference to the pod itself."""
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid"):
            return {k: ref[k] for k in ("apiVersion", "kind", "name", "uid") if k in ref}
    return {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000,
                            "system-node-critical": 2000001000}
"""The classes every API server has (with these values) whether or not a manifest gives them."""


@dataclass(slots=True)
class SimCluster:
    clock: SimClock = field(default_factory=SimClock)
    scheduler_names: tuple[str, ...] = ("volcano",)
    default_queue: str = "default"
    objects: dict[str, dict[str, Obj]] = field(default_factory=dict)
    events: list[Obj] = field(default_factory=list)
    changes: int = 0
    """Writes that altered an object, since the last :meth:`take_changes`."""
    node_side_hooks: list[NodeSideHook] = field(default_factory=list)
    listener: Callable[[str, str, Mapping[str, Any]], None] | None = None
    drivers_ready: bool = True
    """The simulated DRA drivers report every binding condition of an allocated device True as
    soon as the allocation is written, as a healthy driver does; False leaves them unset."""
    _version: int = 0
    _event_index: dict[tuple[str, str, str, str], Obj] = field(default_factory=dict)
    _now: tuple[float, str] = (float("nan"), "")
    """The last clock reading and its text: a cycle writes thousands of objects at one time."""

    # -- loading --------------------------------------------------------------------------
    def load(self, manifests: Iterable[Manifest], *, take: bool = False) -> None:
        """Store copies of the objects of ``manifests``; a later object of the same key
        replaces an earlier one.

        Copies because YAML anchors and merge keys (``<<: *pod``) make several manifests share
        one ``spec`` map, and a bind writing ``spec.nodeName`` into it would bind them all, and
        because the caller may load the same manifests again. With ``take`` the caller gives
        the objects up: the :attr:`~Manifest.private` ones are stored as they are."""
        for i, manifest in enumerate(manifests):
            obj = manifest.obj if take and manifest.private else _copy(manifest.obj)
            meta = obj.setdefault("metadata", {})
            if obj["kind"] in ("Pod", "PodGroup", "ResourceClaim", "ResourceClaimTemplate"):
                meta.setdefault("namespace", "default")
            meta.setdefault(
                "uid", str(uuid.uuid5(uuid.NAMESPACE_URL, f"lahar:{obj['kind']}/{_key(obj)}"))
            )
            meta.setdefault("creationTimestamp", rfc3339(self.clock.now - 3600 + i))
            self._store(obj)
        if self.default_queue not in self.objects.get("Queue", {}):
            self._store(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {
                        "name": self.default_queue,
                        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, "lahar:queue/default")),
                        "creationTimestamp": rfc3339(self.clock.now - 7200),
                    },
                    "spec": {"weight": 1, "reclaimable": True},
                    "status": {"state": "Open"},
                }
            )
        self._admit_pods()

    def _store(self, obj: Obj) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self.objects.setdefault(obj["kind"], {})[_key(obj)] = obj

    def _admit_pods(self) -> None:
        """Admission's priority resolution and the podgroup and resourceclaim controllers'
        work, once at load."""
        create_template_claims(list(self.objects.get("Pod", {}).values()),
                               self.objects.get("ResourceClaimTemplate", {}), store=self._store)
        classes = self.objects.get("PriorityClass", {})
        global_default = next((pc for pc in classes.values() if pc.get("globalDefault")), None)
        for pod in list(self.objects.get("Pod", {}).values()):
            spec = pod.setdefault("spec", {})
            class_name = spec.get("priorityClassName")
            if "priority" not in spec:
                chosen = classes.get(class_name) if class_name else global_default
                if chosen is not None:
                    spec["priority"] = chosen.get("value", 0)
                elif class_name in BUILTIN_PRIORITY_CLASSES:
                    spec["priority"] = BUILTIN_PRIORITY_CLASSES[class_name]
            meta = pod["metadata"]
            annotations = meta.get("annotations") or {}  # ``annotations: null`` is valid
            meta["annotations"] = annotations
            if spec.get("schedulerName") not in self.scheduler_names or spec.get("nodeName"):
                continue
            if GROUP_NAME_ANNOTATION in annotations:
                continue
            owner = _controller_of(meta)
            group = f"podgroup-{owner['uid']}"
            annotations[GROUP_NAME_ANNOTATION] = group
            if f"{meta['namespace']}/{group}" in self.objects.get("PodGroup", {}):
                continue  # another pod of the same controller made it
            podgroup: Obj = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {
                    "name": group,
                    "namespace": meta["namespace"],
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"lahar:pg/{group}")),
                    "creationTimestamp": meta["creationTimestamp"],
                    "ownerReferences": [owner],
                },
                "spec": {
                    "minMember": 1,
                    "queue": annotations.get(
                        "scheduling.volcano.sh/queue-name", self.default_queue
                    ),
                },
                "status": {"phase": "Pending"},
            }
            if class_name:
                podgroup["spec"]["priorityClassName"] = class_name
            self._store(podgroup)

    def replay_into(self, apply: Callable[[str, str, Mapping[str, Any]], None]) -> None:
        """Deliver every stored object as ADDED (the initial list of an informer)."""
        for kind in ("Namespace", "PriorityClass", "Queue", "Node", "PodGroup", "Pod"):
            for obj in self.objects.get(kind, {}).values():
                apply("ADDED", kind, obj)
        for obj in self.objects.get("Device", {}).values():  # the cache rebuilds its node
            apply("ADDED", "Device", obj)
        for obj in self.objects.get("HyperNode", {}).values():
            apply("ADDED", "HyperNode", obj)
        for obj in self.objects.get("NodeShard", {}).values():
            apply("ADDED", "NodeShard", obj)
        for kind in DRA_KINDS:
            for obj in self.objects.get(kind, {}).values():
                apply("ADDED", kind, obj)

    def take_changes(self) -> int:
        changes, self.changes = self.changes, 0
        return changes

    # -- helpers --------------------------------------------------------------------------
    def _now_text(self) -> str:
        now = self.clock()
        if now != self._now[0]:
            self._now = (now, rfc3339(now))
        return self._now[1]

    def get(self, kind: str, key: str) -> Obj:
        obj = self.objects.get(kind, {}).get(key)
        if obj is None:
            raise WriteError(f"{kind.lower()}s {key!r} not found", status=404)
        return obj

    def _modified(self, obj: Obj) -> None:
        self._store(obj)
        self.changes += 1
        if self.listener is not None:
            self.listener("MODIFIED", obj["kind"], obj)

    # -- ClusterWriter --------------------------------------------------------------------
    def bind(
        self, *, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> None:
        pod = self.get("Pod", f"{namespace}/{name}")
        if pod["metadata"].get("uid") != uid:
            raise BindError(f"pod {namespace}/{name} has a different UID", status=409)
        if pod.get("spec", {}).get("nodeName"):
            raise BindError(
                f"pod {namespace}/{name} is already assigned to node {pod['spec']['nodeName']!r}",
                status=409,
            )
        if node not in self.objects.get("Node", {}):
            raise BindError(f"node {node!r} not found", status=404)
        pod["spec"]["nodeName"] = node
        if annotations:
            pod["metadata"].setdefault("annotations", {}).update(annotations)
        now = self._now_text()
        status = pod.setdefault("status", {})
        status["phase"] = "Running"
        status["conditions"] = [
            c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
        ]
        status["conditions"].append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}
        )
        status["startTime"] = now
        self.record_event(
            involved=ObjectRef(kind="Pod", name=name, namespace=namespace, uid=uid),
            type="Normal",
            reason="Scheduled",
            message=f"Successfully assigned {namespace}/{name} to {node}",
        )
        self._modified(pod)
        for hook in self.node_side_hooks:
            hook(self, node)

    def evict(
        self,
        *,
        namespace: str,
        name: str,
        uid: str,
        reason: str,
        message: str,
        preemptor: ObjectRef | None = None,
    ) -> None:
        """Delete the pod as an eviction on a real cluster ends, leaving its ``Evict`` event.

        The simulated kubelet stops a pod at once, so the pod is gone when the session that
        evicted it has been written; the event names the preemptor as ``related`` when known.
        """
        pod = self.get("Pod", f"{namespace}/{name}")
        if uid and pod["metadata"].get("uid") != uid:
            raise WriteError(
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{pod['metadata'].get('uid')}",
                status=409,
            )
        self.record_event(
            involved=ObjectRef(kind="Pod", name=name, namespace=namespace, uid=uid),
            type="Warning",
            reason="Evict",
            message=message,
            related=preemptor,
        )
        del self.objects["Pod"][f"{namespace}/{name}"]
        self.changes += 1
        if self.listener is not None:
            self.listener("DELETED", "Pod", pod)
        release_pod_claims(self.objects.get("ResourceClaim", {}), pod,
                           delete=self._deleted, modify=self._modified)

    def _deleted(self, obj: Obj) -> None:
        del self.objects[obj["kind"]][_key(obj)]
        self.changes += 1
        if self.listener is not None:
            self.listener("DELETED", obj["kind"], obj)

    def update_pod_condition(
        self,
        *,
        namespace: str,
        name: str,
        condition: Mapping[str, Any],
        nominated_node: str | None = None,
    ) -> None:
        pod = self.get("Pod", f"{namespace}/{name}")
        status = pod.setdefault("status", {})
        conditions = [
            c for c in status.get("conditions") or [] if c.get("type") != condition["type"]
        ]
        conditions.append(dict(condition))
        status["conditions"] = conditions
        if nominated_node is not None:
            status["nominatedNodeName"] = nominated_node
        self._modified(pod)

    def update_podgroup_status(
        self, *, namespace: str, name: str, status: Mapping[str, Any]
    ) -> None:
        podgroup = self.get("PodGroup", f"{namespace}/{name}")
        podgroup["status"] = copy.deepcopy(dict(status))
        self._modified(podgroup)

    def update_queue_status(self, *, name: str, status: Mapping[str, Any]) -> None:
        queue = self.get("Queue", name)
        queue.setdefault("status", {}).update(copy.deepcopy(dict(status)))
        self._modified(queue)

    def update_node_shard_status(self, *, name: str, status: Mapping[str, Any]) -> None:
        """Merge the scheduler's fields into a NodeShard's ``status``."""
        shard = self.get("NodeShard", name)
        shard.setdefault("status", {}).update(copy.deepcopy(dict(status)))
        self._modified(shard)

    def record_event(
        self,
        *,
        involved: ObjectRef,
        type: str,
        reason: str,
        message: str,
        related: ObjectRef | None = None,
    ) -> None:
        key = (involved.kind, f"{involved.namespace}/{involved.name}", reason, message)
        now = self._now_text()
        existing = self._event_index.get(key)
        if existing is not None:
            existing["count"] += 1
            existing["lastTimestamp"] = now
            return
        event: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved.name}.{len(self.events) + 1:x}",
                "namespace": involved.namespace or "default",
            },
            "involvedObject": {
                "apiVersion": involved.api_version,
                "kind": involved.kind,
                "name": involved.name,
                "namespace": involved.namespace,
                "uid": involved.uid,
            },
            "type": type,
            "reason": reason,
            "message": message,
            "source": {"component": self.scheduler_names[0]},
            "reportingComponent": self.scheduler_names[0],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        if related is not None:
            event["related"] = {
                "apiVersion": related.api_version,
                "kind": related.kind,
                "name": related.name,
                "namespace": related.namespace,
                "uid": related.uid,
            }
        self._event_index[key] = event
        self.events.append(event)
        self.changes += 1

    # -- ResourceClaims (ClaimWriter) -------------------------------------------------------
    def get_resource_claim(self, *, namespace: str, name: str) -> Obj | None:
        obj = self.objects.get("ResourceClaim", {}).get(f"{namespace}/{name}")
        return None if obj is None else copy.deepcopy(obj)

    def update_resource_claim_status(self, claim: Mapping[str, Any]) -> Obj:
        """Replace a claim's ``status`` if its ``resourceVersion`` is current."""
        meta = claim["metadata"]
        key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
        current = self.get("ResourceClaim", key)
        if meta.get("resourceVersion") != current["metadata"].get("resourceVersion"):
            raise ConflictError(
                f"Operation cannot be fulfilled on resourceclaims.resource.k8s.io "
                f"{meta['name']!r}: the object has been modified; please apply your changes "
                f"to the latest version and try again")
        current["status"] = copy.deepcopy(dict(claim.get("status") or {}))
        if self.drivers_ready:
            report_binding_conditions(current["status"])
        self._modified(current)
        return copy.deepcopy(current)

    # -- node access for device node locks -------------------------------------------------
    def get_node(self, name: str) -> Obj:
        return copy.deepcopy(self.get("Node", name))

    def replace_node(self, node: Mapping[str, Any]) -> Obj:
        """Replace a Node if its ``resourceVersion`` is current (optimistic concurrency)."""
        name = str(node["metadata"]["name"])
        current = self.get("Node", name)
        if node["metadata"].get("resourceVersion") != current["metadata"].get("resourceVersion"):
            raise ConflictError(
                f"Operation cannot be fulfilled on nodes {name!r}: the object has "
                f"been modified; please apply your changes to the latest version"
            )
        updated = copy.deepcopy(dict(node))
        self._modified(updated)
        return copy.deepcopy(updated)

    # -- pod access for the simulated device plugin -----------------------------------------
    def list_pods_on_node(self, node_name: str) -> list[Obj]:
        return [copy.deepcopy(pod) for pod in self.objects.get("Pod", {}).values()
                if (pod.get("spec") or {}).get("nodeName") == node_name]

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None:
        """Merge-patch a pod's annotations; a None value removes the key."""
        pod = self.get("Pod", f"{namespace}/{name}")
        current = pod["metadata"].setdefault("annotations", {})
        for key, value in annotations.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        self._modified(pod)

    def all_objects(self) -> list[Obj]:
        """Every object, kinds in a stable order, then the Events. HyperNodes carry the
        ``status.nodeCount`` Volcano's HyperNode controller would write."""
        out: list[Obj] = []
        for kind in ("Node", "Device", *DRA_KINDS, "Pod", "PodGroup", "Queue", "PriorityClass",
                     "NodeShard"):
            out.extend(self.objects.get(kind, {}).values())
            if kind == "Device":
                out.extend(self._hypernodes_with_status())
        return out + self.events

    def _hypernodes_with_status(self) -> list[Obj]:
        nodes = {
            name: dict((node.get("metadata") or {}).get("labels") or {})
            for name, node in self.objects.get("Node", {}).items()
        }
        out: list[Obj] = []
        for obj in self.objects.get("HyperNode", {}).values():
            try:
                count = status_node_count(hypernode_from_object(obj), nodes)
            except ObjectError:
                out.append(obj)  # refused by the cache already; shown as given
                continue
            copied = dict(obj)
            copied["status"] = {**(obj.get("status") or {}), "nodeCount": count}
            out.append(copied)
        return out
