"""The node agent's API server calls (:class:`~scheduler.devices.node.agent.AgentAccess`) over
:class:`~scheduler.cluster.kube.client.KubeClient`.

Least privilege shapes it: the agent only reads and patches its Node (no update), lists the
pods bound to it with a ``spec.nodeName`` field selector and patches their annotations, and
reads and writes its ``Device`` object. The node lock's optimistic "replace" is therefore a
JSON merge patch that carries the ``resourceVersion`` the caller read: the API server refuses
it with 409 when the Node changed in between, exactly as an update would, and the patch
names only the annotations and labels that differ, so nothing else of the Node is rewritten.
The diff is taken against the Node as :meth:`KubeNodeAccess.get_node` last returned it at that
``resourceVersion``, so a replace costs one round trip, not a read and a write.

The pods bound to the node are mirrored by a list-and-watch with the same field selector,
started by the first :meth:`KubeNodeAccess.list_pods_on_node`, so an ``Allocate`` reads them
from memory instead of listing them all; the pod each annotation patch returns goes into the
mirror at once, so the next call sees the agent's own writes. A watch can lag behind a pod
created a moment ago: :meth:`KubeNodeAccess.list_pods_on_node_uncached` lists it for a caller
that found nothing to serve in the mirror.
"""

from __future__ import annotations

import threading
from typing import Any

from scheduler.cluster.kube.client import MERGE_PATCH, ApiError, KubeClient, object_path
from scheduler.cluster.kube.reflector import Reflector, ResourceSpec

__all__ = ["DEVICES_PREFIX", "KubeNodeAccess"]

DEVICES_PREFIX = "/apis/scheduling.koordinator.sh/v1alpha1"
PAGE = 500


def _diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning map ``old`` into ``new`` (removed keys become ``None``)."""
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    patch.update({k: None for k in old if k not in new})
    return patch


def _maps(node: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The Node's resourceVersion and a copy of its metadata's annotations and labels."""
    meta = node.get("metadata") or {}
    return str(meta.get("resourceVersion") or ""), {
        part: dict(meta.get(part) or {}) for part in ("annotations", "labels")}


