"""The sharding controller's configuration, in Volcano's formats.

Two sources, as Volcano's controller (pkg/controllers/sharding/config.go):

* a ``sharding.yaml`` document (the ``sharding.yaml`` key of Volcano's sharding ConfigMap):
  ``schedulerConfigs`` (each a ``name``, a ``type`` and a ``policies`` chain of ``name``,
  ``weight``, ``arguments``), ``shardSyncPeriod`` and ``enableNodeEventTrigger``;
* the older ``--scheduler-configs`` strings ``name:type:minUtil:maxUtil:preferWarmup:minNodes:
  maxNodes`` (Volcano's defaults: ``volcano:volcano:0.0:0.6:false:2:100`` and
  ``agent-scheduler:agent:0.7:1.0:true:2:100``); ``preferWarmup`` there is not acted on, as
  in Volcano, where ``parseOldFormat`` already fills the policy chain.

A scheduler without ``policies`` gets them from its older fields (``applyPolicyDefaults``): an
``allocation-rate`` band from ``arguments`` or ``cpuUtilizationMin``/``Max``, a ``warmup`` score
for ``preferWarmupNodes`` and a ``node-limit`` for ``minNodes``/``maxNodes``. A weight left out
(or 0) is 1. Errors name the scheduler entry and the field (:class:`ShardingConfigError`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
import yaml

from scheduler.cluster.sharding.policies import (
    ARG_MAX_CPU,
    ARG_MIN_CPU,
    Policy,
    PolicyError,
    build_policy,
)

__all__ = ["DEFAULT_SCHEDULER_CONFIGS", "SchedulerShardConfig", "ShardingConfig",
           "ShardingConfigError", "parse_legacy", "parse_sharding_yaml"]

log = structlog.get_logger("lahar.sharding")

DEFAULT_SCHEDULER_CONFIGS = ("volcano:volcano:0.0:0.6:false:2:100",
                             "agent-scheduler:agent:0.7:1.0:true:2:100")
"""Volcano's ``--scheduler-configs`` default (NewShardingControllerOptions)."""


class ShardingConfigError(ValueError):
    """A sharding configuration that cannot be used, naming the entry and the field."""


@dataclass(frozen=True, slots=True)
class WeightedPolicy:
    policy: Policy
    weight: int


@dataclass(frozen=True, slots=True)
class SchedulerShardConfig:
    name: str
    type: str
    policies: tuple[WeightedPolicy, ...]


@dataclass(frozen=True, slots=True)
class ShardingConfig:
    schedulers: tuple[SchedulerShardConfig, ...]
    sync_period: float | None = None
    """``shardSyncPeriod`` in seconds (None: keep the flag's)."""
    node_event_trigger: bool | None = None
    sources: tuple[str, ...] = field(default=())


def _duration(text: str, where: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit):
            try:
                return float(text[: -len(unit)]) * units[unit]
            except ValueError:
                break
    raise ShardingConfigError(f"{where}: must be a duration such as 60s or 2m, got {text!r}")


def _number(entry: Mapping[str, Any], key: str, where: str, *, integer: bool = False) -> float:
    value = entry.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            integer and value != int(value)):
        kind = "an integer" if integer else "a number"
        raise ShardingConfigError(f"{where}: field {key}: must be {kind}, got {value!r}")
    return value


def _scheduler(index: int, entry: Any) -> SchedulerShardConfig:
    where = f"schedulerConfigs[{index}]"
    if not isinstance(entry, Mapping):
        raise ShardingConfigError(f"{where}: must be a mapping, got {entry!r}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ShardingConfigError(f"{where}: field name: must not be empty")
    where = f"{where} ({name})"
    low = _number(entry, "cpuUtilizationMin", where)
    high = _number(entry, "cpuUtilizationMax", where)
    for key, value in (("cpuUtilizationMin", low), ("cpuUtilizationMax", high)):
        if not 0 <= value <= 1:
            raise ShardingConfigError(f"{where}: field {key}: {value:.2f} out of range [0,1]")
    if low > high:
        raise ShardingConfigError(f"{where}: cpuUtilizationMin ({low:.2f}) must be <= "
                                  f"cpuUtilizationMax ({high:.2f})")
    minimum = int(_number(entry, "minNodes", where, integer=True))
    maximum = int(_number(entry, "maxNodes", where, integer=True))
    if minimum < 0:
        raise ShardingConfigError(f"{where}: field minNodes: must be >= 0")
    if maximum < minimum:
        raise ShardingConfigError(f"{where}: maxNodes ({maximum}) must be >= minNodes "
                                  f"({minimum})")
    raw = entry.get("policies") or []
    if not isinstance(raw, list):
        raise ShardingConfigError(f"{where}: field policies: must be a list")
    specs: list[dict[str, Any]] = []
    for j, spec in enumerate(raw):
        here = f"{where}: policies[{j}]"
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) or not spec[
                "name"]:
            raise ShardingConfigError(f"{here}.name must not be empty")
        weight = spec.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
            raise ShardingConfigError(f"{here} ({spec['name']}): weight must be an integer "
                                      ">= 0 (omit for default of 1)")
        arguments = spec.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise ShardingConfigError(f"{here} ({spec['name']}): arguments must be a mapping")
        if spec["name"] != "node-limit":
            for key in ("minNodes", "maxNodes"):
                if key in arguments:
                    raise ShardingConfigError(f"{here} ({spec['name']}): {key} is only "
                                              "supported by the node-limit policy")
        specs.append({"name": spec["name"], "weight": weight, "arguments": dict(arguments)})
    if not specs:  # applyPolicyDefaults
        arguments = entry.get("arguments") or {ARG_MIN_CPU: low, ARG_MAX_CPU: high}
        specs.append({"name": "allocation-rate", "weight": 1, "arguments": arguments})
        if entry.get("preferWarmupNodes"):
            specs.append({"name": "warmup", "weight": 1, "arguments": {}})
    if (minimum > 0 or maximum > 0) and not any(s["name"] == "node-limit" for s in specs):
        specs.append({"name": "node-limit", "weight": 0,
                      "arguments": {"minNodes": minimum, "maxNodes": maximum}})
    try:
        policies = tuple(WeightedPolicy(build_policy(s["name"], s["arguments"]),
                                        s["weight"] or 1) for s in specs)
    except PolicyError as error:
        raise ShardingConfigError(f"{where}: {error}") from None
    return SchedulerShardConfig(name=name, type=str(entry.get("type", "")), policies=policies)


