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

What Volcano refuses at load is a :class:`ConfError` naming it: an unknown action in
``actions``, a switch (``enable…``) that is not true/false, ``arguments`` that is not a map,
drf with ``enableHierarchy`` beside proportion in one tier; and so is what Volcano refuses to
start with (GPU share with GPU number, either with vGPU) and ``capacity`` with ``proportion``.

What Volcano loads, Lahar loads, and nothing of it is accepted silently: each of these gives one
warning naming the file and where in it (``tiers[T].plugins[P] (NAME): …``,
``configurations[I] (ACTION): …``, ``top-level key …``), collected in
:attr:`SchedulerConf.warnings` for the CLI to print (``lahar run`` logs them):

* a plugin name Lahar does not have is skipped, as Volcano's ``OpenSession`` skips it (with the
  closest known name for a typo; a Volcano plugin Lahar does not implement is named as such);
* an argument of the wrong type keeps its default, as Volcano's ``GetInt``/``GetFloat64``/
  ``GetBool``/``GetString`` do (:mod:`scheduler.framework.arguments`);
* a value Volcano replaces (a negative ``ancestorReclaimLevel``) or takes although it is
  surely a mistake (a negative weight), as the plugin's ``Args`` notes it;
* an unknown key, and every switch, argument or section Lahar accepts for compatibility but
  does not act on (:func:`ignored`).

An empty conf is an error, as in Volcano, whose scheduler then starts with its built-in default
conf or, on a reload, keeps the conf it has; ``lahar run`` does the same. A conf without
``actions`` gets Volcano's default actions (``enqueue, allocate, backfill``).
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
from scheduler.confyaml import UnreadableFile, load_conf_yaml, read_text
from scheduler.framework.arguments import ArgumentError, arg, closest, parse_args, yaml_text
from scheduler.framework.hooks import HOOK_FLAGS
from scheduler.framework.lazyregistry import load

