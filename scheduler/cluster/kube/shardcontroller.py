"""``lahar shard-controller`` against the API server: mirror nodes and pods, write NodeShards.

As Volcano's sharding controller (pkg/controllers/sharding/sharding_controller.go):

* Nodes, Pods and NodeShards are mirrored by list+watch; each node's allocation rate is kept
  up to date from the pods on it (:mod:`scheduler.cluster.sharding.metrics`);
* a full assignment (:func:`~scheduler.cluster.sharding.assign.assign`) runs at start, every
  sync period (``--shard-sync-period``, ``shardSyncPeriod``) and, with node-event triggers on,
  200 ms after a node's rate moved by more than 0.5 or a node appeared;
* each scheduler's NodeShard, named after it, is created with ``spec.nodesDesired`` or has it
  patched when the assignment changed enough (``needs_update``); NodeShards of schedulers no
  longer configured are deleted (``cleanupStaleNodeShards``). The status is the schedulers'
  to write.

``--sharding-config`` is read again whenever the file changes (a mounted ConfigMap is updated
in place); a file that does not parse is reported and the last good configuration kept, as
Volcano keeps its last ConfigMap. ``--node-selector`` (Lahar's) leaves nodes without the
labels out of every shard.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from scheduler.cluster.kube.client import KubeClient, object_path
from scheduler.cluster.kube.reflector import (
    NODES,
    NODESHARDS,
    PODS,
    Handler,
    Reflector,
    ReflectorGroup,
)
from scheduler.cluster.sharding.assign import assign, needs_update
from scheduler.cluster.sharding.config import ShardingConfig, ShardingConfigError
from scheduler.cluster.sharding.metrics import (
    NodeMetrics,
    node_metrics,
    pod_load,
    significant_change,
)

__all__ = ["EVENT_DELAY", "ShardController"]

log = structlog.get_logger("lahar.sharding")

EVENT_DELAY = 0.2
"""Seconds from a significant change to the assignment it triggers (Volcano's AfterFunc)."""
_SHARDS = "/apis/shard.volcano.sh/v1alpha1"
_MERGE_PATCH = "application/merge-patch+json"


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


class ShardController:
    """The controller's state and its two duties: take events, keep NodeShards in step."""

    def __init__(self, client: KubeClient, *, config: ShardingConfig, sync_period: float,
                 node_event_trigger: bool = True, batch_size: int = 50,
                 node_selector: Mapping[str, str] | None = None,
                 reload: Any = None) -> None:
        self.client = client
        self.config = config
        self.sync_period = config.sync_period or sync_period
        self.node_event_trigger = (node_event_trigger if config.node_event_trigger is None
                                   else config.node_event_trigger)
        self.batch_size = batch_size
        self.node_selector = dict(node_selector or {})
        self.reload = reload
        """Called each loop turn; returns a new :class:`ShardingConfig` or None."""
        self.lock = threading.Lock()
        self.nodes: dict[str, Mapping[str, Any]] = {}
        self.loads: dict[str, dict[str, tuple[float, float]]] = {}
        """Node name → pod key → the pod's counted (CPU, memory) requests."""
        self.pod_nodes: dict[str, str] = {}
        self.metrics: dict[str, NodeMetrics] = {}
        self.shards: dict[str, Mapping[str, Any]] = {}
        self.triggered = threading.Event()
        self.writes = 0
        self.failed_writes = 0
        """Writes that failed in the last sync."""

    # -- events ---------------------------------------------------------------------------
    def handle(self, kind: str, event_type: str, obj: Mapping[str, Any]) -> None:
        with self.lock:
            if kind == "Node":
                self._node(event_type == "DELETED", obj)
            elif kind == "Pod":
                self._pod(event_type == "DELETED", obj)
            elif kind == "NodeShard":
                if event_type == "DELETED":
                    self.shards.pop(_name(obj), None)
                else:
                    self.shards[_name(obj)] = obj

    def _selected(self, node: Mapping[str, Any]) -> bool:
        labels = (node.get("metadata") or {}).get("labels") or {}
        return all(labels.get(key) == value for key, value in self.node_selector.items())

    def _node(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = _name(obj)
        if deleted or not self._selected(obj):
            # Volcano drops the node's metrics; the next periodic sync drops it from shards.
            self.nodes.pop(name, None)
            self.metrics.pop(name, None)
            return
        self.nodes[name] = obj
        self._refresh(name)

    def _pod(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        before = self.pod_nodes.pop(key, None)
        if before is not None:
            self.loads.get(before, {}).pop(key, None)
        node = (obj.get("spec") or {}).get("nodeName") or ""
        load = None
        if not deleted and node:
            try:
                load = pod_load(obj)
            except (ValueError, ArithmeticError) as error:
                log.warning("pod requests not read; not counted", pod=key, error=str(error))
        if load is not None:
            self.pod_nodes[key] = node
            self.loads.setdefault(node, {})[key] = load
        for name in {before, node if load is not None else None} - {None}:
            self._refresh(str(name))

    def _refresh(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None:
            return
        try:
            metrics = node_metrics(node, self.loads.get(name, {}).values())
        except (ValueError, ArithmeticError) as error:
            log.warning("node capacity not read; node left out", node=name, error=str(error))
            self.metrics.pop(name, None)
            return
        if significant_change(self.metrics.get(name), metrics) and self.node_event_trigger:
            self.triggered.set()
        self.metrics[name] = metrics

    # -- assignments ----------------------------------------------------------------------
    def plan(self) -> dict[str, list[str]]:
        with self.lock:
            labels = {name: dict((node.get("metadata") or {}).get("labels") or {})
                      for name, node in self.nodes.items()}
            return assign(list(self.nodes), self.config.schedulers, metrics=dict(self.metrics),
                          labels=labels, batch_size=self.batch_size)

    def sync(self) -> dict[str, list[str]]:
        """One full assignment written out; returns it. Failed writes are logged and tried
        again at the next sync."""
        wanted = self.plan()
        self.failed_writes = 0
        with self.lock:
            current = {name: ((obj.get("spec") or {}).get("nodesDesired") or [])
                       for name, obj in self.shards.items()}
        for name, nodes in wanted.items():
            try:
                if name not in current:
                    self._write("POST", object_path(_SHARDS, "nodeshards"), {
                        "apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
                        "metadata": {"name": name}, "spec": {"nodesDesired": nodes}})
                elif needs_update(current[name], nodes):
                    self._write("PATCH", object_path(_SHARDS, "nodeshards", name=name),
                                {"spec": {"nodesDesired": nodes}}, _MERGE_PATCH)
            except Exception as error:
                self.failed_writes += 1
                log.error("cannot write NodeShard", shard=name, error=str(error))
        for name in sorted(set(current) - set(wanted)):
            try:
                self._write("DELETE", object_path(_SHARDS, "nodeshards", name=name), None)
            except Exception as error:
                self.failed_writes += 1
                log.error("cannot delete a NodeShard of no configured scheduler", shard=name,
                          error=str(error))
        log.info("shards assigned", **{name: len(nodes) for name, nodes in wanted.items()})
        return wanted

    def _write(self, method: str, path: str, body: Any, content_type: str | None = None) -> None:
        answer = self.client.request_json(method, path, body=body, content_type=content_type)
        self.writes += 1
        if method != "DELETE" and answer.get("kind") == "NodeShard":
            self.handle("NodeShard", "MODIFIED", answer)  # before its watch event comes back
        elif method == "DELETE":
            self.handle("NodeShard", "DELETED", {"metadata": {"name": path.rsplit("/", 1)[-1]}})

    # -- the loop -------------------------------------------------------------------------
    def reflectors(self) -> ReflectorGroup:
        def feed(kind: str) -> Handler:
            return lambda event, obj: self.handle(kind, event, obj)

        return ReflectorGroup([Reflector(client=self.client, resource=spec,
                                         handler=feed(spec.kind))
                               for spec in (NODES, PODS, NODESHARDS)])

    def run(self, stop: threading.Event, *, once: bool = False,
            sync_timeout: float | None = 60.0) -> None:
        group = self.reflectors()
        mirror = threading.Event()  # the reflectors' own stop: set when this returns
        group.start(mirror)
        try:
            if not group.wait_for_sync(stop, timeout=sync_timeout) and not stop.is_set():
                log.warning("caches not synced in time; assigning anyway")
            self.triggered.clear()
            self.sync()
            next_sync = time.monotonic() + self.sync_period
            while not once and not stop.is_set():
                fresh = self.reload() if self.reload is not None else None
                if fresh is not None:
                    self._use(fresh)
                    next_sync = 0.0
                wait = max(0.0, min(next_sync - time.monotonic(), 1.0))
                if self.triggered.wait(wait):
                    if stop.wait(EVENT_DELAY):
                        break
                    self.triggered.clear()
                    self.sync()
                elif time.monotonic() >= next_sync:
                    self.sync()
                    next_sync = time.monotonic() + self.sync_period
        finally:
            mirror.set()
            group.interrupt()
            group.join(timeout=5.0)

    def _use(self, config: ShardingConfig) -> None:
        log.info("sharding configuration loaded", sources=list(config.sources),
                 schedulers=[s.name for s in config.schedulers])
        self.config = config
        if config.sync_period:
            self.sync_period = config.sync_period
        if config.node_event_trigger is not None:
            self.node_event_trigger = config.node_event_trigger


def load_config_file(path: str) -> ShardingConfig:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    from scheduler.cluster.sharding.config import parse_sharding_yaml

    return parse_sharding_yaml(text, source=path)


class FileReload:
    """``--sharding-config`` read again when its file changes; errors keep the last config."""

    def __init__(self, path: str, signature: tuple[Any, ...]) -> None:
        self.path = path
        self.signature = signature

    def __call__(self) -> ShardingConfig | None:
        current = file_signature(self.path)
        if current == self.signature:
            return None
        self.signature = current
        try:
            return load_config_file(self.path)
        except (OSError, ShardingConfigError) as error:
            log.error("sharding configuration not reloaded; the last one stays",
                      path=self.path, error=str(error))
            return None


def file_signature(path: str) -> tuple[Any, ...]:
    import os

    try:
        stat = os.stat(path)
    except OSError:
        return (None,)
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def summary(assignment: Mapping[str, Sequence[str]]) -> str:
    return ", ".join(f"{name}: {len(nodes)} node(s)" for name, nodes in assignment.items())
