"""An in-memory API server for the node agent's contract tests, and pod builders.

:class:`MemoryCluster` offers every call of :class:`~scheduler.devices.node.agent.AgentAccess`:
Node replaces check the ``resourceVersion`` (and can be made to conflict), pod annotation
patches merge, the Device object is kept with versions. The builders write the annotations
the scheduler writes, in the peers' formats.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from scheduler.cluster.sim import ConflictError
from scheduler.devices.names import VGpuNames
from tests.builders import make_node

Obj = dict[str, Any]


class MemoryCluster:
    def __init__(self, node: Obj | None = None) -> None:
        node = node or make_node("gpu-1")
        node["metadata"].setdefault("annotations", {})
        node["metadata"]["resourceVersion"] = "1"
        node["metadata"]["uid"] = "node-uid-1"
        self.nodes: dict[str, Obj] = {node["metadata"]["name"]: node}
        self.pods: list[Obj] = []
        self.devices: dict[str, Obj] = {}
        self.conflicts_to_inject = 0
        self.device_conflicts = 0
        self.lock = threading.RLock()
        self.calls: list[str] = []
        self._version = 1

    def _bump(self) -> str:
        self._version += 1
        return str(self._version)

    # -- Node ---------------------------------------------------------------------------
    def get_node(self, name: str) -> Obj:
        with self.lock:
            self.calls.append("get_node")
            return copy.deepcopy(self.nodes[name])

    def replace_node(self, node: Obj) -> Obj:
        with self.lock:
            self.calls.append("replace_node")
            name = node["metadata"]["name"]
            if self.conflicts_to_inject:
                self.conflicts_to_inject -= 1
                self.nodes[name]["metadata"]["resourceVersion"] = self._bump()
            if node["metadata"].get("resourceVersion") != \
                    self.nodes[name]["metadata"]["resourceVersion"]:
                raise ConflictError(f"node {name} changed")
            stored = copy.deepcopy(node)
            stored["metadata"]["resourceVersion"] = self._bump()
            self.nodes[name] = stored
            return copy.deepcopy(stored)

    def patch_node(self, name: str, patch: Obj) -> None:
        with self.lock:
            self.calls.append("patch_node")
            meta = self.nodes[name]["metadata"]
            for part, values in (patch.get("metadata") or {}).items():
                current = meta.setdefault(part, {})
                for key, value in values.items():
                    if value is None:
                        current.pop(key, None)
                    else:
                        current[key] = value
            meta["resourceVersion"] = self._bump()

    def patch_node_status(self, name: str, patch: Obj) -> None:
        with self.lock:
            self.calls.append("patch_node_status")
            status = self.nodes[name].setdefault("status", {})
            for part, values in (patch.get("status") or {}).items():
                status.setdefault(part, {}).update(values)

    def node_annotations(self, name: str = "gpu-1") -> dict[str, str]:
        with self.lock:
            return dict(self.nodes[name]["metadata"].get("annotations") or {})

    # -- pods ---------------------------------------------------------------------------
    def list_pods_on_node(self, node_name: str) -> list[Obj]:
        with self.lock:
            self.calls.append("list_pods")
            return [copy.deepcopy(p) for p in self.pods if p["spec"].get("nodeName") == node_name]

    def patch_pod_annotations(self, namespace: str, name: str,
                              annotations: dict[str, str | None]) -> None:
        with self.lock:
            self.calls.append("patch_pod")
            pod = next((p for p in self.pods if p["metadata"]["name"] == name
                        and p["metadata"]["namespace"] == namespace), None)
            if pod is None:
                raise LookupError(f"pods {name!r} not found")
            current = pod["metadata"].setdefault("annotations", {})
            for key, value in annotations.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value

    def pod_annotations(self, name: str) -> dict[str, str]:
        with self.lock:
            return next(dict(p["metadata"].get("annotations") or {}) for p in self.pods
                        if p["metadata"]["name"] == name)

    # -- Device -------------------------------------------------------------------------
    def get_device(self, name: str) -> Obj | None:
        with self.lock:
            found = self.devices.get(name)
            return copy.deepcopy(found) if found is not None else None

    def create_device(self, obj: Obj) -> Obj:
        with self.lock:
            name = obj["metadata"]["name"]
            if name in self.devices:
                raise ConflictError(f"devices {name} already exists")
            stored = copy.deepcopy(obj)
            stored["metadata"]["resourceVersion"] = self._bump()
            self.devices[name] = stored
            return copy.deepcopy(stored)

    def replace_device(self, obj: Obj) -> Obj:
        with self.lock:
            name = obj["metadata"]["name"]
            if self.device_conflicts:
                self.device_conflicts -= 1
                self.devices[name]["metadata"]["resourceVersion"] = self._bump()
            if obj["metadata"].get("resourceVersion") != \
                    self.devices[name]["metadata"]["resourceVersion"]:
                raise ConflictError(f"devices {name} changed")
            stored = copy.deepcopy(obj)
            stored["metadata"]["resourceVersion"] = self._bump()
            self.devices[name] = stored
            return copy.deepcopy(stored)


# -- builders --------------------------------------------------------------------------------
def pod(name: str, *, containers: list[tuple[str, dict[str, str]]], node: str = "gpu-1",
        annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        namespace: str = "ml", created: str = "2026-01-01T00:00:00Z",
        phase: str = "Pending", env: dict[str, list[Obj]] | None = None) -> Obj:
    """A bound pod; ``containers`` are ``(name, limits)``."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                     "creationTimestamp": created, "annotations": dict(annotations or {}),
                     "labels": dict(labels or {})},
        "spec": {"nodeName": node, "containers": [
            {"name": c, "image": "cuda", "resources": {"limits": dict(limits)},
             "env": list((env or {}).get(c, []))} for c, limits in containers]},
        "status": {"phase": phase},
    }


def vgpu_annotations(names: VGpuNames, devices: str, *, bind_time: int,
                     node: str = "gpu-1") -> dict[str, str]:
    return {names.assigned_node: node, names.assigned_time: str(bind_time),
            names.allocated: devices, names.to_allocate: devices,
            names.bind_phase: "allocating", names.bind_time: str(bind_time)}