__all__ = [
    "ACTION_ARGS",
    "DEFAULT_CONF",
    "IGNORED_ACTION_ARGUMENTS",
    "IGNORED_PLUGIN_ARGUMENTS",
    "PLUGIN_FLAGS",
    "VOLCANO_ACTION_ARGUMENTS",
    "VOLCANO_PLUGINS",
    "ConfError",
    "PluginOption",
    "SchedulerConf",
    "ignored",
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
_SUB_JOB_FLAGS = {"enabledSubJobReady": "enableJobReady",
                  "enabledSubJobPipelined": "enableJobPipelined",
                  "enabledSubJobOrder": "enableJobOrder"}
"""Volcano's sub-job switches and the job switch whose hook Lahar applies to sub-groups."""
_SUB_JOB_PLUGINS = ("gang", "priority")
"""The plugins whose job hooks rank or gate sub-groups too (scheduler/framework/subjobs.py)."""
_DEFAULT_ACTIONS = "enqueue, allocate, backfill"
_TOP_LEVEL_KEYS = ("actions", "tiers", "configurations", "metrics")

_NO_VOLUMES = "Lahar does not model volumes, so pods' volumes are never checked"
IGNORED_PLUGIN_ARGUMENTS: dict[str, dict[str, str]] = {
    "predicates": {
        "predicate.NodeVolumeLimitsEnable": _NO_VOLUMES,
        "predicate.VolumeZoneEnable": _NO_VOLUMES,
        "predicate.VolumeBindingEnable": _NO_VOLUMES + " and claims are never bound",
        "predicate.CacheEnable": "Lahar always shares node-only predicate results between pods "
        "with the same constraints; placements are the same either way",
    },
}
"""Plugin arguments Lahar accepts (Volcano has them) but does not act on, with the reason."""

_NO_ERROR_CACHE = (
    "a speed-up in Volcano; Lahar keeps no predicate error cache and places pods the same way"
)
IGNORED_ACTION_ARGUMENTS: dict[str, dict[str, str]] = {
    "allocate": {"predicateErrorCacheEnable": _NO_ERROR_CACHE},
    "backfill": {"predicateErrorCacheEnable": _NO_ERROR_CACHE},
}
"""Action ``configurations`` arguments Lahar accepts but does not act on, with the reason."""

VOLCANO_ACTION_ARGUMENTS: dict[str, frozenset[str]] = {
    "allocate": frozenset({"predicateErrorCacheEnable"}),
    "backfill": frozenset({"predicateErrorCacheEnable"}),
    "preempt": frozenset({
        "predicateErrorCacheEnable", "enableTopologyAwarePreemption",
        "topologyAwarePreemptWorkerNum", "minCandidateNodesPercentage",
        "minCandidateNodesAbsolute", "maxCandidateNodesAbsolute",
    }),
    "reclaim": frozenset({"predicateErrorCacheEnable"}),
    "gangpreempt": frozenset({"maxDomains", "allowWholeBundle"}),
    "gangreclaim": frozenset({"maxDomains", "allowWholeBundle"}),
}
"""The ``configurations`` keys Volcano's actions read. An action with neither an ``Args`` on
its class nor one in :data:`ACTION_ARGS` has these passed on; any other key is unknown."""


@dataclass(frozen=True, slots=True)
class PredicateErrorCacheArgs:
    """The one argument Volcano's allocate and backfill read (``GetBool``)."""

    predicate_error_cache: bool = arg("predicateErrorCacheEnable", True)


ACTION_ARGS: dict[str, type | str] = {
    "allocate": PredicateErrorCacheArgs,
    "backfill": PredicateErrorCacheArgs,
    "preempt": "actions.preempt:PreemptArgs",
    "reclaim": "actions.reclaim:ReclaimArgs",
}
"""The typed arguments of each action, checked at load as Volcano's getters read them (a value
of the wrong type is a warning and keeps its default); an action class's own ``Args`` comes
first. An action's own module is named as ``"module:Class"`` and imported only when the conf
configures that action (:func:`action_args_class`)."""


def action_args_class(name: str) -> type | None:
    """The typed arguments of action ``name`` from :data:`ACTION_ARGS` (None: untyped)."""
    where = ACTION_ARGS.get(name)
    if not isinstance(where, str):
        return where
    cls: type = load(where)
    return cls


def ignored(where: str, what: str, why: str) -> str:
    """The one wording of "accepted but not acted on": ``<where>: <what> is ignored: <why>``.

    Every such warning of the conf goes through here so users see one shape, whatever the
    source (a plugin argument, a flag, an action argument, a whole plugin or section)."""
    return f"{where}: {what} is ignored: {why}"

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


def _plugin(raw: Any, where: str, warnings: list[str]) -> PluginOption | None:
    """The entry as a :class:`PluginOption`, or None (with a warning) for a plugin name Lahar
    does not have. Volcano decodes every entry before it looks a name up, so a switch that is
    not true/false or ``arguments`` that is not a map fails the load even on such an entry."""
    if not isinstance(raw, Mapping):
        raise ConfError(f"{where}: a plugin entry must be a map with a name")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfError(f"{where}: plugin name is required")
    for key, value in raw.items():
        if key in PLUGIN_FLAGS and not isinstance(value, bool):
            raise ConfError(f"{where} ({name}): {key} must be true or false, got "
                            f"{yaml_text(value)} (Volcano refuses such a conf too)")
    arguments = raw.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        raise ConfError(f"{where} ({name}): arguments must be a map")
    cls = PLUGINS.get(name)
    if cls is None:
        warnings.append(_skipped(name, where))
        return None
    flags: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in PLUGIN_FLAGS:
            warnings.append(f"{where} ({name}): unknown key {key!r} ignored"
                            f"{closest(str(key), PLUGIN_FLAGS)}")
            continue
        flags[key] = value
    acted_on = _acted_on_flags(cls)
    for key in flags:
        if key not in acted_on:
            job_flag = _SUB_JOB_FLAGS.get(key, "")
            reason = (f"sub-groups follow {name}'s {job_flag} (Lahar has no separate switch)"
                      if job_flag in acted_on and name in _SUB_JOB_PLUGINS
                      else f"{name} has no hook it switches")
            warnings.append(ignored(f"{where} ({name})", f"flag {key}", reason))
    for key in PLUGIN_FLAGS:
        flags.setdefault(key, key not in _FLAG_DEFAULT_OFF)
    try:
        args, arg_warnings = parse_args(cls.Args, arguments)
    except ArgumentError as exc:
        raise ConfError(f"{where}: {exc}") from None
    warnings.extend(f"{where} ({name}): {warning}" for warning in arg_warnings)
    for key, why in IGNORED_PLUGIN_ARGUMENTS.get(name, {}).items():
        if key in arguments:
            warnings.append(ignored(f"{where} ({name})", f"argument {key!r}", why))
    return PluginOption(name=name, arguments=dict(arguments), flags=flags, args=args)


def _acted_on_flags(cls: type) -> set[str]:
    """The ``enable…`` flags that change something for plugin class ``cls``: those gating a
    hook it implements, plus any it reads itself (listed in its optional ``FLAGS``)."""
    flags = {flag for hook, flag in HOOK_FLAGS.items() if flag and _implements(cls, hook)}
    flags.update(getattr(cls, "FLAGS", ()))
    return flags


def _implements(cls: type, hook: type) -> bool:
    try:
        return issubclass(cls, hook)
    except TypeError:  # a Protocol with data members: compare attribute names instead
        names = [n for n in vars(hook) if not n.startswith("_")]
        return all(hasattr(cls, n) for n in names)


def parse_conf(text: str, *, source: str = "<conf>") -> SchedulerConf:
    """Parse and validate conf text; raises :class:`ConfError`."""
    try:
        raw, repeated = load_conf_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"{source}: not valid YAML: {exc}") from None
    if raw is None or raw == {}:
        raise ConfError(
            f"{source}: the conf is empty; it needs actions and tiers (like Volcano, lahar run "
            f"then starts with the built-in default conf, or keeps the conf it has on reload)"
        )
    if not isinstance(raw, Mapping):
        raise ConfError(f"{source}: the conf must be a YAML map")
    if raw.get("kind") == "ConfigMap":
        key, text = _configmap_conf(raw, source)
        return parse_conf(text, source=f"{source} (data[{key}])")
    warnings: list[str] = [
        f"{source}: line {r.line}: key {r.key!r} repeats line {r.first_line} of the same map; "
        f"the later value is used, as Volcano uses it"
        for r in sorted(repeated, key=lambda r: r.line)]
    actions_text = raw.get("actions", _DEFAULT_ACTIONS)
    if not isinstance(actions_text, str):
        raise ConfError(f"{source}: actions must be a comma-separated string")
    actions = tuple(a.strip() for a in actions_text.split(",") if a.strip())
    if not actions:
        raise ConfError(f"{source}: actions is empty; name at least one action")
    for action in actions:
        if action not in ACTIONS:
            raise ConfError(
                f"{source}: unknown action {action!r} (known: {', '.join(sorted(ACTIONS))})"
            )
    for action in sorted({a for a in actions if actions.count(a) > 1}):
        warnings.append(f"{source}: actions: {action!r} is listed {actions.count(action)} "
                        "times; it runs each time, as in Volcano")
    raw_tiers = raw.get("tiers") or []
    if not isinstance(raw_tiers, Sequence) or isinstance(raw_tiers, str):
        raise ConfError(f"{source}: tiers must be a list")
    tiers = []
    for t, tier in enumerate(raw_tiers):
        plugins = (tier or {}).get("plugins") if isinstance(tier, Mapping) else None
        if not isinstance(plugins, Sequence) or isinstance(plugins, str):
            raise ConfError(f"{source}: tiers[{t}].plugins must be a list")
        options = (_plugin(p, f"{source}: tiers[{t}].plugins[{i}]", warnings)
                   for i, p in enumerate(plugins))
        tiers.append(tuple(option for option in options if option is not None))
    _check_combinations(tiers, source, warnings)
    if not any(tiers):
        warnings.append(
            f"{source}: no plugins in tiers; pods are placed by resources alone "
            f"(no gang, queue share, priority or node predicates)"
        )
    configurations = _configurations(raw.get("configurations"), actions, source, warnings)
    if "shuffle" in actions and not any(
        hasattr(PLUGINS[p.name], "victim_tasks") for tier in tiers for p in tier
    ):
        warnings.append(
            f"{source}: action 'shuffle' evicts only what a VictimTasks plugin names and no "
            f"plugin here feeds it (Volcano's rescheduling plugin does; Lahar has none yet): "
            f"shuffle evicts nothing"
        )
    _warn_mixed_eviction(actions, source, warnings)
    metrics = raw.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        raise ConfError(f"{source}: metrics must be a map")
    if metrics:
        warnings.append(
            ignored(source, "top-level key 'metrics'", "no Lahar plugin reads node usage "
                    "metrics (they feed Volcano's usage and rescheduling plugins)")
        )
    for key in raw:
        if key not in _TOP_LEVEL_KEYS:
            warnings.append(ignored(source, f"top-level key {key!r}", "Volcano's conf has no "
                                    f"such key{closest(str(key), _TOP_LEVEL_KEYS)}"))
    return SchedulerConf(
        actions=actions,
        tiers=tuple(tiers),
        configurations=configurations,
        metrics={str(k): str(v) for k, v in metrics.items()},
        source=source,
        warnings=tuple(warnings),
    )


