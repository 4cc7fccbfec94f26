"""Device sharing as configuration: from a scheduler conf to cache options and bind hooks.

Volcano keeps which device families are on in package globals set by the ``deviceshare``
plugin's constructor; here it is explicit. :func:`device_support` reads the conf once
(``deviceshare.*`` arguments, and the older ``predicate.*`` spellings) and gives the cache
what it needs: the builder of ``NodeInfo.others`` (each node's ledgers, rebuilt from bound
pods' annotations), the per-device resource names the generic resource model must not sum,
and the extra node-table dimensions. With ``NodeLockEnable`` it adds the node lock around
each device pod's bind. The embedded cluster's node side (a simulated device plugin) is in
:mod:`scheduler.cluster.simdevices`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from scheduler.api.task import TaskInfo
from scheduler.cache.interface import ObjectRef, WriteError
from scheduler.conf import PluginOption, SchedulerConf
from scheduler.devices.base import (
    DeviceConfig,
    DeviceFamily,
    DeviceRequestError,
    DeviceWarning,
    Reporter,
    config_from_args,
    lock_owner,
)
from scheduler.devices.mig import CONFIG_KEY, VGpuSettings, parse_device_config
from scheduler.devices.node.nodelock import NodeAccess, NodeLocker, NodeLockError
from scheduler.devices.registry import NodeDevicesBuilder, enabled_families

if TYPE_CHECKING:
    from scheduler.cache.cache import SchedulerCache

__all__ = ["DeviceSupport", "NodeLockHooks", "device_config", "device_config_map_path",
           "device_support", "with_device_plugin", "with_dra"]

log = structlog.get_logger("lahar.devices")

DEVICE_PLUGIN = "deviceshare"
LEGACY_PLUGIN = "predicates"


def device_config(conf: SchedulerConf) -> DeviceConfig:
    """The device switches of ``conf`` (``deviceshare`` first, then legacy ``predicates``)."""
    options = [conf.plugin(DEVICE_PLUGIN), conf.plugin(LEGACY_PLUGIN)]
    return config_from_args(*(option.args for option in options if option is not None))


def with_device_plugin(conf: SchedulerConf) -> SchedulerConf:
    """``conf`` with a ``deviceshare`` entry beside ``predicates`` when only the legacy
    ``predicate.*`` switches turn devices on (Volcano ≤ v1.8 filtered devices in predicates)."""
    if conf.plugin(DEVICE_PLUGIN) is not None or not device_config(conf).any_enabled:
        return conf
    from plugins import PLUGINS

    tiers = []
    for tier in conf.tiers:
        entries = list(tier)
        for i, option in enumerate(entries):
            if option.name == LEGACY_PLUGIN:
                entries.insert(i + 1, PluginOption(name=DEVICE_PLUGIN, flags=option.flags,
                                                   args=PLUGINS[DEVICE_PLUGIN].Args()))
                break
        tiers.append(tuple(entries))
    return dataclasses.replace(conf, tiers=tuple(tiers))


def with_dra(conf: SchedulerConf, feature_gates: str | None = None) -> SchedulerConf:
    """``conf`` with ``feature_gates`` (``--feature-gates``) added after its
    ``predicate.DRAFeatureGates``: a gate named in both takes the flag's value, as a later
    ``--feature-gates`` entry does. Raises the conf's ``ArgumentError`` for a bad gate."""
    predicates = conf.plugin(LEGACY_PLUGIN)
    if not feature_gates or predicates is None:
        return conf
    gates = ",".join(g for g in (predicates.args.dra_feature_gates, feature_gates) if g)
    args = dataclasses.replace(predicates.args, dra_feature_gates=gates)
    tiers = tuple(tuple(dataclasses.replace(option, args=args) if option is predicates
                        else option for option in tier) for tier in conf.tiers)
    return dataclasses.replace(conf, tiers=tiers)


@dataclass(slots=True)
class NodeLockHooks:
    """Take the node lock a device pod needs right before its bind; give it back if the
    bind fails (after a successful bind the node side releases it)."""

    families: list[DeviceFamily]
    locker: NodeLocker
    config: DeviceConfig
    held: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)

    def locks_of(self, task: TaskInfo) -> list[str]:
        out: list[str] = []
        for family in self.families:
            if family.binding_keys[0] not in task.bind_annotations:
                continue
            try:
                request = family.parse_request(task)
            except DeviceRequestError:
                continue
            key = family.lock_name(request) if request is not None else None
            if key is not None and key not in out:
                out.append(key)
        return out

    def before_bind(self, task: TaskInfo) -> None:
        for key in self.locks_of(task):
            owner = lock_owner(self.config, key, task)
            try:
                self.locker.acquire(task.node_name, key, owner=owner)
            except NodeLockError as exc:
                self._give_back(task)
                raise WriteError(str(exc)) from None
            self.held[f"{task.uid}/{key}"] = (task.node_name, key, owner)

    def after_bind(self, task: TaskInfo, failure: Exception | None) -> None:
        if failure is not None:
            self._give_back(task)
        else:
            for name in [n for n in self.held if n.startswith(f"{task.uid}/")]:
                del self.held[name]

    def _give_back(self, task: TaskInfo) -> None:
        for name in [n for n in self.held if n.startswith(f"{task.uid}/")]:
            node, key, owner = self.held.pop(name)
            self.locker.release(node, key, owner=owner)


