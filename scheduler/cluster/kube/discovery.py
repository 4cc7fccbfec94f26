"""HyperNode label discovery inside ``lahar run`` (``--hypernode-discovery-config``).

Volcano runs label discovery in its controller manager; Lahar can run the same inside the
scheduler so a cluster without Volcano's controllers still gets HyperNodes from node labels.
What to create is decided by :mod:`scheduler.cluster.discovery` (pure); this module only feeds
it and writes its plans:

* the scheduler's own Node and HyperNode watches hand every event to :meth:`observe`, which
  keeps names and labels only and marks the controller due when a topology label changes (or
  a HyperNode is deleted, as Volcano's discoverer re-runs then);
* a thread of its own reconciles at most once per ``debounce`` seconds, only while this
  replica leads and after the watches have synced, and sends creates, updates and deletes
  with bounded retries. The scheduling loop never waits for it.
* the config file (the ``volcano-controller.conf`` key of Volcano's ConfigMap, mounted) is
  re-read when it changes; one that does not load is logged and the previous one kept.
* as Volcano's HyperNode controller (``hypernode_handler.go`` ``syncHyperNodeStatus``), every
  HyperNode added or changed gets ``status.nodeCount`` (the names its members select,
  :func:`~scheduler.api.hypernode.status_node_count`) through the status subresource when it
  differs, whoever made the HyperNode.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from scheduler.api.errors import ObjectError
from scheduler.api.hypernode import hypernode_from_object, status_node_count
from scheduler.cluster.discovery import (
    DiscoveryConfig,
    DiscoveryConfigError,
    Plan,
    desired_hypernodes,
    is_owned,
    parse_discovery_config,
    plan_reconcile,
)
from scheduler.cluster.kube.client import KubeClient, object_path
from scheduler.cluster.kube.retry import RetryPolicy, status_of

__all__ = ["DiscoveryController"]

log = structlog.get_logger("lahar.discovery")

TOPOLOGY = "/apis/topology.volcano.sh/v1alpha1"


@dataclass(slots=True)
class DiscoveryController:
    """Keeps the label-discovered HyperNodes in step with node labels."""

    client: KubeClient
    config_path: str
    leading: Callable[[], bool] = lambda: True
    synced: Callable[[], bool] = lambda: True
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(attempts=3))
    debounce: float = 1.0
    poll: float = 1.0
    failure_backoff: float = 10.0
    """Seconds before a reconcile some of whose writes failed is tried again."""
    config: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    _nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    _hypernodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    _signature: tuple[Any, ...] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _due: threading.Event = field(default_factory=threading.Event)
    _status_due: set[str] = field(default_factory=set)
    """HyperNodes added or changed since their status.nodeCount was last checked."""
    _thread: threading.Thread | None = None
    reconciles: int = 0

    # -- events from the watches (called on the reflector threads; O(1), no I/O) ----------------

    def observe(self, kind: str, event_type: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            return
        deleted = event_type == "DELETED"
        with self._lock:
            if kind == "Node":
                before = self._nodes.get(name)
                if deleted:
                    self._nodes.pop(name, None)
                    after = None
                else:
                    after = {"metadata": {"name": name, "labels": dict(meta.get("labels") or {})}}
                    self._nodes[name] = after
                if self._topology_labels(before) != self._topology_labels(after):
                    self._due.set()
            elif kind == "HyperNode":
                if deleted:
                    gone = self._hypernodes.pop(name, None)
                    if gone is not None and is_owned(gone):
                        self._due.set()
                else:
                    self._hypernodes[name] = dict(obj)
                    self._status_due.add(name)

    def _topology_labels(self, node: Mapping[str, Any] | None) -> dict[str, str]:
        if node is None:
            return {}
        labels = node["metadata"]["labels"]
        keys = {key for _, keys in self.config.topology_types for key in keys}
        return {key: labels[key] for key in keys if key in labels}

    # -- the config --------------------------------------------------------------------------

    def load_config(self) -> bool:
        """Re-read the config file if it changed; True when a new config was taken."""
        signature = _file_signature(self.config_path)
        if signature == self._signature:
            return False
        self._signature = signature
        try:
            with open(self.config_path) as handle:
                text = handle.read()
            config = parse_discovery_config(text, source=self.config_path)
        except (OSError, DiscoveryConfigError) as error:
            log.error("hypernode discovery config does not load; keeping the previous one",
                      path=self.config_path, error=str(error))
            return False
        for warning in config.warnings:
            log.warning("hypernode discovery config", warning=warning)
        with self._lock:
            self.config = config
        log.info("hypernode discovery config loaded", path=self.config_path,
                 enabled=config.enabled, types=[name for name, _ in config.topology_types])
        self._due.set()
        return True

    # -- reconcile ---------------------------------------------------------------------------

    def plan(self) -> Plan:
        """What one reconcile would write now (nothing when discovery is off)."""
        with self._lock:
            config = self.config
            nodes = list(self._nodes.values())
            existing = {name: dict(obj) for name, obj in self._hypernodes.items()}
        if not config.enabled:
            return Plan()
        return plan_reconcile(desired_hypernodes(nodes, config, existing=existing), existing)

    def reconcile(self) -> Plan:
        """Plan and write once; failures are logged and make the controller due again."""
        plan = self.plan()
        for conflict in plan.conflicts:
            log.warning("hypernode discovery", conflict=conflict)
        failed = False
        for obj in plan.create:
            failed |= not self._write("POST", object_path(TOPOLOGY, "hypernodes"), obj)
        for obj in plan.update:
            name = obj["metadata"]["name"]
            failed |= not self._write("PUT", object_path(TOPOLOGY, "hypernodes", name=name), obj)
        for name in plan.delete:
            failed |= not self._write("DELETE", object_path(TOPOLOGY, "hypernodes", name=name),
                                      None, name=name)
        self.reconciles += 1
        if not plan.empty:
            log.info("hypernodes reconciled", created=len(plan.create),
                     updated=len(plan.update), deleted=len(plan.delete), failed=failed)
        failed |= not self.sync_statuses()
        if failed:
            self._due.set()
        return plan

    def sync_statuses(self) -> bool:
        """Write ``status.nodeCount`` of each HyperNode due where it differs (Volcano's
        ``syncHyperNodeStatus``); False when a write failed (that HyperNode stays due)."""
        with self._lock:
            due, self._status_due = self._status_due, set()
            nodes = {name: node["metadata"]["labels"] for name, node in self._nodes.items()}
            current = {name: self._hypernodes[name] for name in due if name in self._hypernodes}
        ok = True
        for name, obj in sorted(current.items()):
            try:
                count = status_node_count(hypernode_from_object(obj), nodes)
            except ObjectError:
                continue  # the scheduler's cache names what is wrong with it
            if (obj.get("status") or {}).get("nodeCount") == count:
                continue
            body = _plain_copy(obj)
            body["status"] = {**(obj.get("status") or {}), "nodeCount": count}
            path = object_path(TOPOLOGY, "hypernodes", name=name, subresource="status")
            if not self._write("PUT", path, body, name=name):
                ok = False
                with self._lock:
                    self._status_due.add(name)
        return ok

    def _write(self, method: str, path: str, obj: dict[str, Any] | None, *,
               name: str = "") -> bool:
        name = name or (obj or {}).get("metadata", {}).get("name", "")
        if not self.leading():
            return False
        try:
            answer = self.retry.call(self.client.request_json, method, path, body=obj)
        except Exception as error:
            status = status_of(error)
            if method == "DELETE" and status == 404:
                answer = {}
            else:
                log.warning("hypernode write failed", method=method, hypernode=name,
                            status=status, error=str(error))
                return False
        with self._lock:  # the watch will say the same; until then plan from what was written
            if method == "DELETE":
                self._hypernodes.pop(name, None)
            else:
                self._hypernodes[name] = answer if answer.get("metadata") else dict(obj or {})
                if not path.endswith("/status"):
                    self._status_due.add(name)
        return True

    # -- the thread ---------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> threading.Thread:
        self.load_config()
        self._thread = threading.Thread(target=self.run, args=(stop,), daemon=True,
                                        name="hypernode-discovery")
        self._thread.start()
        return self._thread

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._due.wait(self.poll)
            if stop.is_set():
                return
            self.load_config()
            if ((not self._due.is_set() and not self._status_due) or not self.synced()
                    or not self.leading()):
                continue
            if stop.wait(self.debounce):  # let a burst of label changes land first
                return
            discover = self._due.is_set()
            self._due.clear()
            try:
                if discover:
                    self.reconcile()
                elif not self.sync_statuses():  # only HyperNodes changed: their counts
                    self._due.set()
            except Exception:
                log.exception("hypernode discovery failed")
                self._due.set()
            if self._due.is_set() and stop.wait(self.failure_backoff):
                return

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)


def _plain_copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {key: (_plain_copy(value) if isinstance(value, Mapping) else
                  [_plain_copy(v) if isinstance(v, Mapping) else v for v in value]
                  if isinstance(value, list) else value)
            for key, value in obj.items()}


def _file_signature(path: str) -> tuple[Any, ...]:
    """Changes when the file or its directory does (ConfigMap mounts swap a symlink)."""
    def stat(target: str) -> tuple[int, int, int] | None:
        try:
            info = os.stat(target)
        except OSError:
            return None
        return info.st_ino, info.st_mtime_ns, info.st_size

    return (os.path.realpath(path), stat(path),
            stat(os.path.dirname(os.path.abspath(path))))
