"""The wait for device binding conditions before a pod's Binding (``DRADeviceBindingConditions``).

kube-scheduler's ``DynamicResources`` PreBind: once a claim's allocation is written, a device
result that carries ``bindingConditions`` must see each of them ``True`` among the conditions
of its entry in the claim's ``status.devices`` (same driver, pool and device) before the pod is
bound; one of its ``bindingFailureConditions`` being ``True`` fails the bind
(``isClaimReadyForBinding``), and so does a wait longer than the binding timeout
(``isClaimTimeout``, ten minutes by default). A failed wait rolls the task back as any failed
bind: the claims written for it are released. The allocator puts such results only when the
``DRADeviceBindingConditions`` and ``DRAResourceClaimDeviceStatus`` gates are on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.cache.interface import WriteError

__all__ = ["BINDING_TIMEOUT", "await_binding_conditions", "claim_ready_for_binding"]

BINDING_TIMEOUT = 600.0
"""kube-scheduler's ``DynamicResourcesArgs.bindingTimeout`` default, in seconds."""


def _waits(entry: Any) -> bool:
    return any(r.binding_conditions for r in entry.allocation.results)


def claim_ready_for_binding(claim: Mapping[str, Any]) -> bool:
    """``isClaimReadyForBinding``: True when every binding condition of every result is True;
    raises :class:`WriteError` when a binding failure condition is True."""
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    if not allocation:
        return False
    name = (claim.get("metadata") or {}).get("name", "")
    devices = [d for d in status.get("devices") or [] if isinstance(d, Mapping)]
    for result in (allocation.get("devices") or {}).get("results") or []:
        wanted = result.get("bindingConditions") or []
        if not wanted:
            continue
        device = next((d for d in devices if (d.get("driver"), d.get("pool"), d.get("device"))
                       == (result.get("driver"), result.get("pool"), result.get("device"))),
                      None)
        if device is None:
            return False
        conditions = {str(c.get("type")): c for c in device.get("conditions") or []
                      if isinstance(c, Mapping)}
        for kind in result.get("bindingFailureConditions") or []:
            failed = conditions.get(kind)
            if failed is not None and failed.get("status") == "True":
                raise WriteError(f"claim {name} binding failed: reason={failed.get('reason', '')}"
                                 f", message={str(failed.get('message', ''))!r}", status=0)
        if any((conditions.get(kind) or {}).get("status") != "True" for kind in wanted):
            return False
    return True


def await_binding_conditions(writer: Any, entries: list[Any], *, timeout: float,
                             interval: float, clock: Callable[[], float],
                             sleep: Callable[[float], None]) -> None:
    """Wait until every claim of ``entries`` whose allocation has binding conditions is ready
    for binding; raises :class:`WriteError` on a failure condition, a claim gone, or after
    ``timeout`` seconds."""
    waiting = {entry.key: entry for entry in entries if _waits(entry)}
    if not waiting:
        return
    deadline = clock() + timeout
    while True:
        for key in list(waiting):
            namespace, name = key.split("/", 1)
            claim = writer.get_resource_claim(namespace=namespace, name=name)
            if claim is None:
                raise WriteError(f"ResourceClaim {key} not found", status=0)
            if claim_ready_for_binding(claim):
                del waiting[key]
        if not waiting:
            return
        if clock() >= deadline:
            name = next(iter(waiting)).split("/", 1)[1]
            raise WriteError(f"claim {name} binding timeout", status=0)
        sleep(interval)
