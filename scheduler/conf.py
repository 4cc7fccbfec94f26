"""The scheduler conf: Volcano's YAML format, parsed, validated and defaulted.

```yaml
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
- plugins:
  - name: binpack
    arguments: {binpack.weight: 10}
configurations:
- name: allocate
  arguments: {predicateErrorCacheEnable: true}
```

An unknown action or plugin, a non-boolean ``enable…`` flag or a wrongly typed plugin argument
is a :class:`ConfError` naming it. Unknown argument keys only warn. A plugin Volcano has but Lahar
does not implement (``network-topology-aware``, ``tdm``, ...) is skipped with a warning, so stock
Volcano confs load unchanged; ``capacity`` and ``proportion`` together are refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import yaml

from actions import ACTIONS
from plugins import PLUGINS
from scheduler.framework.arguments import ArgumentError, parse_args

__all__ = [
    "DEFAULT_CONF",
    "PLUGIN_FLAGS",
    "VOLCANO_PLUGINS",
    "ConfError",
    "PluginOption",
    "SchedulerConf",
    "load_conf",
    "parse_conf",
]

log = structlog.get_logger("lahar.conf")

DEFAULT_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

PLUGIN_FLAGS = (
    "enableJobOrder",
    "enableHierarchy",
    "enableJobReady",
    "enableJobPipelined",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enabledClusterOrder",
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enableJobEnqueued",
    "enabledVictim",
    "enableJobStarving",
    "enabledOverused",
    "enabledAllocatable",
    "enabledHyperNodeOrder",
    "enabledSubJobReady",
    "enabledSubJobPipelined",
    "enabledSubJobOrder",
    "enabledHyperNodeGradient",
)
_FLAG_DEFAULT_OFF = {"enableHierarchy", "enabledClusterOrder"}

VOLCANO_PLUGINS = frozenset({
    "binpack", "capacity", "cdp", "conformance", "deviceshare", "drf", "extender", "gang",
    "network-topology-aware", "nodegroup", "nodeorder", "numa-aware", "overcommit", "pdb",
    "predicates", "priority", "proportion", "rescheduling", "resource-strategy-fit",
    "resourcequota", "sla", "task-topology", "tdm", "usage",
})
"""Every plugin name Volcano's scheduler registers (``pkg/scheduler/plugins/factory.go``).
Those missing from :data:`plugins.PLUGINS` are skipped with a warning rather than refused."""


class ConfError(ValueError):
    """The conf cannot be used; the message names the source and the offending entry."""


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    flags: Mapping[str, bool] = field(default_factory=dict)
    args: Any = None
    """The plugin's typed ``Args`` built from ``arguments``."""


@dataclass(frozen=True, slots=True)
class SchedulerConf:
    actions: tuple[str, ...]
    tiers: tuple[tuple[PluginOption, ...], ...]
    configurations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    metrics: Mapping[str, str] = field(default_factory=dict)
    source: str = "<default>"
    warnings: tuple[str, ...] = ()

    def plugin(self, name: str) -> PluginOption | None:
        return next((p for tier in self.tiers for p in tier if p.name == name), None)


def _plugin(raw: Any, where: str, warnings: list[str]) -> PluginOption:
    if not isinstance(raw, Mapping):
        raise ConfError(f"{where}: a plugin entry must be a map with a name")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfError(f"{where}: plugin name is required")
    cls = PLUGINS.get(name)
    if cls is None:
        raise ConfError(f"{where}: unknown plugin {name!r} (known: {', '.join(sorted(PLUGINS))})")
    flags: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in PLUGIN_FLAGS:
            warnings.append(f"{where} ({name}): unknown key {key!r} ignored")
            continue
        if not isinstance(value, bool):
            raise ConfError(f"{where} ({name}): {key} must be true or false, got {value!r}")
        flags[key] = value
    for key in PLUGIN_FLAGS:
        flags.setdefault(key, key not in _FLAG_DEFAULT_OFF)
    arguments = raw.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        raise ConfError(f"{where} ({name}): arguments must be a map")
    try:
        args, arg_warnings = parse_args(cls.Args, arguments, owner=f"plugin {name}")
    except ArgumentError as exc:
        raise ConfError(f"{where}: {exc}") from None
    warnings.extend(arg_warnings)
    return PluginOption(name=name, arguments=dict(arguments), flags=flags, args=args)


