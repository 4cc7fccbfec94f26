"""Per-session memo of the DRA node check: a claim shape's outcome on a node, until the node's
devices change.

The exact DRA predicate runs the structured allocator for a pod on each candidate node. Its
answer depends only on the node (its labels and the slices it sees), the session's classes and
gates, the content of the pod's claims that still need allocating, and the allocated state of
the devices in the pools the node sees. Within a session the first three are fixed and pods made
from one ResourceClaimTemplate have claims of the same content, so the answer for (node, claim
contents) holds until an allocation on one of the node's pools is added or taken back. The memo
keeps it per claim contents in arrays over the node table with the node's version (bumped by
:meth:`FitMemo.touch` for every pool an allocation uses; an allocation on a network-attached
pool forgets everything), so a thousand pods of one shape over a thousand nodes cost about a
thousand allocator runs plus one per placement, not a million, and the node selection can take
the nodes known to fit (or known not to) as arrays (:meth:`FitMemo.known`). Only the check's
yes/no and its reason are kept: the devices themselves are allocated afresh when a pod is
placed, so shareIDs and results are never shared.

A reason or error text names the claim (``claim ns/name``); a hit for another pod's claims of
the same content says the same with that pod's claim names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["FitMemo"]

Shape = tuple[str, ...]


@dataclass(slots=True)
class _Outcomes:
    """One claim shape's outcomes over the node table."""

    version: Any  # int64 per row: the node's version when the outcome was recorded (-1: none)
    failure: Any  # int32 per row: -1 fits, else the index in ``errors``
    network: int
    errors: list[tuple[type[Exception], str]] = field(default_factory=list)
    """(error type, text with the claims' keys replaced by placeholders)."""
    index: dict[tuple[type[Exception], str], int] = field(default_factory=dict)
    results: dict[int, list[Any]] = field(default_factory=dict)
    """Per row, the check's allocation results where it fits (shareIDs placeholders)."""
    claims: list[Any] = field(default_factory=list)
    """The claims of the first check of this shape (their content is the shape)."""


