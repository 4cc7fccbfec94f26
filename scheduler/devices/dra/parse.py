"""``resource.k8s.io/v1`` wire dicts to the DRA model, and an allocation back to the wire.

Each parser raises :class:`DRAObjectError` naming the object and the field path, e.g.
``ResourceClaim ns/name: field spec.devices.requests[0].exactly.count: must be positive``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from scheduler.devices.dra.model import (
    ALLOCATION_MODES,
    AllocatedConfig,
    AllocationResult,
    CapacityRequestPolicy,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClass,
    DeviceConfig,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestResult,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
    ResourceSlice,
)
from scheduler.devices.dra.wire import (
    Where,
    as_bool,
    as_int,
    as_list,
    as_map,
    as_str,
    as_str_list,
    quantity,
)

__all__ = [
    "allocation_from_dict",
    "allocation_to_dict",
    "device_class_from_dict",
    "qualify",
    "resource_claim_from_dict",
    "resource_slice_from_dict",
]

_SCALAR_KINDS = (("int", "int"), ("bool", "bool"), ("string", "string"), ("version", "version"))
_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


def qualify(name: str, driver: str) -> str:
    """A fully qualified attribute or capacity name: one without a domain is the driver's."""
    return name if "/" in name else f"{driver}/{name}"


def _meta(
    obj: Mapping[str, Any], kind: str, *, namespaced: bool
) -> tuple[Where, Mapping[str, Any]]:
    if not isinstance(obj, Mapping):
        raise Where(kind, "?").error("", "must be an object")
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default") if namespaced else ""
    where = Where(kind, f"{namespace}/{name}" if namespaced else name)
    if not name:
        raise where.error("metadata.name", "required")
    return where, meta


def _attribute(raw: Any, where: Where, path: str) -> DeviceAttribute:
    value = as_map(raw, where, path)
    for key, kind in _SCALAR_KINDS:
        if key in value:
            item = value[key]
            if kind == "int" and (isinstance(item, bool) or not isinstance(item, int)):
                raise where.error(f"{path}.{key}", "must be an integer")
            if kind == "bool" and not isinstance(item, bool):
                raise where.error(f"{path}.{key}", "must be a boolean")
            if kind in ("string", "version") and not isinstance(item, str):
                raise where.error(f"{path}.{key}", "must be a string")
            return DeviceAttribute(kind, (item,))
        list_key = f"{key}s"
        if list_key in value:
            items = as_list(value[list_key], where, f"{path}.{list_key}")
            if not items:
                raise where.error(f"{path}.{list_key}", "must not be empty")
            return DeviceAttribute(kind, tuple(items), is_list=True)
    raise where.error(
        path, "exactly one of int, bool, string, version (or their lists) is required"
    )


def _policy(raw: Any, where: Where, path: str) -> CapacityRequestPolicy | None:
    if raw is None:
        return None
    policy = as_map(raw, where, path)
    default = quantity(policy["default"], where, f"{path}.default") if "default" in policy else None
    values = tuple(
        quantity(v, where, f"{path}.validValues[{i}]")
        for i, v in enumerate(as_list(policy.get("validValues"), where, f"{path}.validValues"))
    )
    rng = policy.get("validRange")
    if rng is None:
        return CapacityRequestPolicy(default=default, valid_values=values)
    rmap = as_map(rng, where, f"{path}.validRange")

    def opt(key: str) -> Decimal | None:
        return (
            quantity(rmap[key], where, f"{path}.validRange.{key}")
            if rmap.get(key) is not None
            else None
        )

    return CapacityRequestPolicy(
        default=default,
        valid_values=values,
        valid_min=opt("min"),
        valid_max=opt("max"),
        valid_step=opt("step"),
        has_range=True,
    )


def _counters(raw: Any, where: Where, path: str) -> dict[str, Decimal]:
    return {
        name: quantity(
            as_map(c, where, f"{path}.{name}").get("value"), where, f"{path}.{name}.value"
        )
        for name, c in as_map(raw, where, path).items()
    }


