"""Publishes the node's DRA pool to the API server and keeps it current.

Interface (what the kubelet-plugin side calls)::

    publisher = SlicePublisher(client, node_name="node-1", driver="gpu.lahar.dev",
                               mode="exclusive" | "shared", device_taints=False)
    publisher.sync(inventory, mig=layout)   # at start and on every inventory read
    publisher.mark_unhealthy(["gpu-1"])     # a health signal the inventory does not carry
    publisher.mark_healthy(["gpu-1"])
    publisher.delete_all()                  # on shutdown, only when asked to

``sync`` builds the slices (:func:`~.slices.build_slices`) and compares them with what the
server holds for this node and driver (listed by field selector ``spec.nodeName`` +
``spec.driver``). When nothing changed it writes nothing; otherwise it writes every slice of
the pool at the next generation (one above the highest the server has, so consumers drop
the old view as the API asks of drivers): an existing slice is replaced with its
``resourceVersion``, a missing one created, and then slices the pool no longer needs are
deleted. A 409 or a slice created meanwhile restarts the step from a fresh list (three tries).
The Node's UID is read once for the slices' owner reference; a Node the server does not have
leaves the slices unowned (logged). API errors propagate (the client's error, with the HTTP
``status``) for the caller to log and retry. The client is anything with the project's
``request_json`` (:class:`~scheduler.cluster.kube.client.KubeClient`); this module, as all of
``scheduler.devices``, does not import the cluster layer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol
from urllib.parse import quote

import structlog

from scheduler.devices.node.dra.devices import DRA_MODES, MigLayout
from scheduler.devices.node.dra.slices import DEFAULT_DRIVER, PoolSpec, build_slices
from scheduler.devices.node.inventory import Inventory

__all__ = ["RESOURCE_API", "SlicePublisher"]

log = structlog.get_logger("lahar.nodeagent.dra")

RESOURCE_API = "/apis/resource.k8s.io/v1"
_TRIES = 3


class SliceClient(Protocol):
    """The API calls of the publisher; errors carry the HTTP ``status``."""

    def request_json(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                     body: Any = None) -> dict[str, Any]: ...


def object_path(prefix: str, plural: str, *, name: str = "") -> str:
    """``prefix/plural[/name]``, the name escaped."""
    return "/".join([prefix.rstrip("/"), plural, *([quote(name, safe="")] if name else [])])


def _status(exc: Exception) -> int | None:
    """The HTTP status of an API error; None for anything else (re-raised as it is)."""
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def _without_generation(obj: dict[str, Any]) -> tuple[str, Any, Any]:
    spec = dict(obj.get("spec") or {})
    pool = dict(spec.get("pool") or {})
    pool.pop("generation", None)
    spec["pool"] = pool
    for key in ("devices", "sharedCounters"):
        if not spec.get(key):
            spec.pop(key, None)
    if spec.get("devices"):  # the server stamps a taint's timeAdded
        spec["devices"] = [{**d, "taints": [{k: v for k, v in t.items() if k != "timeAdded"}
                                            for t in d["taints"]]} if d.get("taints") else d
                           for d in spec["devices"]]
    meta = obj.get("metadata") or {}
    owners = [(o.get("kind"), o.get("name"), o.get("uid"))
              for o in meta.get("ownerReferences") or []]
    return str(meta.get("name")), spec, owners


class SlicePublisher:
    """The node's pool on the API server (see the module docstring for the calls)."""

    def __init__(self, client: SliceClient, *, node_name: str, driver: str = DEFAULT_DRIVER,
                 mode: str = "exclusive", device_taints: bool = False) -> None:
        if mode not in DRA_MODES:
            raise ValueError(f"DRA mode {mode!r}: must be one of {', '.join(DRA_MODES)}")
        if not node_name:
            raise ValueError("SlicePublisher: node_name is required")
        self.client = client
        self.node_name = node_name
        self.driver = driver
        self.mode = mode
        self.device_taints = device_taints
        self.generation = 0
        """The pool generation last written (or found current), 0 before the first sync."""
        self._node_uid: str | None = None
        self._unhealthy: set[str] = set()
        self._last: tuple[Inventory, MigLayout | None] | None = None
        self._lock = threading.Lock()
        self._unselectable = False

    # -- API -----------------------------------------------------------------------------
    def _path(self, name: str = "") -> str:
        return object_path(RESOURCE_API, "resourceslices", name=name)

    def list_own(self) -> list[dict[str, Any]]:
        """This node's slices of this driver as the server has them. A server that refuses
        the field selector (400: ``resource.k8s.io`` served by CRDs, which select on
        metadata only) is asked for every slice from then on, filtered here."""
        query = {} if self._unselectable else {
            "fieldSelector": f"spec.nodeName={self.node_name},spec.driver={self.driver}"}
        try:
            found = self.client.request_json("GET", self._path(), query=query)
        except Exception as exc:
            if _status(exc) != 400 or self._unselectable:
                raise
            self._unselectable = True
            return self.list_own()
        return [s for s in found.get("items") or []
                if (s.get("spec") or {}).get("nodeName") == self.node_name
                and (s.get("spec") or {}).get("driver") == self.driver]

    def _uid(self) -> str:
        if self._node_uid is None:
            try:
                node = self.client.request_json("GET", object_path("/api/v1", "nodes",
                                                                   name=self.node_name))
                self._node_uid = str((node.get("metadata") or {}).get("uid") or "")
            except Exception as exc:
                if _status(exc) != 404:
                    raise
                log.warning("dra_slices_unowned", node=self.node_name,
                            reason="the API server has no such Node")
                self._node_uid = ""
        return self._node_uid

    # -- the calls -----------------------------------------------------------------------
    def sync(self, inventory: Inventory, mig: MigLayout | None = None) -> bool:
        """Publish the pool for this inventory; True when anything was written."""
        with self._lock:
            self._last = (inventory, mig)
            return self._publish(inventory, mig)

    def mark_unhealthy(self, names: Iterable[str]) -> bool:
        """Treat these devices as unhealthy (tainted or removed) and republish."""
        return self._set_health(names, healthy=False)

    def mark_healthy(self, names: Iterable[str]) -> bool:
        """Undo :meth:`mark_unhealthy` for these devices and republish."""
        return self._set_health(names, healthy=True)

    def _set_health(self, names: Iterable[str], *, healthy: bool) -> bool:
        with self._lock:
            before = set(self._unhealthy)
            if healthy:
                self._unhealthy.difference_update(names)
            else:
                self._unhealthy.update(names)
            if self._unhealthy == before or self._last is None:
                return False
            return self._publish(*self._last)

    def delete_all(self) -> int:
        """Delete this node's slices of this driver; how many were deleted."""
        with self._lock:
            deleted = 0
            for obj in self.list_own():
                if self._delete(str(obj["metadata"]["name"])):
                    deleted += 1
            self.generation = 0
            return deleted

    # -- the work ------------------------------------------------------------------------
    def _delete(self, name: str) -> bool:
        try:
            self.client.request_json("DELETE", self._path(name))
        except Exception as exc:
            if _status(exc) == 404:
                return False
            raise
        return True

    def _publish(self, inventory: Inventory, mig: MigLayout | None) -> bool:
        spec = PoolSpec(node_name=self.node_name, driver=self.driver, mode=self.mode,
                        device_taints=self.device_taints, node_uid=self._uid())
        for attempt in range(_TRIES):
            current = self.list_own()
            top = max((int((s["spec"].get("pool") or {}).get("generation") or 0)
                       for s in current), default=0)
            desired = build_slices(spec, inventory, generation=top + 1, mig=mig,
                                   unhealthy=self._unhealthy)
            same_generation = {int((s["spec"].get("pool") or {}).get("generation") or 0)
                               for s in current} == {top}
            if same_generation and sorted(map(_without_generation, current)) == sorted(
                    map(_without_generation, desired)):
                self.generation = top
                return False
            try:
                self._write(current, desired)
            except Exception as exc:
                if _status(exc) != 409 or attempt == _TRIES - 1:
                    raise
                continue
            self.generation = top + 1
            log.info("dra_slices_published", node=self.node_name, driver=self.driver,
                     generation=self.generation, slices=len(desired),
                     unhealthy=sorted(self._unhealthy))
            return True
        return False  # pragma: no cover - the loop returns or raises

    def _write(self, current: list[dict[str, Any]], desired: list[dict[str, Any]]) -> None:
        have = {str(s["metadata"]["name"]): s for s in current}
        for obj in desired:
            name = obj["metadata"]["name"]
            old = have.pop(name, None)
            if old is None:
                self.client.request_json("POST", self._path(), body=obj)
            else:
                body = {**obj, "metadata": {**obj["metadata"], "resourceVersion":
                                            old["metadata"].get("resourceVersion")}}
                self.client.request_json("PUT", self._path(name), body=body)
        for name in have:
            self._delete(name)
