"""Joint allocation of several device types (``device-joint-allocate``), with backtracking.

The first type listed (after dropping types the pod does not request or takes with
``ApplyForAll``) is the primary; the others are secondaries, placed near it. A secondary takes
at least its own count and up to one device per PCIe root of the primary, each booked at the
full per-instance request. Candidates come in tiers: devices on the primary's PCIe roots
(round-robin over the roots, each round by score then minor), then devices on the primary's
NUMA nodes, then the rest, each by score then minor. The NUMA tier is ours: Koordinator goes
from the same PCIe root straight to the whole node.

With ``requiredScope: SamePCIe`` the set of PCIe roots of every secondary must equal the
primary's. Koordinator picks the primary first and never revisits it, so the rule fails on
nodes where another GPU set would have had NICs on every root. Here GPU sets are searched in
the topology tree's order of preference (deepest scope, then topology packing, then the
usual order inside the scope) and the first set whose secondaries satisfy the rule wins; the
pod fails only when no combination does. The search is bounded by the tree (a few dozen
scopes) and by ``MAX_CHOICES``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import combinations

from scheduler.devices.finegrained.allocator import Scoring, device_score, fits
from scheduler.devices.finegrained.hints import JointSpec
from scheduler.devices.finegrained.ledger import Allocation, Ledger, Pick
from scheduler.devices.finegrained.names import TYPE_GPU
from scheduler.devices.finegrained.request import TypeRequest
from scheduler.devices.finegrained.select import Candidates
from scheduler.devices.finegrained.topology import SCOPE_LEVELS, Scope, used_minors

__all__ = ["MAX_CHOICES", "RULES_VIOLATION", "joint_allocate", "secondary_picks"]

MAX_CHOICES = 4096
RULES_VIOLATION = "node(s) Device Joint-Allocate rules violation"


def _ordered(ledger: Ledger, devices: Sequence, per: Mapping[str, int], scoring: Scoring
             ) -> list:
    return sorted(devices, key=lambda d: (-device_score(ledger, d, per, scoring), d.minor))


def secondary_picks(ledger: Ledger, request: TypeRequest, candidates: Candidates, *,
                    roots: Sequence[str], numas: set[int], same_pcie: bool,
                    scoring: Scoring) -> tuple[Pick, ...] | None:
    """The secondary devices for a primary on ``roots`` (None when too few fit)."""
    per = request.per_device
    desired = max(request.count, len(roots)) if same_pcie else request.count
    maximum = max(desired, len(roots))
    on_root: dict[str, list] = {root: [] for root in roots}
    near: list = []
    rest: list = []
    for device in candidates.devices:
        if device.pcie in on_root and device.has_topology:
            on_root[device.pcie].append(device)
        elif not same_pcie:
            (near if device.numa in numas and device.has_topology else rest).append(device)
    groups = [_ordered(ledger, group, per, scoring) for group in on_root.values()]
    order: list = []
    for depth in range(max((len(g) for g in groups), default=0)):
        layer = [group[depth] for group in groups if len(group) > depth]
        order += _ordered(ledger, layer, per, scoring)
    order += _ordered(ledger, near, per, scoring) + _ordered(ledger, rest, per, scoring)
    picks: list[Pick] = []
    taken_vfs: set[str] = set()
    for device in order:
        charge = fits(ledger, device, per)
        if charge is None:
            continue
        vfs: tuple[tuple[int, str], ...] = ()
        if candidates.vf_picker is not None:
            vf = candidates.vf_picker(device, taken_vfs)
            if vf is None:
                continue
            taken_vfs.add(vf[1])
            vfs = (vf,)
        picks.append(Pick(device.minor, charge, vfs))
        if len(picks) >= maximum:
            break
    if len(picks) < desired:
        return None
    if same_pcie and {ledger.devices[(request.type, p.minor)].pcie for p in picks} != set(roots):
        return None
    return tuple(picks)


def _ranked_scopes(ledger: Ledger, tree: Scope, request: TypeRequest, level: int
                   ) -> list[Scope]:
    """Every scope the tree could choose, in the tree's order of preference."""
    entries: list[tuple[int, int, int, Scope]] = []
    _walk_scopes(tree, 0, 0, used=used_minors(ledger), count=request.count, level=level,
                 entries=entries)
    return [scope for *_, scope in sorted(entries, key=lambda e: e[:3])]


