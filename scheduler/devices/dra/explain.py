"""Why a search found no allocation: the Unschedulable reason naming claim, request and why."""

from __future__ import annotations

from scheduler.devices.dra.search import Candidate, Search
from scheduler.devices.dra.state import DeviceID

__all__ = ["explain"]


def explain(search: Search) -> str:
    """Why nothing fits: the deepest claim and request the search reached, and for it whether
    no device matched, too few are free, or the claim's constraints could not be met."""

    ci = max(search.why.claim, 0)
    if not search.claims:
        return "no claims"
    claim = search.claims[ci]
    if any(p.incomplete for p in search.pools):
        incomplete = ", ".join(str(p) for p in search.pools if p.incomplete)
        suffix = f" (resource pool {incomplete} is being updated)"
    else:
        suffix = ""
    for (c, ri, si), data in search.request_data.items():
        if c != ci:
            continue
        req = data.request
        name = f"{data.parent.name}/{req.name}" if data.parent else req.name
        matching = free = 0
        for pool in search.pools:
            if pool.incomplete or pool.invalid:
                continue
            for s in pool.slices:
                for device in s.devices:
                    cand = Candidate(DeviceID(s.driver, s.pool, device.name), device, s, pool)
                    if not search._selectable((c, ri, si), data, cand):
                        continue
                    matching += 1
                    busy = not req.admin_access and search.allocated.in_use(cand.id)
                    if search.features.consumable_capacity and not busy:
                        busy = not search._capacity_fits(req, cand)
                    if search.features.device_taints and search._tainted(device, req):
                        busy = True
                    free += not busy
        needed = data.num_devices if data.all_devices is None else max(data.num_devices, 1)
        if matching == 0:
            return (
                f"claim {claim.key}, request {name}: no device of class "
                f"{data.device_class.name} matches the selectors{suffix}"
            )
        if free < needed:
            return (
                f"claim {claim.key}, request {name}: not enough capacity: {needed} device(s) "
                f"needed, {matching} match, {free} free{suffix}"
            )
    if claim.constraints:
        return f"claim {claim.key}: constraint unsatisfiable on the free devices{suffix}"
    request = search.why.request or (claim.requests[0].name if claim.requests else "")
    return (
        f"claim {claim.key}, request {request}: not enough capacity (devices, counters or "
        f"capacity taken by the other requests){suffix}"
    )
