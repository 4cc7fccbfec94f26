"""HyperNodes discovered from node labels, as Volcano's label discoverer derives them.

Volcano's hypernode controller reads a discovery config (the ``volcano-controller.conf`` key of
the ``volcano-controller-configmap`` ConfigMap) whose ``label`` source names, per topology
type, a list of node label keys from the top tier down to ``kubernetes.io/hostname``. Every
distinct value of a key becomes one HyperNode of that tier; tier 1 holds the nodes, each higher
tier the HyperNodes below it. The controller then creates, updates and deletes HyperNodes so
that those it owns (label ``volcano.sh/network-topology-source: label``) are exactly the
discovered ones.

This module is that logic without any I/O, so ``lahar run`` (through
``cluster/kube/discovery.py``) and ``lahar simulate`` share it and tests can drive it:

* :func:`parse_discovery_config` reads the config text;
* :func:`desired_hypernodes` turns nodes (and the HyperNodes that exist, whose names are kept)
  into the HyperNode objects that should exist;
* :func:`plan_reconcile` compares them with what exists and says what to create, update and
  delete. It never touches a HyperNode that discovery does not own, and a second plan after
  the first is applied is empty.

Where Lahar differs: Volcano appends a random 5-letter suffix to a new HyperNode's name; Lahar
draws the same kind of suffix from a hash of the topology type, the label and its value, so
the names do not change between runs. A config Lahar cannot read is an error (the caller keeps
the previous one) where Volcano would treat it as empty and delete every discovered HyperNode.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from scheduler.cluster.yamlload import load_all
from scheduler.confyaml import load_yaml

__all__ = [
    "API_VERSION",
    "CONFIG_KEY",
    "DEFAULT_CONFIGMAP",
    "DEFAULT_NAMESPACE",
    "LABEL_SOURCE",
    "SOURCE_LABEL",
    "DiscoveryConfig",
    "DiscoveryConfigError",
    "Plan",
    "apply_plan",
    "config_text",
    "desired_hypernodes",
    "is_owned",
    "parse_discovery_config",
    "plan_reconcile",
]

API_VERSION = "topology.volcano.sh/v1alpha1"
SOURCE_LABEL = "volcano.sh/network-topology-source"
"""The label that marks a HyperNode as made by a discoverer; its value names the source."""
LABEL_SOURCE = "label"
CONFIG_KEY = "volcano-controller.conf"
DEFAULT_CONFIGMAP = "volcano-controller-configmap"
DEFAULT_NAMESPACE = "volcano-system"

TYPE_NAME_LIMIT = 20
"""Volcano skips a topology type whose name is longer than this."""
NAME_ATTEMPTS = 20
_ENTRY_KEYS = frozenset({"source", "enabled", "interval", "credentials", "config"})
"""Volcano's ``DiscoveryConfig`` fields; the label source uses only ``config`` (its discovery
runs on node events, never on ``interval``), as in Volcano."""
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the letters of Kubernetes' rand.String


class DiscoveryConfigError(ValueError):
    """A discovery config that cannot be read; the message names the field."""


@dataclass(frozen=True, slots=True)
class DiscoveryConfig:
    """The ``label`` source of a discovery config, ready to apply."""

    enabled: bool = False
    topology_types: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(type name, label keys from tier 1 upwards), the hostname level removed, by name."""
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """What to write so that the owned HyperNodes are the desired ones."""

    create: tuple[dict[str, Any], ...] = ()
    update: tuple[dict[str, Any], ...] = ()
    """Whole objects: the existing one with the desired spec and labels merged in, carrying
    its ``resourceVersion`` so a concurrent change makes the write fail, not win."""
    delete: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = field(default=())
    """Messages for desired names held by a HyperNode discovery does not own (left alone)."""

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


# -- the config --------------------------------------------------------------------------------