def _skipped(name: str, where: str) -> str:
    """The warning for a plugin Lahar skips, as Volcano's ``OpenSession`` skips a name it has
    no builder for (``Failed to get plugin``).

    A Volcano plugin Lahar does not implement is named as such: skipping lets a stock Volcano
    conf that names one (its CI conf names ``network-topology-aware``) load and schedule with
    everything else it configures; what the skipped plugin would have added is missing. Any
    other name is most likely a typo; the closest known name is suggested."""
    if name in VOLCANO_PLUGINS:
        return f"{where}: Volcano plugin {name!r} is not implemented by Lahar; skipped"
    return f"{where}: unknown plugin {name!r} skipped{closest(name, VOLCANO_PLUGINS)}"


def _configurations(
    raw: Any, actions: Sequence[str], source: str, warnings: list[str]
) -> dict[str, Mapping[str, Any]]:
    """Per-action arguments. Like Volcano, the first entry for an action is the one used.

    An action class may declare a typed ``Args`` dataclass, as plugins do; its arguments are then
    type-checked here and unknown keys warned about. Without one, the keys Volcano's action
    reads (:data:`VOLCANO_ACTION_ARGUMENTS`) are passed on and any other key is warned about."""
    if raw is None:
        return {}
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ConfError(f"{source}: configurations must be a list")
    out: dict[str, Mapping[str, Any]] = {}
    for i, entry in enumerate(raw):
        where = f"{source}: configurations[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfError(f"{where} needs a name")
        name = entry["name"]
        arguments = entry.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise ConfError(f"{where}.arguments must be a map")
        here = f"{where} ({name})"
        if name in out:
            warnings.append(ignored(here, "this second entry", "the first one is used, as in "
                                    "Volcano"))
            continue
        out[name] = dict(arguments)
        if name not in ACTIONS and name not in VOLCANO_ACTION_ARGUMENTS:
            known = set(ACTIONS) | set(VOLCANO_ACTION_ARGUMENTS)
            warnings.append(ignored(here, f"action {name!r}",
                                    f"there is no such action{closest(name, known)}"))
            continue
        if name not in actions:
            warnings.append(ignored(here, f"action {name!r}", "it is not in actions"))
            continue
        cls = ACTIONS.get(name)
        args_cls = getattr(cls, "Args", None) or action_args_class(name)
        if args_cls is not None:
            try:
                _, arg_warnings = parse_args(args_cls, arguments)
            except ArgumentError as exc:
                raise ConfError(f"{where}: {exc}") from None
            warnings.extend(f"{here}: {warning}" for warning in arg_warnings)
        else:
            known_keys = VOLCANO_ACTION_ARGUMENTS.get(name, frozenset())
            warnings.extend(
                f"{here}: unknown argument {key!r} ignored{closest(str(key), known_keys)}"
                for key in arguments
                if key not in known_keys
            )
        not_acted_on = {**IGNORED_ACTION_ARGUMENTS.get(name, {}),
                        **getattr(cls, "NOT_ACTED_ON", {})}
        for key, why in not_acted_on.items():
            if key in arguments:
                warnings.append(ignored(here, f"argument {key!r}", why))
    return out