def _pod_key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _version(pod: dict[str, Any]) -> int:
    try:
        return int((pod.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:  # opaque versions: take every event as it comes
        return 0


class _NodePods:
    """The pods bound to one node, mirrored by a watch with a ``spec.nodeName`` selector."""

    def __init__(self, client: KubeClient, node_name: str) -> None:
        self._pods: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.stop = threading.Event()
        self.reflector = Reflector(client=client, handler=self._on_event, resource=ResourceSpec(
            "Pod", "/api/v1", "pods", field_selector=f"spec.nodeName={node_name}"))
        self.reflector.start(self.stop)

    def _on_event(self, kind: str, pod: dict[str, Any]) -> None:
        key = _pod_key(pod)
        with self._lock:
            if kind == "DELETED":
                self._pods.pop(key, None)
                return
            known = self._pods.get(key)
            # A patch's answer may be newer than an event still on its way.
            if known is None or _version(pod) >= _version(known) or not _version(pod):
                self._pods[key] = pod

    def written(self, pod: dict[str, Any]) -> None:
        """The pod as a write returned it (ignored when the mirror no longer has it)."""
        with self._lock:
            known = self._pods.get(_pod_key(pod))
            if known is not None and _version(pod) >= _version(known):
                self._pods[_pod_key(pod)] = pod

    def pods(self) -> list[dict[str, Any]] | None:
        """The mirrored pods; None until the first list arrived."""
        if not self.reflector.has_synced:
            return None
        with self._lock:
            return list(self._pods.values())


class KubeNodeAccess:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._node_pods: dict[str, _NodePods] = {}
        self._read: dict[str, tuple[str, dict[str, Any]]] = {}
        """node name → (resourceVersion, annotations and labels) as last read or written"""
        self._read_lock = threading.Lock()

    # -- Node ---------------------------------------------------------------------------
    def get_node(self, name: str) -> dict[str, Any]:
        node = self.client.request_json("GET", object_path("/api/v1", "nodes", name=name))
        self._remember(name, node)
        return node

    def _remember(self, name: str, node: dict[str, Any]) -> None:
        with self._read_lock:
            self._read[name] = _maps(node)

    def replace_node(self, node: dict[str, Any]) -> dict[str, Any]:
        meta = node.get("metadata") or {}
        name = str(meta.get("name"))
        version = str(meta.get("resourceVersion") or "")
        with self._read_lock:
            seen = self._read.get(name)
        if version and seen is not None and seen[0] == version:
            current_meta: dict[str, Any] = {"resourceVersion": version, **seen[1]}
        else:
            current_meta = self.get_node(name).get("metadata") or {}
            if version and version != current_meta.get("resourceVersion"):
                raise ApiError(409, f"Conflict: node {name} has changed")
        patch: dict[str, Any] = {"resourceVersion": current_meta.get("resourceVersion")}
        for part in ("annotations", "labels"):
            changed = _diff(dict(current_meta.get(part) or {}), dict(meta.get(part) or {}))
            if changed:
                patch[part] = changed
        written = self.client.request_json("PATCH", object_path("/api/v1", "nodes", name=name),
                                           body={"metadata": patch}, content_type=MERGE_PATCH)
        self._remember(name, written)
        return written

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        self.client.request_json("PATCH", object_path("/api/v1", "nodes", name=name),
                                 body=patch, content_type=MERGE_PATCH)

    def patch_node_status(self, name: str, patch: dict[str, Any]) -> None:
        self.client.request_json("PATCH", object_path("/api/v1", "nodes", name=name,
                                                      subresource="status"),
                                 body=patch, content_type=MERGE_PATCH)

    # -- pods ---------------------------------------------------------------------------
    def list_pods_on_node(self, node_name: str) -> list[dict[str, Any]]:
        """The node's pods from the mirror (listed while it is not synced yet)."""
        with self._read_lock:
            mirror = self._node_pods.get(node_name)
            if mirror is None:
                mirror = self._node_pods[node_name] = _NodePods(self.client, node_name)
        pods = mirror.pods()
        return pods if pods is not None else self.list_pods_on_node_uncached(node_name)

    def list_pods_on_node_uncached(self, node_name: str) -> list[dict[str, Any]]:
        """The node's pods as the API server has them now."""
        pods: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self.client.request_json("GET", "/api/v1/pods", query={
                "fieldSelector": f"spec.nodeName={node_name}", "limit": PAGE,
                "continue": token})
            pods += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return pods

    def patch_pod_annotations(self, namespace: str, name: str,
                              annotations: dict[str, str | None]) -> None:
        written = self.client.request_json(
            "PATCH", object_path("/api/v1", "pods", name=name, namespace=namespace),
            body={"metadata": {"annotations": annotations}}, content_type=MERGE_PATCH)
        node_name = (written.get("spec") or {}).get("nodeName")
        mirror = self._node_pods.get(node_name) if isinstance(node_name, str) else None
        if mirror is not None:
            mirror.written(written)

    def close(self) -> None:
        """Stop the pod mirrors' watches."""
        for mirror in self._node_pods.values():
            mirror.stop.set()
            mirror.reflector.interrupt()

    # -- Device -------------------------------------------------------------------------
    def get_device(self, name: str) -> dict[str, Any] | None:
        try:
            return self.client.request_json("GET", object_path(DEVICES_PREFIX, "devices",
                                                               name=name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def create_device(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.client.request_json("POST", object_path(DEVICES_PREFIX, "devices"), body=obj)

    def replace_device(self, obj: dict[str, Any]) -> dict[str, Any]:
        name = str((obj.get("metadata") or {}).get("name"))
        return self.client.request_json("PUT", object_path(DEVICES_PREFIX, "devices", name=name),
                                        body=obj)