def parse_discovery_config(text: str, *, source: str) -> DiscoveryConfig:
    """The ``label`` source of a ``volcano-controller.conf`` text (``enabled`` False when the
    text enables none: discovery then stops and leaves its HyperNodes as they are). Raises
    :class:`DiscoveryConfigError` naming ``source`` and the field.

    Matches ``NetworkTopologyConfig.GetDiscoveryConfig`` (pkg/controllers/hypernode/api/
    types.go:67, the first enabled entry of the source wins) and ``parseCfg`` / ``checkLabels``
    (discovery/label/label.go:231, 264: a type with a name over 20 characters or a repeated
    label is skipped, the last label, the hostname level, is dropped)."""
    try:
        document = load_yaml(text) if text.strip() else {}
    except yaml.YAMLError as error:
        raise DiscoveryConfigError(f"{source}: not YAML: {error}") from error
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise DiscoveryConfigError(f"{source}: expected a mapping with networkTopologyDiscovery")
    entries = document.get("networkTopologyDiscovery") or []
    if not isinstance(entries, list):
        raise DiscoveryConfigError(f"{source}: networkTopologyDiscovery must be a list")
    warnings: list[str] = []
    chosen: Mapping[str, Any] | None = None
    for index, entry in enumerate(entries):
        where = f"{source}: networkTopologyDiscovery[{index}]"
        if not isinstance(entry, Mapping):
            raise DiscoveryConfigError(f"{where} must be a mapping")
        if not _enabled(entry.get("enabled"), where=f"{where}.enabled"):
            continue
        name = entry.get("source")
        if name != LABEL_SOURCE:
            warnings.append(f"{where}: source {name!r} is not supported by Lahar; only "
                            f"'{LABEL_SOURCE}' discovery runs")
        elif chosen is None:
            chosen = entry
            unknown = sorted(str(key) for key in entry if key not in _ENTRY_KEYS)
            if unknown:
                warnings.append(f"{where}: unknown field(s) {', '.join(unknown)} ignored")
        else:
            warnings.append(f"{where}: a second enabled '{LABEL_SOURCE}' source is ignored; "
                            "the first one counts (as in Volcano)")
    if chosen is None:
        return DiscoveryConfig(enabled=False, warnings=tuple(warnings))
    index = list(entries).index(chosen)
    types = _topology_types(chosen.get("config"),
                            where=f"{source}: networkTopologyDiscovery[{index}].config",
                            warnings=warnings)
    return DiscoveryConfig(enabled=True, topology_types=types, warnings=tuple(warnings))