def _taint(raw: Any, where: Where, path: str) -> DeviceTaint:
    taint = as_map(raw, where, path)
    effect = as_str(taint.get("effect"), where, f"{path}.effect", required=True)
    if effect not in _TAINT_EFFECTS:
        raise where.error(f"{path}.effect", f"unsupported value {effect!r}")
    return DeviceTaint(
        as_str(taint.get("key"), where, f"{path}.key", required=True),
        as_str(taint.get("value"), where, f"{path}.value"),
        effect,
    )


def _device(raw: Any, driver: str, where: Where, path: str) -> Device:
    dev = as_map(raw, where, path)
    name = as_str(dev.get("name"), where, f"{path}.name", required=True)
    attrs = {
        qualify(k, driver): _attribute(v, where, f"{path}.attributes[{k}]")
        for k, v in as_map(dev.get("attributes"), where, f"{path}.attributes").items()
    }
    capacity = {}
    for key, value in as_map(dev.get("capacity"), where, f"{path}.capacity").items():
        cap = as_map(value, where, f"{path}.capacity[{key}]")
        capacity[key] = DeviceCapacity(
            quantity(cap.get("value"), where, f"{path}.capacity[{key}].value"),
            _policy(cap.get("requestPolicy"), where, f"{path}.capacity[{key}].requestPolicy"),
        )
    consumes = tuple(
        CounterConsumption(
            as_str(
                as_map(c, where, f"{path}.consumesCounters[{i}]").get("counterSet"),
                where,
                f"{path}.consumesCounters[{i}].counterSet",
                required=True,
            ),
            _counters(c.get("counters"), where, f"{path}.consumesCounters[{i}].counters"),
        )
        for i, c in enumerate(
            as_list(dev.get("consumesCounters"), where, f"{path}.consumesCounters")
        )
    )
    return Device(
        name=name,
        attributes=attrs,
        capacity=capacity,
        allow_multiple_allocations=as_bool(
            dev.get("allowMultipleAllocations"), where, f"{path}.allowMultipleAllocations"
        ),
        consumes_counters=consumes,
        taints=tuple(
            _taint(t, where, f"{path}.taints[{i}]")
            for i, t in enumerate(as_list(dev.get("taints"), where, f"{path}.taints"))
        ),
        binds_to_node=as_bool(dev.get("bindsToNode"), where, f"{path}.bindsToNode"),
        binding_conditions=as_str_list(
            dev.get("bindingConditions"), where, f"{path}.bindingConditions"
        ),
        binding_failure_conditions=as_str_list(
            dev.get("bindingFailureConditions"), where, f"{path}.bindingFailureConditions"
        ),
        node_name=as_str(dev.get("nodeName"), where, f"{path}.nodeName"),
        node_selector=as_map(dev["nodeSelector"], where, f"{path}.nodeSelector")
        if dev.get("nodeSelector") is not None
        else None,
        all_nodes=as_bool(dev.get("allNodes"), where, f"{path}.allNodes"),
    )