_GANG_EVICTION = ("gangpreempt", "gangreclaim")


def _warn_mixed_eviction(actions: Sequence[str], source: str, warnings: list[str]) -> None:
    """Volcano's gang-aware eviction design says gangpreempt/gangreclaim are not to be listed
    with preempt/reclaim; its loader takes such a conf, and so does Lahar, with a warning."""
    gang = [a for a in actions if a in _GANG_EVICTION]
    legacy = [a for a in actions if a in ("preempt", "reclaim")]
    if gang and legacy:
        warnings.append(
            f"{source}: actions {', '.join(gang)} and {', '.join(legacy)} are both listed; "
            f"Volcano's design keeps gang-aware and task-level eviction apart: both run, "
            f"one after the other, as listed"
        )


def _check_combinations(
    tiers: list[tuple[PluginOption, ...]], source: str, warnings: list[str]
) -> None:
    names = {p.name for tier in tiers for p in tier}
    if {"capacity", "proportion"} <= names:
        # Volcano's loader (scheduler/util.go, unmarshalSchedulerConf) takes the pair and the
        # session combines both plugins' hooks; only its capacity guide warns against it.
        warnings.append(
            f"{source}: plugins capacity and proportion are both on: unusual (both divide the "
            f"cluster between queues); as in Volcano, both plugins' queue hooks apply"
        )
    _check_device_switches(tiers, source)
    for t, tier in enumerate(tiers):
        names = {p.name for p in tier}
        hierarchical_drf = any(p.name == "drf" and p.flags.get("enableHierarchy") for p in tier)
        if hierarchical_drf and "proportion" in names:
            raise ConfError(
                f"{source}: tiers[{t}]: drf with enableHierarchy cannot be combined "
                f"with proportion in the same tier"
            )


