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
"""

from __future__ import annotations

import threading
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.cluster.kube.client import MERGE_PATCH, KubeClient, object_path

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


class KubeNodeAccess:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
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
                raise ApiException(status=409, reason=f"Conflict: node {name} has changed")
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
        self.client.request_json(
            "PATCH", object_path("/api/v1", "pods", name=name, namespace=namespace),
            body={"metadata": {"annotations": annotations}}, content_type=MERGE_PATCH)

    # -- Device -------------------------------------------------------------------------
    def get_device(self, name: str) -> dict[str, Any] | None:
        try:
            return self.client.request_json("GET", object_path(DEVICES_PREFIX, "devices",
                                                               name=name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create_device(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.client.request_json("POST", object_path(DEVICES_PREFIX, "devices"), body=obj)

    def replace_device(self, obj: dict[str, Any]) -> dict[str, Any]:
        name = str((obj.get("metadata") or {}).get("name"))
        return self.client.request_json("PUT", object_path(DEVICES_PREFIX, "devices", name=name),
                                        body=obj)
