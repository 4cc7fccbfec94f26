"""Resource pools as kube-scheduler's allocator sees them from one node.

``gather_pools`` is ``GatherPools``: the slices that target the node (by ``nodeName``,
``nodeSelector``, ``allNodes`` or per device), grouped into pools by (driver, pool name), the
newest generation kept; a pool with fewer slices than ``resourceSliceCount`` is incomplete;
duplicate device names or counter sets, or a device consuming an unknown counter, make it
invalid. Pools are sorted by driver and name, those with binding conditions last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.devices.dra.model import CounterSet, Device, ResourceSlice
from scheduler.devices.dra.state import Features

__all__ = ["Pool", "gather_pools", "node_matches", "selector_matches"]


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[ResourceSlice] = field(default_factory=list)
    """Slices with devices that target the node, by name."""
    other_slices: list[ResourceSlice] = field(default_factory=list)
    """The pool's other device slices (their devices still consume the pool's counters)."""
    counter_sets: dict[str, CounterSet] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.driver}/{self.name}"


def _requirement_matches(req: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, operator = req.get("key", ""), req.get("operator", "")
    wanted = [str(v) for v in req.get("values") or []]
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def selector_matches(
    selector: Mapping[str, Any], node_name: str, node_labels: Mapping[str, str]
) -> bool:
    """A v1 NodeSelector (terms ORed, requirements ANDed; an empty term matches nothing)."""
    fields_ = {"metadata.name": node_name}
    for term in selector.get("nodeSelectorTerms") or []:
        expressions = term.get("matchExpressions") or []
        match_fields = term.get("matchFields") or []
        if not expressions and not match_fields:
            continue
        if all(_requirement_matches(r, node_labels) for r in expressions) and all(
            _requirement_matches(r, fields_) for r in match_fields
        ):
            return True
    return False


def node_matches(
    *,
    node_name: str,
    node_labels: Mapping[str, str],
    target_name: str,
    all_nodes: bool,
    selector: Mapping[str, Any] | None,
) -> bool:
    """kube-scheduler's ``NodeMatches``."""
    if target_name:
        return node_name == target_name
    if all_nodes:
        return True
    if selector is not None:
        return selector_matches(selector, node_name, node_labels)
    return False


def _device_targets(device: Device, node_name: str, node_labels: Mapping[str, str]) -> bool:
    return node_matches(
        node_name=node_name,
        node_labels=node_labels,
        target_name=device.node_name,
        all_nodes=device.all_nodes,
        selector=device.node_selector,
    )


def _slice_relevant(s: ResourceSlice, node_name: str, node_labels: Mapping[str, str]) -> bool:
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return node_matches(
            node_name=node_name,
            node_labels=node_labels,
            target_name=s.node_name,
            all_nodes=s.all_nodes,
            selector=s.node_selector,
        )
    if s.per_device_node_selection:
        return any(_device_targets(d, node_name, node_labels) for d in s.devices)
    return False


def gather_pools(
    *,
    node_name: str,
    node_labels: Mapping[str, str],
    slices: Sequence[ResourceSlice],
    features: Features,
) -> list[Pool]:
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        if not features.partitionable_devices and (
            s.per_device_node_selection or s.shared_counters
        ):
            continue
        if not _slice_relevant(s, node_name, node_labels):
            continue
        key = (s.driver, s.pool)
        known = by_pool.get(key)
        if known is None or s.pool_generation > known[0].pool_generation:
            by_pool[key] = [s]
        elif s.pool_generation == known[0].pool_generation:
            known.append(s)
    plain: list[Pool] = []
    binding: list[Pool] = []
    for (driver, name), pool_slices in by_pool.items():
        generation = pool_slices[0].pool_generation
        expected = pool_slices[0].resource_slice_count
        all_for_pool: list[ResourceSlice] | None = None
        if len(pool_slices) != expected:
            same = [s for s in slices if s.driver == driver and s.pool == name]
            if any(s.pool_generation > generation for s in same):
                continue  # obsolete: a newer generation exists elsewhere
            all_for_pool = [s for s in same if s.pool_generation == generation]
            if len(all_for_pool) != expected:
                plain.append(Pool(driver, name, incomplete=True))
                continue
        pool = _build_pool(driver, name, pool_slices, all_for_pool, features)
        has_binding = any(d.binding_conditions for s in pool.slices for d in s.devices)
        (binding if has_binding else plain).append(pool)
    plain.sort(key=lambda p: (p.driver, p.name))
    binding.sort(key=lambda p: (p.driver, p.name))
    return plain + binding


def _build_pool(
    driver: str,
    name: str,
    pool_slices: list[ResourceSlice],
    all_for_pool: list[ResourceSlice] | None,
    features: Features,
) -> Pool:
    pool_slices = sorted(pool_slices, key=lambda s: s.name)
    device_slices: list[ResourceSlice] = []
    counter_slices: list[ResourceSlice] = []
    for s in pool_slices:
        (
            counter_slices
            if features.partitionable_devices and s.shared_counters
            else device_slices
        ).append(s)
    others: list[ResourceSlice] = []
    if all_for_pool is not None and len(pool_slices) < len(all_for_pool):
        targeting = {s.name for s in pool_slices}
        for s in all_for_pool:
            if s.name in targeting:
                continue
            (
                counter_slices if features.partitionable_devices and s.shared_counters else others
            ).append(s)
    pool = Pool(driver, name, slices=device_slices)
    seen: set[str] = set()
    for s in device_slices:
        for d in s.devices:
            if d.name in seen:
                return Pool(
                    driver, name, invalid=True, invalid_reason=f"duplicate device name {d.name}"
                )
            seen.add(d.name)
    if not features.partitionable_devices:
        return pool
    for s in counter_slices:
        for cs in s.shared_counters:
            if cs.name in pool.counter_sets:
                return Pool(
                    driver,
                    name,
                    invalid=True,
                    invalid_reason=f"duplicate counter set name {cs.name}",
                )
            pool.counter_sets[cs.name] = cs
    for s in (*device_slices, *others):
        for d in s.devices:
            for use in d.consumes_counters:
                used_set = pool.counter_sets.get(use.counter_set)
                if used_set is None:
                    return Pool(
                        driver,
                        name,
                        invalid=True,
                        invalid_reason=f"counter set {use.counter_set} not found",
                    )
                for counter in use.counters:
                    if counter not in used_set.counters:
                        return Pool(
                            driver,
                            name,
                            invalid=True,
                            invalid_reason=f"counter {counter} not found in counter set "
                            f"{used_set.name}",
                        )
    pool.other_slices = others
    return pool