def parse_sharding_yaml(text: str, *, source: str = "sharding.yaml") -> ShardingConfig:
    """Volcano's ``ParseShardingConfig`` and the policy checks, with errors naming ``source``."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ShardingConfigError(f"{source}: not YAML: {error}") from None
    if not isinstance(document, Mapping):
        raise ShardingConfigError(f"{source}: must be a mapping with schedulerConfigs")
    entries = document.get("schedulerConfigs")
    if not isinstance(entries, list) or not entries:
        raise ShardingConfigError(f"{source}: sharding config must contain at least one "
                                  "schedulerConfig entry")
    try:
        schedulers = tuple(_scheduler(i, entry) for i, entry in enumerate(entries))
        period = document.get("shardSyncPeriod")
        trigger = document.get("enableNodeEventTrigger")
        if trigger is not None and not isinstance(trigger, bool):
            raise ShardingConfigError(f"field enableNodeEventTrigger: must be true or false, "
                                      f"got {trigger!r}")
        return ShardingConfig(
            schedulers=schedulers,
            sync_period=None if not period else _duration(str(period), "field shardSyncPeriod"),
            node_event_trigger=trigger, sources=(source,))
    except ShardingConfigError as error:
        raise ShardingConfigError(f"{source}: {error}") from None


def parse_legacy(lines: Sequence[str]) -> ShardingConfig:
    """``--scheduler-configs`` strings (Volcano's parseOldFormat)."""
    entries: list[dict[str, Any]] = []
    for line in lines:
        parts = line.split(":")
        if len(parts) != 7:
            raise ShardingConfigError(f"--scheduler-configs {line!r}: expected 7 colon-separated "
                                      "parts name:type:minUtil:maxUtil:preferWarmup:minNodes:"
                                      "maxNodes")
        try:
            low, high = (1.0 if p in ("inf", "infinity") else 0.0 if p in ("-inf", "-infinity")
                         else float(p) for p in parts[2:4])
            warmup = {"true": True, "false": False, "1": True, "0": False}[parts[4].lower()]
            minimum, maximum = int(parts[5]), int(parts[6])
        except (ValueError, KeyError):
            raise ShardingConfigError(f"--scheduler-configs {line!r}: utilizations must be "
                                      "numbers, preferWarmup true or false, node counts "
                                      "integers") from None
        # parseOldFormat writes the allocation-rate policy itself, so applyPolicyDefaults
        # adds no warmup score: preferWarmup is read, warned about and not acted on.
        if warmup:
            log.warning("preferWarmup of --scheduler-configs is not acted on (as in Volcano); "
                        "use a warmup policy in a sharding.yaml", scheduler=parts[0])
        entries.append({"name": parts[0], "type": parts[1], "cpuUtilizationMin": low,
                        "cpuUtilizationMax": high, "minNodes": minimum, "maxNodes": maximum,
                        "policies": [{"name": "allocation-rate", "weight": 1, "arguments": {
                            ARG_MIN_CPU: low, ARG_MAX_CPU: high}}]})
    if not entries:
        raise ShardingConfigError("--scheduler-configs: at least one scheduler is needed")
    try:
        return ShardingConfig(schedulers=tuple(_scheduler(i, e) for i, e in enumerate(entries)),
                              sources=("--scheduler-configs",))
    except ShardingConfigError as error:
        raise ShardingConfigError(f"--scheduler-configs: {error}") from None