def config_text(text: str, *, source: str) -> str:
    """The ``volcano-controller.conf`` text of a file that holds either that text itself or a
    ConfigMap carrying it under that key (as ``kubectl get cm -o yaml`` writes it)."""
    try:
        documents = [doc for doc in load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        raise DiscoveryConfigError(f"{source}: not YAML: {error}") from error
    maps = [doc for doc in documents if isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap"]
    if not maps:
        return text
    for configmap in maps:
        data = configmap.get("data")
        if isinstance(data, Mapping) and isinstance(data.get(CONFIG_KEY), str):
            return str(data[CONFIG_KEY])
    raise DiscoveryConfigError(f"{source}: no ConfigMap in the file has data.{CONFIG_KEY}")


def _enabled(value: Any, *, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise DiscoveryConfigError(f"{where}: expected true or false, got {value!r}")


def _topology_types(config: Any, *, where: str,
                    warnings: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if config is None:
        return ()
    if not isinstance(config, Mapping):
        raise DiscoveryConfigError(f"{where} must be a mapping")
    unknown = sorted(str(key) for key in config if key != "networkTopologyTypes")
    if unknown:
        warnings.append(f"{where}: unknown field(s) {', '.join(unknown)} ignored by the "
                        f"'{LABEL_SOURCE}' source")
    types = config.get("networkTopologyTypes") or {}
    if not isinstance(types, Mapping):
        raise DiscoveryConfigError(f"{where}.networkTopologyTypes must be a mapping")
    out: list[tuple[str, tuple[str, ...]]] = []
    for name in sorted(types, key=str):
        field_path = f"{where}.networkTopologyTypes.{name}"
        levels = types[name]
        if not isinstance(levels, list):
            raise DiscoveryConfigError(f"{field_path} must be a list of {{nodeLabel: KEY}}")
        keys: list[str] = []
        for position, level in enumerate(levels):
            label = level.get("nodeLabel") if isinstance(level, Mapping) else None
            if not isinstance(label, str | int | float) or isinstance(label, bool):
                raise DiscoveryConfigError(f"{field_path}[{position}].nodeLabel: expected a "
                                           f"label key, got {label!r}")
            keys.append(str(label))
        if len(str(name)) > TYPE_NAME_LIMIT:
            warnings.append(f"{field_path}: the type name is longer than {TYPE_NAME_LIMIT} "
                            "characters; skipped (as Volcano skips it)")
            continue
        if len(set(keys)) != len(keys):
            warnings.append(f"{field_path}: a node label appears twice; skipped (as Volcano "
                            "skips it)")
            continue
        out.append((str(name), tuple(reversed(keys[:-1]))))
    return tuple(out)


# -- desired HyperNodes ------------------------------------------------------------------------

def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = _meta(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def is_owned(obj: Mapping[str, Any]) -> bool:
    """Made by label discovery: ``volcano.sh/network-topology-source: label``."""
    return _labels(obj).get(SOURCE_LABEL) == LABEL_SOURCE


def clean_type_name(name: str) -> str:
    """``cleanString`` (label.go:541): letters lowered, digits, '.' and '-' kept, the rest
    '-'."""
    out = []
    for char in name:
        if char.isalpha():
            out.append(char.lower())
        elif char.isdigit() or char in ".-":
            out.append(char)
        else:
            out.append("-")
    return "".join(out)


def _suffix(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_SUFFIX_ALPHABET[byte % len(_SUFFIX_ALPHABET)] for byte in digest[:5])


@dataclass(slots=True)
class _Info:
    tier: int
    tier_name: str
    label: tuple[str, str]
    members: set[str]


def _name_for(*, type_name: str, key: str, value: str, tier: int,
              existing: Mapping[str, Mapping[str, Any]], taken: Mapping[str, _Info]) -> str:
    """``buildHyperNodeName`` (label.go:500): an owned HyperNode already labelled key=value
    whose name starts with ``hypernode-<type>-tier<N>`` keeps its name (the first by name);
    otherwise a new ``hypernode-<type>-tier<N>-<suffix>`` no object and no other discovered
    HyperNode has."""
    prefix = f"hypernode-{clean_type_name(type_name)}-tier{tier}"
    for name in sorted(existing):
        labels = _labels(existing[name])
        if (labels.get(key) == value and labels.get(SOURCE_LABEL) == LABEL_SOURCE
                and name.startswith(prefix)):
            return name
    for attempt in range(NAME_ATTEMPTS):
        name = f"{prefix}-{_suffix(f'{type_name}/{key}={value}/{attempt}')}"
        if name not in existing and name not in taken:
            return name
    raise ValueError(f"no free HyperNode name for {key}={value} after {NAME_ATTEMPTS} "
                     "attempts")


def desired_hypernodes(nodes: Iterable[Mapping[str, Any]], config: DiscoveryConfig, *,
                       existing: Mapping[str, Mapping[str, Any]] | None = None
                       ) -> list[dict[str, Any]]:
    """The HyperNodes label discovery wants, sorted by name.

    ``generateHyperNodeInfo`` and ``buildHyperNodes`` (label.go:436, 333): for each node and
    topology type, walk the keys from tier 1 up and stop at the first the node lacks; the
    HyperNode of (key, value) holds the node (tier 1) or the HyperNode below (higher tiers),
    is labelled with the source and key=value, and has tier name = the label key. One
    (key, value) is one HyperNode even when two types share the key. Nodes and types are
    walked in name order (Volcano's order is the informer's and a map's)."""
    existing = existing or {}
    infos: dict[str, _Info] = {}
    by_label: dict[tuple[str, str], str] = {}
    ordered = sorted(nodes, key=lambda node: str(_meta(node).get("name", "")))
    for node in ordered:
        node_name = str(_meta(node).get("name", ""))
        labels = _labels(node)
        for type_name, keys in config.topology_types:
            member = node_name
            for position, key in enumerate(keys):
                if key not in labels:
                    break
                value = str(labels[key])
                tier = position + 1
                name = by_label.get((key, value))
                if name is None:
                    name = _name_for(type_name=type_name, key=key, value=value, tier=tier,
                                     existing=existing, taken=infos)
                info = infos.get(name)
                if info is None:
                    info = infos[name] = _Info(tier=tier, tier_name=key, label=(key, value),
                                               members=set())
                info.members.add(member)
                by_label[(key, value)] = name
                member = name
    return [_hypernode(name, infos[name]) for name in sorted(infos)]


def _hypernode(name: str, info: _Info) -> dict[str, Any]:
    member_type = "Node" if info.tier == 1 else "HyperNode"
    key, value = info.label
    return {
        "apiVersion": API_VERSION,
        "kind": "HyperNode",
        "metadata": {"name": name, "labels": {SOURCE_LABEL: LABEL_SOURCE, key: value}},
        "spec": {
            "tier": info.tier,
            "tierName": info.tier_name,
            "members": [{"type": member_type, "selector": {"exactMatch": {"name": member}}}
                        for member in sorted(info.members)],
        },
    }


# -- reconcile ---------------------------------------------------------------------------------

def plan_reconcile(desired: Iterable[Mapping[str, Any]],
                   existing: Mapping[str, Mapping[str, Any]]) -> Plan:
    """Creates, updates and deletes that make the owned HyperNodes the desired ones.

    ``reconcileTopology`` (pkg/controllers/hypernode/hypernode_controller.go:190) with
    ``UpdateHyperNode`` (utils/utils.go:42): a desired HyperNode that exists is updated (spec
    replaced, labels and annotations merged), a missing one created, an owned one no longer
    desired deleted. Unlike Volcano, an update is planned only when it changes something (so a
    plan applied is followed by an empty one), and a desired name held by a HyperNode that
    discovery does not own is reported and left alone (Volcano's create fails on it)."""
    create: list[dict[str, Any]] = []
    update: list[dict[str, Any]] = []
    conflicts: list[str] = []
    wanted: set[str] = set()
    for hypernode in desired:
        name = str(_meta(hypernode).get("name", ""))
        wanted.add(name)
        current = existing.get(name)
        if current is None:
            create.append(_plain(hypernode))
        elif not is_owned(current):
            conflicts.append(f"HyperNode {name} exists and was not made by label discovery "
                             f"(no {SOURCE_LABEL}={LABEL_SOURCE} label); left alone")
        else:
            merged = _merged(current, hypernode)
            if merged != _plain(current):
                update.append(merged)
    delete = sorted(name for name, obj in existing.items()
                    if name not in wanted and is_owned(obj))
    return Plan(create=tuple(create), update=tuple(update), delete=tuple(delete),
                conflicts=tuple(conflicts))


def _plain(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A plain-dict deep copy."""
    return {key: _copy(value) for key, value in obj.items()}


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


def _merged(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    out = _plain(current)
    meta = out.setdefault("metadata", {})
    for field_name in ("labels", "annotations"):
        wanted = _meta(desired).get(field_name)
        if wanted:
            merged = dict(meta.get(field_name) or {})
            merged.update(wanted)
            meta[field_name] = merged
    out["spec"] = _plain(desired.get("spec") or {})
    return out


def apply_plan(existing: Mapping[str, Mapping[str, Any]],
               plan: Plan) -> dict[str, dict[str, Any]]:
    """The HyperNodes after ``plan`` is written (what an API server would then hold), for
    ``lahar simulate`` and for tests."""
    after = {name: _plain(obj) for name, obj in existing.items()}
    for obj in (*plan.create, *plan.update):
        after[str(_meta(obj).get("name", ""))] = _plain(obj)
    for name in plan.delete:
        after.pop(name, None)
    return after