@dataclass(slots=True)
class FitMemo:
    """Outcomes of the allocator per claim contents and node row."""

    rows: dict[str, int] = field(default_factory=dict)
    pool_rows: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    network_pools: set[tuple[str, str]] = field(default_factory=set)
    versions: Any = None
    network: int = 0
    outcomes: dict[Shape, _Outcomes] = field(default_factory=dict)
    shapes: dict[str, str] = field(default_factory=dict)
    devices: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    """(driver, pool, device) → the device, for :attr:`uses`."""
    uses: Any = None
    """``uses(claims, device, driver)``: whether claims of a shape could be affected by the
    device being taken; None: every allocation on a node concerns every shape."""

    def index(self, nodes: list[str], local: dict[str, list[Any]], network: list[Any]) -> None:
        """Learn the node rows (``nodes`` in table order) and which rows see which pools
        (``local``: node → its slices)."""
        self.rows = {name: row for row, name in enumerate(nodes)}
        self.versions = np.zeros(len(nodes), dtype=np.int64)
        for item in (*(i for items in local.values() for i in items), *network):
            for device in item.devices:
                self.devices[(item.driver, item.pool, device.name)] = device
        for node, slices in local.items():
            row = self.rows.get(node)
            if row is None:
                continue
            for item in slices:
                rows = self.pool_rows.setdefault((item.driver, item.pool), [])
                if row not in rows:
                    rows.append(row)
        self.network_pools.update((item.driver, item.pool) for item in network)

    def clear(self) -> None:
        self.rows.clear()
        self.pool_rows.clear()
        self.network_pools.clear()
        self.outcomes.clear()
        self.shapes.clear()
        self.devices.clear()
        self.uses = None
        self.versions = None
        self.network = 0

    def touch(self, allocation: Any) -> None:
        """An allocation was added or taken back: the nodes seeing its pools change, for the
        claim shapes the devices concern (the others keep what they knew)."""
        if self.versions is None:
            return
        touched: set[int] = set()
        for result in allocation.results:
            pool = (result.driver, result.pool)
            if pool in self.network_pools:
                self.network += 1
            touched.update(self.pool_rows.get(pool, ()))
        if not touched:
            return
        rows = np.fromiter(touched, dtype=np.intp, count=len(touched))
        keep = [found for found in self.outcomes.values()
                if found.network == self.network and not self._concerns(found, allocation)]
        valid = [found.version[rows] == self.versions[rows] for found in keep]
        self.versions[rows] += 1
        for found, still in zip(keep, valid, strict=True):
            found.version[rows[still]] = self.versions[rows[still]]

    def _concerns(self, found: _Outcomes, allocation: Any) -> bool:
        if self.uses is None or not found.claims:
            return True
        for result in allocation.results:
            device = self.devices.get((result.driver, result.pool, result.device))
            if device is None or self.uses(found.claims, device, result.driver):
                return True
        return False

    def shape(self, needed: list[tuple[str, Any]]) -> Shape:
        """The content of the claims that the allocator reads (not their names or status)."""
        out = []
        for key, claim in needed:
            known = self.shapes.get(key)
            if known is None:
                known = self.shapes[key] = repr(
                    (claim.requests, claim.constraints, claim.config))
            out.append(known)
        return tuple(out)

    def _outcomes(self, shape: Shape) -> _Outcomes:
        found = self.outcomes.get(shape)
        if found is None or found.network != self.network:
            size = len(self.versions)
            found = self.outcomes[shape] = _Outcomes(
                np.full(size, -1, dtype=np.int64), np.full(size, -1, dtype=np.int32),
                self.network)
        return found

    def lookup(self, node: str, shape: Shape, needed: list[tuple[str, Any]]
               ) -> tuple[bool, Exception | None]:
        """(known, the error naming the claims of ``needed``, or None when it fits)."""
        row = self.rows.get(node)
        if row is None or self.versions is None:
            return False, None
        found = self._outcomes(shape)
        if found.version[row] != self.versions[row]:
            return False, None
        index = int(found.failure[row])
        if index < 0:
            return True, None
        kind, template = found.errors[index]
        return True, kind(_render(template, needed))

    def store(self, node: str, shape: Shape, needed: list[tuple[str, Any]],
              error: Exception | None, results: list[Any] | None = None) -> None:
        row = self.rows.get(node)
        if row is None or self.versions is None:
            return
        found = self._outcomes(shape)
        if not found.claims:
            found.claims = [claim for _, claim in needed]
        found.version[row] = self.versions[row]
        if error is None:
            found.failure[row] = -1
            if results is not None:
                found.results[row] = results
            return
        entry = (type(error), _template(str(error), needed))
        index = found.index.get(entry)
        if index is None:
            index = found.index[entry] = len(found.errors)
            found.errors.append(entry)
        found.failure[row] = index

    def results(self, node: str, shape: Shape) -> list[Any] | None:
        """The allocation results the check found on ``node`` for claims of ``shape``, while
        the node's devices are unchanged since (the same search on the same state finds the
        same devices)."""
        row = self.rows.get(node)
        if row is None or self.versions is None:
            return None
        found = self.outcomes.get(shape)
        if found is None or found.network != self.network \
                or found.version[row] != self.versions[row] or found.failure[row] >= 0:
            return None
        return found.results.get(row)

    def known(self, shape: Shape, rows: Any, needed: list[tuple[str, Any]], *,
              only: type[Exception]) -> tuple[Any, list[str]]:
        """For the node ``rows``: codes (1 fits, 0 unknown, ``-1 - i`` fails with reason
        ``i``) and the reasons, naming the claims of ``needed``; failures of another type than
        ``only`` count as unknown (they are recorded by the check itself)."""
        found = self._outcomes(shape)
        fresh = found.version[rows] == self.versions[rows]
        failure = found.failure[rows]
        codes = (fresh & (failure < 0)).astype(np.intp)
        reasons: list[str] = []
        if found.errors:  # a few texts per shape: one pass over the rows for each
            failing = fresh & (failure >= 0)
            if failing.any():
                for index, (kind, template) in enumerate(found.errors):
                    if not issubclass(kind, only):
                        continue
                    hit = failing & (failure == index)
                    if hit.any():
                        codes[hit] = -1 - len(reasons)
                        reasons.append(_render(template, needed))
        return codes, reasons


def _template(text: str, needed: list[tuple[str, Any]]) -> str:
    """``text`` with each ``claim <key>`` of ``needed`` made a placeholder of its position."""
    for i, (key, _) in enumerate(needed):
        named = f"claim {key}"
        if named not in text:
            continue
        parts = text.split(named)
        out = [parts[0]]
        for part in parts[1:]:  # a longer name that starts with this one is not this claim
            longer = part[:1].isalnum() or part[:1] == "-" or (
                part[:1] == "." and part[1:2].isalnum())
            out.append(f"claim {key}" if longer else f"claim \x00{i}\x00")
            out.append(part)
        text = "".join(out)
    return text


def _render(template: str, needed: list[tuple[str, Any]]) -> str:
    """The text of a template for the claims of ``needed``."""
    if "\x00" not in template:
        return template
    for i, (key, _) in enumerate(needed):
        template = template.replace(f"\x00{i}\x00", key)
    return template
