"""Warnings about manifests that load but would not look the same in a cluster, each in the
one format every warning of ``lahar simulate`` takes: ``FILE#DOC: Kind ns/name: what``.

* a pod bound (``spec.nodeName``) to a node no manifest defines: the kubelet of no node runs
  it, yet it counts as bound;
* a Device whose ``gpu-memory`` or ``gpu-core`` is negative (the device families clamp it to
  0; Koordinator's koordlet never reports one);
* a HyperNode holding a HyperNode of a higher tier (Volcano's tree has tiers growing towards
  the root, pkg/scheduler/api/hyper_node_info.go);
* a Queue whose ``spec.parent`` chain comes back to it (a cycle has no root to hang from);
* a file none of whose objects is of a kind Lahar reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from scheduler.api.resource import QuantityError, parse_quantity

__all__ = ["cross_warnings", "unread_file_warning"]

_DEVICE_QUANTITIES = ("gpu-memory", "gpu-core")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))




def unread_file_warning(name: str, kinds: list[str], readable: Iterable[str]) -> str:
    """The warning for a file whose objects are all of kinds Lahar does not read."""
    shown = ", ".join(sorted(set(kinds)))
    return (f"{name}: none of its {len(kinds)} object(s) is of a kind Lahar reads (has "
            f"{shown}; reads {', '.join(readable)})")


def cross_warnings(manifests: list[Any], *, key: Callable[[Any], str]) -> list[str]:
    """The warnings that need every manifest loaded (see the module docstring); ``key``
    names an object (``Kind ns/name``)."""

    def _where(manifest: Any) -> str:
        return f"{manifest.source}: {key(manifest)}"

    nodes = {_name(m.obj) for m in manifests if m.kind == "Node"}
    tiers = {_name(m.obj): (m.obj.get("spec") or {}).get("tier")
             for m in manifests if m.kind == "HyperNode"}
    parents = {_name(m.obj): str((m.obj.get("spec") or {}).get("parent") or "")
               for m in manifests if m.kind == "Queue"}
    warnings: list[str] = []
    for manifest in manifests:
        obj, kind = manifest.obj, manifest.kind
        if kind == "Queue":
            cycle = _queue_cycle(_name(obj), parents)
            if cycle:
                warnings.append(f"{_where(manifest)}: field spec.parent: the queues' parents "
                                f"form a cycle ({' -> '.join(cycle)})")
        spec = obj.get("spec") or {}
        if kind == "Pod":
            node = spec.get("nodeName")
            if node and node not in nodes:
                warnings.append(f"{_where(manifest)}: bound to node {node!r}, which no "
                                "manifest defines; it runs nowhere but counts as bound")
        elif kind == "Device":
            warnings.extend(f"{_where(manifest)}: {warning}"
                            for warning in _device_warnings(spec))
        elif kind == "HyperNode":
            tier = spec.get("tier")
            for i, member in enumerate(spec.get("members") or ()):
                exact = ((member.get("selector") or {}).get("exactMatch") or {}).get("name")
                child = tiers.get(str(exact)) if member.get("type") == "HyperNode" else None
                if isinstance(child, int) and isinstance(tier, int) and child > tier:
                    warnings.append(
                        f"{_where(manifest)}: field spec.members[{i}]: tier {tier} holds "
                        f"HyperNode {exact!r} of higher tier {child}; tiers grow towards "
                        "the root")
    return warnings


def _queue_cycle(name: str, parents: Mapping[str, str]) -> list[str]:
    chain = [name]
    parent = parents.get(name, "")
    while parent and parent in parents and len(chain) <= len(parents):
        chain.append(parent)
        if parent == name:
            return chain
        parent = parents[parent]
    return []


def _device_warnings(spec: Mapping[str, Any]) -> Iterable[str]:
    for i, device in enumerate(spec.get("devices") or ()):
        resources = device.get("resources") if isinstance(device, Mapping) else None
        if not isinstance(resources, Mapping):
            continue
        for name, value in resources.items():
            if not str(name).endswith(_DEVICE_QUANTITIES):
                continue
            try:
                negative = parse_quantity(value) < 0
            except QuantityError:
                continue  # the Device parser names it
            if negative:
                yield (f"field spec.devices[{i}].resources[{name}]: "
                       f"{value!r} is negative; 0 is used")
