"""The allocator's depth-first search (kube-scheduler's ``allocateOne``/``allocateDevice``).

One ``Search`` per ``allocate`` call holds the pools, per-request data, the devices being
allocated in this call, consumed counters and capacity, and the per-claim partial results;
every change made while descending is undone when backtracking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from scheduler.devices.dra.capacity import Constraint, consumed_capacity, fits
from scheduler.devices.dra.cel import CELError, compile_selector, device_matches
from scheduler.devices.dra.model import (
    AllocatedConfig,
    AllocationResult,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceRequestResult,
    DeviceSubRequest,
    ResourceClaim,
    ResourceSlice,
)
from scheduler.devices.dra.pools import Pool, gather_pools, node_matches
from scheduler.devices.dra.results import claim_configs, node_selector
from scheduler.devices.dra.state import AllocatedState, DeviceID, Features

__all__ = ["Candidate", "MissingClass", "RequestData", "Search"]


@dataclass(slots=True)
class Candidate:
    id: DeviceID
    device: Device
    slice: ResourceSlice
    pool: Pool


@dataclass(slots=True)
class RequestData:
    request: DeviceSubRequest
    parent: DeviceRequest | None
    device_class: DeviceClass
    num_devices: int
    all_devices: list[Candidate] | None = None
    selected_sub: int = 0


@dataclass(slots=True)
class _Placed:
    request: str
    parent: str
    candidate: Candidate
    admin_access: bool
    share_id: str | None = None
    consumed: dict[str, Decimal] | None = None


@dataclass(slots=True)
class _Why:
    """The deepest point the search reached, for the Unschedulable reason."""

    claim: int = -1
    request: str = ""
    depth: int = -1
    extra: list[str] = field(default_factory=list)


class _Stop(Exception):
    """The results would exceed the claim limit (errAllocationResultMaxSizeExceeded)."""


class Search:
    def __init__(
        self,
        *,
        node_name: str,
        node_labels: Mapping[str, str],
        claims: Sequence[ResourceClaim],
        classes: Mapping[str, DeviceClass],
        slices: Sequence[ResourceSlice],
        allocated: AllocatedState,
        features: Features,
        share_id: Callable[[], str],
        error: type[Exception],
        max_results: int,
    ) -> None:
        self.node_name = node_name
        self.node_labels = node_labels
        self.claims = list(claims)
        self.classes = classes
        self.allocated = allocated
        self.features = features
        self.share_id = share_id
        self.error = error
        self.max_results = max_results
        self.pools = gather_pools(
            node_name=node_name, node_labels=node_labels, slices=slices, features=features
        )
        self.invalid_pools = [p for p in self.pools if p.invalid]
        self.request_data: dict[tuple[int, int, int], RequestData] = {}
        self.constraints: list[list[Constraint]] = []
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Decimal]] = {}
        self.available_counters: dict[str, dict[str, dict[str, Decimal]]] = {}
        self.consumed_counters: dict[str, dict[str, dict[str, Decimal]]] = {}
        self.placed: list[list[_Placed]] = [[] for _ in self.claims]
        self.why = _Why()
        self.missing_class = ""
        self._validate()

    # --- validation (the first half of Allocate) -------------------------------------------

    def _validate(self) -> None:
        for ci, claim in enumerate(self.claims):
            minimum = 0
            for ri, request in enumerate(claim.requests):
                if request.first_available:
                    if not self.features.prioritized_list:
                        raise self.error(
                            f"claim {claim.key}, request {request.name}: has "
                            "subrequests, but the DRAPrioritizedList feature is disabled"
                        )
                    lowest = None
                    for si, sub in enumerate(request.first_available):
                        self._check_capacity_gate(claim, sub, sub=True)
                        data = self._request_data(ci, sub, request, (ci, ri, si))
                        self.request_data[(ci, ri, si)] = data
                        lowest = (
                            data.num_devices if lowest is None else min(lowest, data.num_devices)
                        )
                    minimum += lowest or 0
                else:
                    assert request.exactly is not None
                    self._check_capacity_gate(claim, request.exactly, sub=False)
                    data = self._request_data(ci, request.exactly, None, (ci, ri, 0))
                    self.request_data[(ci, ri, 0)] = data
                    minimum += data.num_devices
            if minimum > self.max_results:
                raise self.error(
                    f"claim {claim.key}: number of requested devices {minimum} "
                    f"exceeds the claim limit of {self.max_results}"
                )
            constraints = []
            for i, c in enumerate(claim.constraints):
                if not c.match_attribute and not c.distinct_attribute:
                    raise self.error(
                        f"claim {claim.key}, constraint #{i}: empty constraint "
                        "(unsupported constraint type?)"
                    )
                constraints.append(Constraint(c, list_types=self.features.list_type_attributes))
            self.constraints.append(constraints)

    def _check_capacity_gate(
        self, claim: ResourceClaim, req: DeviceSubRequest, *, sub: bool
    ) -> None:
        if not self.features.consumable_capacity and req.capacity_requests is not None:
            what = "subrequest" if sub else "request"
            raise self.error(
                f"claim {claim.key}, {what} {req.name}: has capacity requests, but "
                "the DRAConsumableCapacity feature is disabled"
            )

    def _request_data(
        self,
        ci: int,
        req: DeviceSubRequest,
        parent: DeviceRequest | None,
        key: tuple[int, int, int],
    ) -> RequestData:
        claim = self.claims[ci]
        if req.admin_access and not self.features.admin_access:
            raise self.error(
                f"claim {claim.key}, request {req.name}: admin access is requested, "
                "but the feature is disabled"
            )
        device_class = self.classes.get(req.device_class_name)
        if device_class is None:
            self.missing_class = (
                f"claim {claim.key}, request {req.name}: device class "
                f"{req.device_class_name} does not exist"
            )
            raise MissingClass(self.missing_class)
        data = RequestData(req, parent, device_class, req.count)
        if req.allocation_mode == "All":
            data.all_devices = []
            for pool in self.pools:
                if pool.incomplete:
                    raise self.error(
                        f"claim {claim.key}, request {req.name}: asks for all devices, "
                        f"but resource pool {pool} is currently being updated"
                    )
                if pool.invalid:
                    raise self.error(
                        f"claim {claim.key}, request {req.name}: asks for all devices, "
                        f"but resource pool {pool} is currently invalid"
                    )
                for s in pool.slices:
                    for device in s.devices:
                        cand = Candidate(DeviceID(s.driver, s.pool, device.name), device, s, pool)
                        if not self._selectable(key, data, cand):
                            continue
                        if self.features.consumable_capacity and not self._capacity_fits(req, cand):
                            continue
                        data.all_devices.append(cand)
            data.num_devices = len(data.all_devices)
        return data

    # --- device checks ----------------------------------------------------------------------

    def _selectable(self, key: tuple[int, int, int], data: RequestData, cand: Candidate) -> bool:
        device = cand.device
        if device.binding_conditions and not self.features.binding_and_status:
            return False
        mkey = (cand.id, *key)
        known = self.matches.get(mkey)
        if known is not None:
            return known
        ok = self._selectors_match(
            key[0], cand, data.device_class, data.device_class.selectors
        ) and self._selectors_match(key[0], cand, None, data.request.selectors)
        if ok and cand.slice.per_device_node_selection:
            ok = node_matches(
                node_name=self.node_name,
                node_labels=self.node_labels,
                target_name=device.node_name,
                all_nodes=device.all_nodes,
                selector=device.node_selector,
            )
        self.matches[mkey] = ok
        return ok

    def _selectors_match(
        self, ci: int, cand: Candidate, device_class: DeviceClass | None, selectors: Sequence[str]
    ) -> bool:
        for i, expression in enumerate(selectors):
            compiled = compile_selector(expression)
            if compiled.error:
                raise self.error(f"{self._owner(ci, device_class)}: selector #{i}: CEL compile "
                                 f"error: {compiled.error}")
            try:
                if not device_matches(
                    compiled,
                    cand.device,
                    cand.id.driver,
                    list_types=self.features.list_type_attributes,
                ):
                    return False
            except CELError as exc:
                raise self.error(
                    f"{self._owner(ci, device_class)}: selector #{i} on device {cand.id}: CEL "
                    f"runtime error: {exc}"
                ) from None
        return True

    def _owner(self, ci: int, device_class: DeviceClass | None) -> str:
        """Whose selector an error is about (built only for an error)."""
        return (f"class {device_class.name}" if device_class is not None
                else f"claim {self.claims[ci].key}")

    def _capacity_fits(self, req: DeviceSubRequest, cand: Candidate) -> bool:
        return fits(
            requests=req.capacity_requests,
            capacity=cand.device.capacity,
            allocated=self.allocated.capacity.get(cand.id),
            allocating=self.allocating_capacity.get(cand.id),
        )

    def _in_use(self, device: DeviceID) -> bool:
        return self.allocated.in_use(device) or bool(self.allocating.get(device))

    def _capacity_in_use(self, device: DeviceID) -> bool:
        return device in self.allocated.capacity or device in self.allocating_capacity

    def _available(self, pool: Pool) -> dict[str, dict[str, Decimal]]:
        key = str(pool)
        available = self.available_counters.get(key)
        if available is None:
            available = {name: dict(cs.counters) for name, cs in pool.counter_sets.items()}
            for s in (*pool.slices, *pool.other_slices):
                for device in s.devices:
                    if not self.allocated.is_allocated(DeviceID(s.driver, s.pool, device.name)):
                        continue
                    for use in device.consumes_counters:
                        counters = available.get(use.counter_set, {})
                        for name, amount in use.counters.items():
                            if name in counters:
                                counters[name] -= amount
            self.available_counters[key] = available
        return available

    def _take_counters(self, cand: Candidate, sign: int) -> None:
        consumed = self.consumed_counters.setdefault(str(cand.pool), {})
        for use in cand.device.consumes_counters:
            counters = consumed.setdefault(use.counter_set, {})
            for name, amount in use.counters.items():
                counters[name] = counters.get(name, Decimal(0)) + sign * amount

    def _counters_fit(self, cand: Candidate) -> bool:
        available = self._available(cand.pool)
        self._take_counters(cand, 1)
        consumed = self.consumed_counters[str(cand.pool)]
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for name, amount in counters.items():
                if amount < used.get(name, Decimal(0)):
                    self._take_counters(cand, -1)
                    return False
        return True

    def _tainted(self, device: Device, req: DeviceSubRequest) -> bool:
        for taint in device.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(
                t.tolerates(taint) for t in req.tolerations
            ):
                return True
        return False

    # --- the search (allocateOne) -----------------------------------------------------------

    def run(self) -> bool:
        try:
            return self._one(0, 0, 0, 0, False, (0, 0, 0))
        except _Stop:
            return False

    def _note(self, ci: int, request: str) -> None:
        depth = sum(len(p) for p in self.placed)
        if (ci, depth) >= (self.why.claim, self.why.depth):
            self.why.claim, self.why.depth, self.why.request = ci, depth, request

    def _one(
        self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int]
    ) -> bool:
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False, (0, 0, 0))
            except _Stop:
                return False
        data = self.request_data[(ci, ri, si)]
        if not in_sub and data.parent is not None:
            all_exceeded = True
            for sub in range(len(data.parent.first_available)):
                try:
                    ok = self._one(ci, ri, sub, di, True, (0, 0, 0))
                except _Stop:
                    continue
                all_exceeded = False
                if ok:
                    self.request_data[(ci, ri, 0)].selected_sub = sub
                    return True
            if all_exceeded:
                raise _Stop
            return False
        request = data.request
        if data.all_devices is not None and not data.all_devices:
            self._note(ci, request.name)
            return False
        if di >= data.num_devices:
            return self._one(ci, ri + 1, 0, 0, False, (0, 0, 0))
        if len(self.placed[ci]) + data.num_devices - di > self.max_results:
            raise _Stop
        if data.all_devices is not None:
            undo = self._place(ci, ri, si, data, data.all_devices[di], must=True)
            if undo is None:
                self._note(ci, request.name)
                return False
            try:
                if self._one(ci, ri, si, di + 1, in_sub, (0, 0, 0)):
                    return True
            except _Stop:
                undo()
                raise
            undo()
            return False
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            for sli in range(start[1] if pi == start[0] else 0, len(pool.slices)):
                s = pool.slices[sli]
                first = start[2] if (pi, sli) == start[:2] else 0
                for dvi in range(first, len(s.devices)):
                    device = s.devices[dvi]
                    cand = Candidate(DeviceID(pool.driver, pool.name, device.name), device, s, pool)
                    if request.admin_access:
                        if ci in self.allocating.get(cand.id, ()):
                            continue
                    elif self._in_use(cand.id):
                        continue
                    if not self._selectable((ci, ri, si), data, cand):
                        continue
                    if self.features.consumable_capacity and not self._capacity_fits(request, cand):
                        continue
                    undo = self._place(ci, ri, si, data, cand, must=False)
                    if undo is None:
                        continue
                    try:
                        if self._one(ci, ri, si, di + 1, in_sub, (pi, sli, dvi + 1)):
                            return True
                    except _Stop:
                        undo()
                        raise
                    undo()
        self._note(ci, request.name)
        return False

    def _place(
        self, ci: int, ri: int, si: int, data: RequestData, cand: Candidate, *, must: bool
    ) -> Callable[[], None] | None:
        """``allocateDevice``: None when the device cannot be taken, else the undo."""
        request = data.request
        multi = self.features.consumable_capacity and cand.device.allow_multiple_allocations
        if not multi and request.admin_access and ci in self.allocating.get(cand.id, ()):
            return None
        if not request.admin_access and self._in_use(cand.id):
            return None
        if not self.features.partitionable_devices and cand.device.consumes_counters:
            return None
        if self.features.device_taints and self._tainted(cand.device, request):
            return None
        if self.features.consumable_capacity and not self._capacity_fits(request, cand):
            return None
        base = data.parent.name if data.parent is not None else request.name
        sub = request.name if data.parent is not None else ""
        constraints = self.constraints[ci]
        for i, constraint in enumerate(constraints):
            if not constraint.add(base, sub, cand.device):
                for earlier in constraints[:i]:
                    earlier.remove(base, sub)
                if must:
                    raise self.error(
                        f"claim {self.claims[ci].key}, request {request.name}: cannot "
                        f"add device {cand.id} because a claim constraint would not "
                        "be satisfied"
                    )
                return None
        counters = cand.device.consumes_counters and not (multi and self._capacity_in_use(cand.id))
        if counters and not self._counters_fit(cand):
            for constraint in constraints:
                constraint.remove(base, sub)
            return None
        consumed: dict[str, Decimal] | None = None
        share: str | None = None
        if multi:
            consumed = consumed_capacity(request.capacity_requests, cand.device.capacity)
            share = self.share_id()
            total = self.allocating_capacity.setdefault(cand.id, {})
            for name, amount in consumed.items():
                total[name] = total.get(name, Decimal(0)) + amount
        else:
            self.allocating.setdefault(cand.id, set()).add(ci)
        self.placed[ci].append(
            _Placed(
                request.name,
                data.parent.name if data.parent else "",
                cand,
                request.admin_access,
                share,
                consumed or None,
            )
        )

        def undo() -> None:
            self.placed[ci].pop()
            for constraint in constraints:
                constraint.remove(base, sub)
            if counters:
                self._take_counters(cand, -1)
            if consumed is not None:
                total = self.allocating_capacity[cand.id]
                for name, amount in consumed.items():
                    total[name] -= amount
                if not any(total.values()):
                    del self.allocating_capacity[cand.id]
            else:
                self.allocating[cand.id].discard(ci)

        return undo

    # --- the result -------------------------------------------------------------------------

    def results(self) -> list[AllocationResult]:
        out = []
        for ci, claim in enumerate(self.claims):
            results = []
            for p in self.placed[ci]:
                device = p.candidate.device
                binding = self.features.binding_and_status
                results.append(
                    DeviceRequestResult(
                        request=f"{p.parent}/{p.request}" if p.parent else p.request,
                        driver=p.candidate.id.driver,
                        pool=p.candidate.id.pool,
                        device=p.candidate.id.device,
                        admin_access=True if p.admin_access else None,
                        tolerations=self._request_of(ci, p).tolerations
                        if self.features.device_taints
                        else (),
                        binding_conditions=device.binding_conditions if binding else (),
                        binding_failure_conditions=device.binding_failure_conditions
                        if binding
                        else (),
                        share_id=p.share_id,
                        consumed_capacity=p.consumed,
                    )
                )
            configs: list[AllocatedConfig] = claim_configs(claim, ci, self.request_data)
            selector = node_selector(
                [(p.candidate.slice, p.candidate.device) for p in self.placed[ci]],
                self.node_name,
                self.error,
            )
            out.append(AllocationResult(tuple(results), tuple(configs), selector))
        return out

    def _request_of(self, ci: int, p: _Placed) -> DeviceSubRequest:
        for (c, _, _), data in self.request_data.items():
            if (
                c == ci
                and data.request.name == p.request
                and (data.parent.name if data.parent else "") == p.parent
            ):
                return data.request
        raise KeyError(p.request)


class MissingClass(Exception):
    """A request names a DeviceClass that does not exist (Unschedulable, as kube-scheduler's
    PreFilter reports it)."""
