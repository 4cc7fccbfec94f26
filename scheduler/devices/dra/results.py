"""The parts of an allocation result besides the devices, and why a search found none.

``claim_configs`` copies the class configs (once per class, listing the requests that use it)
and the claim configs that name an allocated request or subrequest, an entry that applies to
every request losing its request list ("empty means all"), as kube-scheduler does.
``node_selector`` is ``createNodeSelector``: a device on a node-local slice (or binding to a
node) pins the claim to the node by name; network-attached devices add their slices' selector
terms; devices for all nodes add nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scheduler.devices.dra.model import AllocatedConfig, Device, ResourceClaim, ResourceSlice

if TYPE_CHECKING:
    from scheduler.devices.dra.search import RequestData

__all__ = ["claim_configs", "node_selector"]


def _chosen(ci: int, ri: int, data: Mapping[tuple[int, int, int], RequestData]) -> RequestData:
    top = data[(ci, ri, 0)]
    return data[(ci, ri, top.selected_sub)] if top.parent is not None else top


def _names(
    ci: int, claim: ResourceClaim, data: Mapping[tuple[int, int, int], RequestData]
) -> list[tuple[str, str]]:
    """(request name, subrequest path or "") of each request of the claim, as chosen."""
    out = []
    for ri, request in enumerate(claim.requests):
        chosen = _chosen(ci, ri, data)
        out.append((request.name, f"{request.name}/{chosen.request.name}" if chosen.parent else ""))
    return out


def claim_configs(
    claim: ResourceClaim, ci: int, data: Mapping[tuple[int, int, int], RequestData]
) -> list[AllocatedConfig]:
    configs: list[tuple[str, list[str], Any]] = []
    by_class: dict[str, tuple[int, int]] = {}
    for ri, _request in enumerate(claim.requests):
        chosen = _chosen(ci, ri, data)
        name = (
            f"{chosen.parent.name}/{chosen.request.name}"
            if chosen.parent is not None
            else chosen.request.name
        )
        cls = chosen.device_class
        if cls.name in by_class:
            start, end = by_class[cls.name]
            for i in range(start, end):
                configs[i][1].append(name)
            continue
        start = len(configs)
        for cfg in cls.config:
            configs.append(("FromClass", [name], cfg.opaque))
        by_class[cls.name] = (start, len(configs))
    names = _names(ci, claim, data)
    for cfg in claim.config:
        if not cfg.requests:
            configs.append(("FromClaim", [], cfg.opaque))
            continue
        for request, sub in names:
            if request in cfg.requests or (sub and sub in cfg.requests):
                configs.append(("FromClaim", list(cfg.requests), cfg.opaque))
                break
    out = []
    for source, requests, opaque in configs:
        if requests and all(r in requests or (s and s in requests) for r, s in names):
            requests = []
        out.append(AllocatedConfig(source, tuple(requests), opaque))
    return out


def _add_requirements(source: Sequence[Mapping[str, Any]], target: list[dict[str, Any]]) -> None:
    for req in source:
        values = set(req.get("values") or [])
        if not any(
            t.get("key") == req.get("key")
            and t.get("operator") == req.get("operator")
            and set(t.get("values") or []) == values
            for t in target
        ):
            target.append(dict(req))


def node_selector(
    placed: Sequence[tuple[ResourceSlice, Device]], node_name: str, error: type[Exception]
) -> dict[str, Any] | None:
    fields: list[dict[str, Any]] = []
    expressions: list[dict[str, Any]] = []
    for s, device in placed:
        if s.per_device_node_selection:
            name, selector = device.node_name, device.node_selector
        else:
            name, selector = s.node_name, s.node_selector
        if name or device.binds_to_node:
            return {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            }
        if selector is not None:
            terms = selector.get("nodeSelectorTerms") or []
            if len(terms) > 1:
                raise error(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
            if terms:
                _add_requirements(terms[0].get("matchFields") or [], fields)
                _add_requirements(terms[0].get("matchExpressions") or [], expressions)
    if not fields and not expressions:
        return None
    term: dict[str, Any] = {}
    if expressions:
        term["matchExpressions"] = expressions
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}