def parse_conf(text: str, *, source: str = "<conf>") -> SchedulerConf:
    """Parse and validate conf text; raises :class:`ConfError`."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"{source}: not valid YAML: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfError(f"{source}: the conf must be a YAML map")
    warnings: list[str] = []
    actions_text = raw.get("actions", "enqueue, allocate, backfill")
    if not isinstance(actions_text, str):
        raise ConfError(f"{source}: actions must be a comma-separated string")
    actions = tuple(a.strip() for a in actions_text.split(",") if a.strip())
    for action in actions:
        if action not in ACTIONS:
            raise ConfError(
                f"{source}: unknown action {action!r} (known: {', '.join(sorted(ACTIONS))})"
            )
    raw_tiers = raw.get("tiers") or []
    if not isinstance(raw_tiers, Sequence) or isinstance(raw_tiers, str):
        raise ConfError(f"{source}: tiers must be a list")
    tiers = []
    for t, tier in enumerate(raw_tiers):
        plugins = (tier or {}).get("plugins") if isinstance(tier, Mapping) else None
        if not isinstance(plugins, Sequence) or isinstance(plugins, str):
            raise ConfError(f"{source}: tiers[{t}].plugins must be a list")
        tiers.append(
            tuple(
                _plugin(p, f"{source}: tiers[{t}].plugins[{i}]", warnings)
                for i, p in enumerate(plugins)
                if not _skip_unimplemented(p, f"{source}: tiers[{t}].plugins[{i}]", warnings)
            )
        )
    _check_combinations(tiers, source)
    configurations: dict[str, Mapping[str, Any]] = {}
    for i, entry in enumerate(raw.get("configurations") or []):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfError(f"{source}: configurations[{i}] needs a name")
        arguments = entry.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise ConfError(f"{source}: configurations[{i}].arguments must be a map")
        configurations[entry["name"]] = dict(arguments)
    metrics = raw.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        raise ConfError(f"{source}: metrics must be a map")
    for key in raw:
        if key not in ("actions", "tiers", "configurations", "metrics"):
            warnings.append(f"{source}: unknown top-level key {key!r} ignored")
    for warning in warnings:
        log.warning("conf", message=warning)
    return SchedulerConf(
        actions=actions,
        tiers=tuple(tiers),
        configurations=configurations,
        metrics={str(k): str(v) for k, v in metrics.items()},
        source=source,
        warnings=tuple(warnings),
    )


def _skip_unimplemented(raw: Any, where: str, warnings: list[str]) -> bool:
    """True (with a warning naming it) for a Volcano plugin that Lahar does not implement.

    Skipping lets a stock Volcano conf that names one (its CI conf names
    ``network-topology-aware``) load and schedule with everything else it configures; what the
    skipped plugin would have added is missing, and the warning says which plugin that is."""
    name = raw.get("name") if isinstance(raw, Mapping) else None
    if not isinstance(name, str) or name in PLUGINS or name not in VOLCANO_PLUGINS:
        return False
    warnings.append(f"{where}: Volcano plugin {name!r} is not implemented by Lahar; skipped")
    return True


def _check_combinations(tiers: list[tuple[PluginOption, ...]], source: str) -> None:
    names = {p.name for tier in tiers for p in tier}
    if {"capacity", "proportion"} <= names:
        # Both own the queues' deserved share, reclaim and admission; Volcano's capacity guide
        # says they cannot be used together, though its conf loader lets the pair through.
        raise ConfError(
            f"{source}: plugins capacity and proportion cannot be used together "
            f"(both divide the cluster between queues); keep one of them"
        )
    for t, tier in enumerate(tiers):
        names = {p.name for p in tier}
        hierarchical_drf = any(p.name == "drf" and p.flags.get("enableHierarchy") for p in tier)
        if hierarchical_drf and "proportion" in names:
            raise ConfError(
                f"{source}: tiers[{t}]: drf with enableHierarchy cannot be combined "
                f"with proportion in the same tier"
            )


def load_conf(path: str | Path | None) -> SchedulerConf:
    """Read a conf file, or the built-in default when ``path`` is None."""
    if path is None:
        return parse_conf(DEFAULT_CONF, source="<default>")
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_conf(text, source=str(path))