def resource_slice_from_dict(obj: Mapping[str, Any]) -> ResourceSlice:
    where, meta = _meta(obj, "ResourceSlice", namespaced=False)
    spec = as_map(obj.get("spec"), where, "spec")
    driver = as_str(spec.get("driver"), where, "spec.driver", required=True)
    pool = as_map(spec.get("pool"), where, "spec.pool")
    node_selector = spec.get("nodeSelector")
    node_name = as_str(spec.get("nodeName"), where, "spec.nodeName")
    all_nodes = as_bool(spec.get("allNodes"), where, "spec.allNodes")
    per_device = as_bool(spec.get("perDeviceNodeSelection"), where, "spec.perDeviceNodeSelection")
    chosen = sum((bool(node_name), node_selector is not None, all_nodes, per_device))
    if chosen != 1:
        raise where.error(
            "spec",
            "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required",
        )
    count = as_int(pool.get("resourceSliceCount"), where, "spec.pool.resourceSliceCount")
    if count <= 0:
        raise where.error("spec.pool.resourceSliceCount", "must be positive")
    counter_sets = tuple(
        CounterSet(
            as_str(
                as_map(c, where, f"spec.sharedCounters[{i}]").get("name"),
                where,
                f"spec.sharedCounters[{i}].name",
                required=True,
            ),
            _counters(c.get("counters"), where, f"spec.sharedCounters[{i}].counters"),
        )
        for i, c in enumerate(as_list(spec.get("sharedCounters"), where, "spec.sharedCounters"))
    )
    return ResourceSlice(
        name=str(meta["name"]),
        driver=driver,
        pool=as_str(pool.get("name"), where, "spec.pool.name", required=True),
        pool_generation=as_int(pool.get("generation"), where, "spec.pool.generation"),
        resource_slice_count=count,
        node_name=node_name,
        node_selector=as_map(node_selector, where, "spec.nodeSelector")
        if node_selector is not None
        else None,
        all_nodes=all_nodes,
        per_device_node_selection=per_device,
        devices=tuple(
            _device(d, driver, where, f"spec.devices[{i}]")
            for i, d in enumerate(as_list(spec.get("devices"), where, "spec.devices"))
        ),
        shared_counters=counter_sets,
    )


def _configs(raw: Any, where: Where, path: str) -> tuple[DeviceConfig, ...]:
    out = []
    for i, c in enumerate(as_list(raw, where, path)):
        cfg = as_map(c, where, f"{path}[{i}]")
        opaque = cfg.get("opaque")
        out.append(
            DeviceConfig(
                as_str_list(cfg.get("requests"), where, f"{path}[{i}].requests"),
                as_map(opaque, where, f"{path}[{i}].opaque") if opaque is not None else None,
            )
        )
    return tuple(out)