_DEVICE_SWITCHES = {"deviceshare": "deviceshare.", "predicates": "predicate."}
_SWITCH_KEYS = (("gpu_sharing", "GPUSharingEnable"), ("gpu_number", "GPUNumberEnable"),
                ("vgpu", "VGPUEnable"))


def _check_device_switches(tiers: list[tuple[PluginOption, ...]], source: str) -> None:
    """GPU share with GPU number, or either with vGPU, is refused for every spelling of the
    switches: ``predicate.*`` alone (Volcano v1.8.2 and before exit on it in predicates) and
    the two spellings mixed, which add up to the same families. ``deviceshare.*`` alone is
    refused by the plugin's own arguments."""
    on: dict[str, list[str]] = {}
    owners: set[str] = set()
    for tier in tiers:
        for option in tier:
            prefix = _DEVICE_SWITCHES.get(option.name)
            for attr, key in _SWITCH_KEYS if prefix is not None else ():
                if getattr(option.args, attr, False):
                    on.setdefault(attr, []).append(f"{prefix}{key}")
                    owners.add(option.name)
    owner = "plugins " + " and ".join(sorted(owners)) if len(owners) > 1 \
        else f"plugin {next(iter(owners), 'deviceshare')}"
    if "gpu_sharing" in on and "gpu_number" in on:
        keys = " and ".join(on["gpu_sharing"] + on["gpu_number"])
        raise ConfError(f"{source}: {owner}: can not define true in both gpu sharing and gpu "
                        f"number ({keys}); enable one of them")
    if "vgpu" in on and ("gpu_sharing" in on or "gpu_number" in on):
        keys = " and ".join(on.get("gpu_sharing", []) + on.get("gpu_number", []) + on["vgpu"])
        raise ConfError(f"{source}: {owner}: gpu-share and vgpu can't be used together ({keys})")


_CONF_KEYS = ("lahar-scheduler.conf", "volcano-scheduler.conf")
"""The data keys a ConfigMap holds the conf under (conf/deploy's, Volcano's)."""


def _configmap_conf(raw: Mapping[str, Any], source: str) -> tuple[str, str]:
    """The key and text of the conf a ConfigMap carries (as ``conf/deploy`` applies it):
    one of :data:`_CONF_KEYS`, or else its only ``*.conf`` key."""
    data = raw.get("data")
    if not isinstance(data, Mapping):
        data = {}
    keys = [k for k in data if isinstance(data[k], str)]
    known = [k for k in _CONF_KEYS if k in keys] or [k for k in keys if str(k).endswith(".conf")]
    if len(known) != 1:
        raise ConfError(
            f"{source}: a ConfigMap, not a conf: its data has no single conf key (looked for "
            f"{' or '.join(_CONF_KEYS)}, or one key ending in .conf; has "
            f"{', '.join(map(str, keys)) or 'none'})")
    return known[0], data[known[0]]


def load_conf(path: str | Path | None, *, log_warnings: bool = True) -> SchedulerConf:
    """Read a conf file, or the built-in default when ``path`` is None.

    Its warnings are logged unless ``log_warnings`` is false (the CLI prints them itself)."""
    if path is None:
        conf = parse_conf(DEFAULT_CONF, source="<default>")
    else:
        try:
            text = read_text(path)
        except UnreadableFile as exc:
            raise ConfError(str(exc)) from None
        conf = parse_conf(text, source=str(path))
    if log_warnings:
        for warning in conf.warnings:
            log.warning("conf", message=warning)
    return conf