def _walk_scopes(scope: Scope, depth: int, not_empties: int, *, used: set[int],
                 count: int, level: int, entries: list[tuple[int, int, int, Scope]]) -> None:
    """Add ``scope`` and the scopes below it that could hold ``count`` GPUs to ``entries``
    (a module function: a nested one calling itself would hold a reference cycle)."""
    if len(scope.minors) < count:
        return
    depth += 1
    not_empties += 1 if used.intersection(scope.minors) else 0
    if scope.level >= level:
        entries.append((-depth, -not_empties, len(entries), scope))
    for child in scope.children:
        _walk_scopes(child, depth, not_empties, used=used, count=count, level=level,
                     entries=entries)


def gpu_choices(ledger: Ledger, request: TypeRequest, candidates: Candidates, *,
                tree: Scope | None, required_scope: str, scoring: Scoring
                ) -> Iterator[tuple[Pick, ...]]:
    """GPU sets in preference order: scope by scope (tree), or in default order."""
    allowed = {d.minor for d in candidates.devices}
    level = SCOPE_LEVELS.get(required_scope, 0) if required_scope != "Device" else 0
    scopes = _ranked_scopes(ledger, tree, request, level) if tree is not None else [None]
    seen: set[frozenset[int]] = set()
    for scope in scopes:
        minors = scope.minors if scope is not None else tuple(sorted(allowed))
        fitting: list[tuple[int, dict[str, int], int]] = []
        for minor in minors:
            device = ledger.devices.get((TYPE_GPU, minor))
            if device is None or minor not in allowed:
                continue
            charge = fits(ledger, device, request.per_device)
            if charge is not None:
                fitting.append((minor, charge,
                                device_score(ledger, device, request.per_device, scoring)))
        if request.shared or scope is None:
            fitting.sort(key=lambda f: (-f[2], f[0]))
        for combo in combinations(fitting, request.count):
            key = frozenset(minor for minor, _, _ in combo)
            if key in seen:
                continue
            seen.add(key)
            yield tuple(Pick(minor, charge) for minor, charge, _ in combo)


def joint_allocate(ledger: Ledger, joint: JointSpec, requests: Mapping[str, TypeRequest],
                   candidates: Mapping[str, Candidates], *, first_choice: tuple[Pick, ...],
                   tree: Scope | None, required_scope: str, scoring: Scoring,
                   search: bool = True) -> Allocation | str:
    """Primary ``first_choice`` (the ordinary allocation) and its secondaries; with SamePCIe,
    further primary choices are searched when the first one breaks the rule (not when
    ``search`` is off: GPUs bound to a partition table are never re-chosen)."""
    primary, secondaries = joint.types[0], joint.types[1:]
    choices: Iterator[tuple[Pick, ...]] = iter((first_choice,))
    if joint.same_pcie and primary == TYPE_GPU and search:
        rest = gpu_choices(ledger, requests[primary], candidates[primary], tree=tree,
                           required_scope=required_scope, scoring=scoring)
        choices = _chain_unique(first_choice, rest)
    failure = ""
    for tried, choice in enumerate(choices):
        if tried >= MAX_CHOICES:
            break
        roots = list(dict.fromkeys(ledger.devices[(primary, p.minor)].pcie for p in choice
                                   if ledger.devices[(primary, p.minor)].has_topology))
        numas = {ledger.devices[(primary, p.minor)].numa for p in choice}
        out: Allocation = {primary: choice}
        for kind in secondaries:
            picks = secondary_picks(ledger, requests[kind], candidates[kind], roots=roots,
                                    numas=numas, same_pcie=joint.same_pcie, scoring=scoring)
            if picks is None:
                failure = RULES_VIOLATION if joint.same_pcie else f"Insufficient {kind} devices"
                break
            out[kind] = picks
        else:
            return out
        if not joint.same_pcie:
            break
    return failure or RULES_VIOLATION


def _chain_unique(first: tuple[Pick, ...], rest: Iterator[tuple[Pick, ...]]
                  ) -> Iterator[tuple[Pick, ...]]:
    yield first
    seen = frozenset(p.minor for p in first)
    for choice in rest:
        if frozenset(p.minor for p in choice) != seen:
            yield choice