def _selectors(raw: Any, where: Where, path: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(as_list(raw, where, path)):
        cel = as_map(as_map(s, where, f"{path}[{i}]").get("cel"), where, f"{path}[{i}].cel")
        out.append(
            as_str(cel.get("expression"), where, f"{path}[{i}].cel.expression", required=True)
        )
    return tuple(out)


def device_class_from_dict(obj: Mapping[str, Any]) -> DeviceClass:
    where, meta = _meta(obj, "DeviceClass", namespaced=False)
    spec = as_map(obj.get("spec"), where, "spec")
    return DeviceClass(
        name=str(meta["name"]),
        selectors=_selectors(spec.get("selectors"), where, "spec.selectors"),
        config=_configs(spec.get("config"), where, "spec.config"),
        extended_resource_name=as_str(
            spec.get("extendedResourceName"), where, "spec.extendedResourceName"
        ),
    )


def _toleration(raw: Any, where: Where, path: str) -> DeviceToleration:
    tol = as_map(raw, where, path)
    operator = as_str(tol.get("operator"), where, f"{path}.operator") or "Equal"
    if operator not in ("Equal", "Exists"):
        raise where.error(f"{path}.operator", f"unsupported value {operator!r}")
    seconds = tol.get("tolerationSeconds")
    return DeviceToleration(
        key=as_str(tol.get("key"), where, f"{path}.key"),
        operator=operator,
        value=as_str(tol.get("value"), where, f"{path}.value"),
        effect=as_str(tol.get("effect"), where, f"{path}.effect"),
        toleration_seconds=as_int(seconds, where, f"{path}.tolerationSeconds")
        if seconds is not None
        else None,
    )


def _sub_request(raw: Any, name: str, where: Where, path: str) -> DeviceSubRequest:
    req = as_map(raw, where, path)
    mode = as_str(req.get("allocationMode"), where, f"{path}.allocationMode") or "ExactCount"
    if mode not in ALLOCATION_MODES:
        raise where.error(f"{path}.allocationMode", f"unsupported value {mode!r}")
    count = as_int(
        req.get("count"), where, f"{path}.count", default=1 if mode == "ExactCount" else 0
    )
    if mode == "ExactCount" and count <= 0:
        raise where.error(f"{path}.count", "must be positive")
    capacity = req.get("capacity")
    requests = None
    if capacity is not None:
        cap = as_map(capacity, where, f"{path}.capacity")
        requests = {
            k: quantity(v, where, f"{path}.capacity.requests[{k}]")
            for k, v in as_map(cap.get("requests"), where, f"{path}.capacity.requests").items()
        }
    return DeviceSubRequest(
        name=name,
        device_class_name=as_str(
            req.get("deviceClassName"), where, f"{path}.deviceClassName", required=True
        ),
        selectors=_selectors(req.get("selectors"), where, f"{path}.selectors"),
        allocation_mode=mode,
        count=count,
        admin_access=as_bool(req.get("adminAccess"), where, f"{path}.adminAccess"),
        tolerations=tuple(
            _toleration(t, where, f"{path}.tolerations[{i}]")
            for i, t in enumerate(as_list(req.get("tolerations"), where, f"{path}.tolerations"))
        ),
        capacity_requests=requests,
    )


def _request(raw: Any, where: Where, path: str) -> DeviceRequest:
    req = as_map(raw, where, path)
    name = as_str(req.get("name"), where, f"{path}.name", required=True)
    exactly, first = req.get("exactly"), req.get("firstAvailable")
    if (exactly is None) == (first is None):
        raise where.error(path, "exactly one of exactly, firstAvailable is required")
    if exactly is not None:
        return DeviceRequest(name, exactly=_sub_request(exactly, name, where, f"{path}.exactly"))
    subs = []
    for i, sub in enumerate(as_list(first, where, f"{path}.firstAvailable")):
        sub_path = f"{path}.firstAvailable[{i}]"
        sub_name = as_str(
            as_map(sub, where, sub_path).get("name"), where, f"{sub_path}.name", required=True
        )
        subs.append(_sub_request(sub, sub_name, where, sub_path))
    if not subs:
        raise where.error(f"{path}.firstAvailable", "must not be empty")
    return DeviceRequest(name, first_available=tuple(subs))


def _constraint(raw: Any, where: Where, path: str) -> DeviceConstraint:
    con = as_map(raw, where, path)
    return DeviceConstraint(
        requests=as_str_list(con.get("requests"), where, f"{path}.requests"),
        match_attribute=as_str(con.get("matchAttribute"), where, f"{path}.matchAttribute"),
        distinct_attribute=as_str(con.get("distinctAttribute"), where, f"{path}.distinctAttribute"),
    )


def resource_claim_from_dict(obj: Mapping[str, Any]) -> ResourceClaim:
    where, meta = _meta(obj, "ResourceClaim", namespaced=True)
    devices = as_map(as_map(obj.get("spec"), where, "spec").get("devices"), where, "spec.devices")
    status = as_map(obj.get("status"), where, "status")
    allocation = status.get("allocation")
    p = "spec.devices"
    return ResourceClaim(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        requests=tuple(
            _request(r, where, f"{p}.requests[{i}]")
            for i, r in enumerate(as_list(devices.get("requests"), where, f"{p}.requests"))
        ),
        constraints=tuple(
            _constraint(c, where, f"{p}.constraints[{i}]")
            for i, c in enumerate(as_list(devices.get("constraints"), where, f"{p}.constraints"))
        ),
        config=_configs(devices.get("config"), where, f"{p}.config"),
        allocation=_allocation(allocation, where, "status.allocation")
        if allocation is not None
        else None,
        reserved_for=tuple(
            as_map(r, where, f"status.reservedFor[{i}]")
            for i, r in enumerate(as_list(status.get("reservedFor"), where, "status.reservedFor"))
        ),
    )


def _allocation(raw: Any, where: Where, path: str) -> AllocationResult:
    alloc = as_map(raw, where, path)
    devices = as_map(alloc.get("devices"), where, f"{path}.devices")
    results = []
    for i, r in enumerate(as_list(devices.get("results"), where, f"{path}.devices.results")):
        rp = f"{path}.devices.results[{i}]"
        res = as_map(r, where, rp)
        consumed = res.get("consumedCapacity")
        admin = res.get("adminAccess")
        results.append(
            DeviceRequestResult(
                request=as_str(res.get("request"), where, f"{rp}.request", required=True),
                driver=as_str(res.get("driver"), where, f"{rp}.driver", required=True),
                pool=as_str(res.get("pool"), where, f"{rp}.pool", required=True),
                device=as_str(res.get("device"), where, f"{rp}.device", required=True),
                admin_access=as_bool(admin, where, f"{rp}.adminAccess")
                if admin is not None
                else None,
                tolerations=tuple(
                    _toleration(t, where, f"{rp}.tolerations[{j}]")
                    for j, t in enumerate(
                        as_list(res.get("tolerations"), where, f"{rp}.tolerations")
                    )
                ),
                binding_conditions=as_str_list(
                    res.get("bindingConditions"), where, f"{rp}.bindingConditions"
                ),
                binding_failure_conditions=as_str_list(
                    res.get("bindingFailureConditions"), where, f"{rp}.bindingFailureConditions"
                ),
                share_id=as_str(res.get("shareID"), where, f"{rp}.shareID") or None,
                consumed_capacity={
                    k: quantity(v, where, f"{rp}.consumedCapacity[{k}]")
                    for k, v in as_map(consumed, where, f"{rp}.consumedCapacity").items()
                }
                if consumed is not None
                else None,
            )
        )
    configs = []
    for i, c in enumerate(as_list(devices.get("config"), where, f"{path}.devices.config")):
        cp = f"{path}.devices.config[{i}]"
        cfg = as_map(c, where, cp)
        configs.append(
            AllocatedConfig(
                as_str(cfg.get("source"), where, f"{cp}.source", required=True),
                as_str_list(cfg.get("requests"), where, f"{cp}.requests"),
                as_map(cfg["opaque"], where, f"{cp}.opaque")
                if cfg.get("opaque") is not None
                else None,
            )
        )
    selector = alloc.get("nodeSelector")
    return AllocationResult(
        tuple(results),
        tuple(configs),
        as_map(selector, where, f"{path}.nodeSelector") if selector is not None else None,
    )


def allocation_from_dict(obj: Mapping[str, Any], *, name: str = "") -> AllocationResult:
    """A ``status.allocation`` dict (as written by :func:`allocation_to_dict`)."""
    return _allocation(obj, Where("ResourceClaim", name), "status.allocation")


def _format_quantity(value: Decimal) -> str:
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return str(value)


def allocation_to_dict(result: AllocationResult) -> dict[str, Any]:
    """The ``status.allocation`` wire shape of an allocation."""
    results: list[dict[str, Any]] = []
    for r in result.results:
        entry: dict[str, Any] = {
            "request": r.request,
            "driver": r.driver,
            "pool": r.pool,
            "device": r.device,
        }
        if r.admin_access is not None:
            entry["adminAccess"] = r.admin_access
        if r.tolerations:
            entry["tolerations"] = [t.to_dict() for t in r.tolerations]
        if r.binding_conditions:
            entry["bindingConditions"] = list(r.binding_conditions)
        if r.binding_failure_conditions:
            entry["bindingFailureConditions"] = list(r.binding_failure_conditions)
        if r.share_id is not None:
            entry["shareID"] = r.share_id
        if r.consumed_capacity is not None:
            entry["consumedCapacity"] = {
                k: _format_quantity(v) for k, v in r.consumed_capacity.items()
            }
        results.append(entry)
    devices: dict[str, Any] = {"results": results}
    if result.config:
        configs = []
        for c in result.config:
            cfg: dict[str, Any] = {"source": c.source}
            if c.requests:
                cfg["requests"] = list(c.requests)
            if c.opaque is not None:
                cfg["opaque"] = dict(c.opaque)
            configs.append(cfg)
        devices["config"] = configs
    out: dict[str, Any] = {"devices": devices}
    if result.node_selector is not None:
        out["nodeSelector"] = dict(result.node_selector)
    return out