@dataclass(slots=True)
class DeviceSupport:
    """Everything the conf's device switches add to a cache and a cluster."""

    config: DeviceConfig
    families: list[DeviceFamily]
    reporter: Reporter

    @property
    def enabled(self) -> bool:
        return bool(self.families)

    def cache_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~scheduler.cache.cache.SchedulerCache`."""
        if not self.families:
            return {}
        builder = NodeDevicesBuilder(self.families)
        return {"node_devices": builder, "ignored_resources": builder.ignored_resources,
                "device_dims": builder.device_dims}

    def install(self, cache: SchedulerCache, *, access: NodeAccess | None = None,
                clock: Callable[[], float] | None = None,
                sleep: Callable[[float], None] = time.sleep) -> None:
        """Send device warnings as Events through ``cache``; with node locking on, lock
        nodes through ``access`` (the cluster writer's ``get_node``/``replace_node``)."""
        self.reporter.sink = lambda warning: cache.report_event(
            involved=ObjectRef(kind=warning.kind, name=warning.name,
                               namespace=warning.namespace, uid=warning.uid),
            type="Warning", reason=warning.reason, message=warning.message)
        if not self.families or not self.config.node_lock or access is None:
            return
        locker = NodeLocker(access=access, clock=clock or cache.clock, sleep=sleep)
        hooks = NodeLockHooks(self.families, locker, self.config)
        cache.pre_bind_hooks.append(hooks.before_bind)
        cache.post_bind_hooks.append(hooks.after_bind)


def device_support(conf: SchedulerConf, *, reporter: Reporter | None = None,
                   config_maps: Iterable[Mapping[str, Any]] = ()) -> DeviceSupport:
    """The device families of ``conf``. ``config_maps`` may hold Volcano's device ConfigMap
    (the one ``deviceshare.KnownGeometriesCMName``/``Namespace`` name); it is read once, as
    Volcano reads it when its plugin starts."""
    config = device_config(conf)
    reporter = reporter or Reporter()
    config_maps = list(config_maps)
    if config.vgpu:
        config = dataclasses.replace(config, vgpu_settings=_vgpu_settings(config, config_maps,
                                                                           reporter))
    namespace, name = config.geometries_config_map
    for obj in config_maps:
        meta = obj.get("metadata") or {}
        where = (str(meta.get("namespace") or "default"), str(meta.get("name")))
        if not config.vgpu or where != (namespace, name):
            reporter.warn(DeviceWarning(
                kind="ConfigMap", name=where[1], namespace=where[0], reason="IgnoredConfigMap",
                message=f"ConfigMap {where[0]}/{where[1]} is not read: the only ConfigMap "
                        f"the scheduler reads is the vGPU device config {namespace}/{name}, "
                        f"with deviceshare.VGPUEnable"))
    families = enabled_families(config, reporter) if config.any_enabled else []
    return DeviceSupport(config=config, families=families, reporter=reporter)


def _vgpu_settings(config: DeviceConfig, config_maps: Iterable[Mapping[str, Any]],
                   reporter: Reporter) -> VGpuSettings:
    namespace, name = config.geometries_config_map
    for obj in config_maps:
        meta = obj.get("metadata") or {}
        if meta.get("name") != name or (meta.get("namespace") or "default") != namespace:
            continue
        text = (obj.get("data") or {}).get(CONFIG_KEY)
        where = f"ConfigMap {namespace}/{name}"
        try:
            if not isinstance(text, str):
                raise ValueError(f"it has no data key {CONFIG_KEY}")
            settings = parse_device_config(text, source=f"{namespace}/{name}")
        except ValueError as exc:
            # Volcano logs the same failure and goes on with its built-in defaults.
            reporter.warn(DeviceWarning(
                kind="ConfigMap", name=name, namespace=namespace, reason="InvalidDeviceConfig",
                message=f"{where}: {exc}; the built-in vGPU defaults (no MIG geometries) "
                        f"are used"))
            return VGpuSettings()
        log.info("device config read", configmap=f"{namespace}/{name}",
                 mig_models=sum(len(k.models) for k in settings.known),
                 memory_factor=settings.memory_factor)
        return settings
    return VGpuSettings()


def device_config_map_path(conf: SchedulerConf) -> str | None:
    """The API path of the device ConfigMap ``lahar run`` reads at start (vGPU on only)."""
    config = device_config(conf)
    if not config.vgpu:
        return None
    namespace, name = config.geometries_config_map
    return f"/api/v1/namespaces/{namespace}/configmaps/{name}"
