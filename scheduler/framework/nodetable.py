"""The columnar node table: per-node resource state as numpy arrays.

Predicates and scorers work on whole columns (one vector operation for all nodes) instead of
looping over nodes in Python; the session keeps each row in step with its ``NodeInfo`` on every
allocate, pipeline and evict (:meth:`NodeTable.sync`), an O(1) update. Static columns (labels,
taints, unschedulable) are derived lazily and cached for the life of the session; resource
fit masks are kept per request value and rechecked only on the rows synced since.

A table can start from the previous cycle's (``previous``): when the node list and the
dimensions are the same it copies that table's columns and recomputes only the ``renewed``
rows, so opening a session costs the changed nodes, not the cluster. Row hooks that name the
extra columns they fill (device summaries) are carried over the same way, and so are the label
codes and taint groups when the renewed rows kept their labels and taints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.api.node import NodeInfo, Taint
from scheduler.api.resource import CPU, MEMORY, MIN_RESOURCE, PODS, Resource
from scheduler.framework.hooks import BoolArray, FloatArray, IntArray

__all__ = ["NodeTable"]

RowHook = Callable[[int, NodeInfo], None]

_FEW_ROWS = 16
"""Up to this many changed rows are rechecked one by one; beyond, the whole column at once."""
_MAX_KEPT_MASKS = 256
"""Fit masks kept per table (one bool per node each); the oldest goes first."""


@dataclass(slots=True)
class _FitMask:
    mask: BoolArray
    position: int
    """How far into :attr:`NodeTable.changed_rows` ``mask`` is up to date."""


class _Carried:
    """What a table keeps of the one it carried its rows over from.

    Label codes and taint groups depend only on each row's labels and taints, so they carry
    over when every renewed row (``before``: its node as the previous table had it) still has
    the same ones; the comparison is made per key when first asked, on the renewed rows only.
    """

    __slots__ = ("before", "label_codes", "taint_groups")

    def __init__(self, *, label_codes: dict[str, tuple[IntArray, dict[str, int]]],
                 taint_groups: tuple[IntArray, list[tuple[Taint, ...]]] | None,
                 before: list[NodeInfo]) -> None:
        self.label_codes = label_codes
        self.taint_groups = taint_groups
        self.before = before


def _scalar_names(nodes: Sequence[NodeInfo]) -> frozenset[str]:
    named: set[str] = set()
    for node in nodes:
        named.update(node.allocatable.scalars)
    return frozenset(named)


class NodeTable:
    """Resource columns (rows = nodes, columns = resource dimensions) plus static columns."""

    def __init__(
        self,
        nodes: Sequence[NodeInfo],
        *,
        extra_dims: Iterable[str] = (),
        previous: NodeTable | None = None,
        renewed: Iterable[str] | None = None,
    ) -> None:
        self.nodes = list(nodes)
        self.names = [node.name for node in self.nodes]
        self.index: dict[str, int]
        self.allocatable_scalars: frozenset[str]
        same_nodes = (previous is not None and renewed is not None
                      and previous.names == self.names)
        if previous is not None and renewed is not None and same_nodes:
            renewed = list(renewed)
            self.index = previous.index  # same names in the same order; never written
            before = previous.nodes
            if all(self.nodes[i].allocatable.scalars.keys()
                   == before[i].allocatable.scalars.keys()
                   for i in (self.index[name] for name in renewed)):
                named = previous.allocatable_scalars
            else:
                named = _scalar_names(self.nodes)
        else:
            self.index = {name: i for i, name in enumerate(self.names)}
            named = _scalar_names(self.nodes)
        # Scalar names some node's allocatable names (a sum over the nodes names these).
        self.allocatable_scalars = named
        scalars = set(named) | set(extra_dims)
        scalars.discard(PODS)
        self.dims: list[str] = [CPU, MEMORY, PODS, *sorted(scalars)]
        self.dim_index = {name: i for i, name in enumerate(self.dims)}
        n, r = len(self.nodes), len(self.dims)
        carry = previous is not None and same_nodes and previous.dims == self.dims
        if previous is not None and carry:
            # The previous table's session is over: its columns are taken over, not copied
            # (it is left with empty ones, so that reading it again fails loudly).
            self._take_columns(previous)
        else:
            self.allocatable = np.zeros((n, r))
            self.idle = np.zeros((n, r))
            self.used = np.zeros((n, r))
            self.releasing = np.zeros((n, r))
            self.pipelined = np.zeros((n, r))
            self.future_idle = np.zeros((n, r))
            self.pod_count = np.zeros(n)
            self.unschedulable = np.zeros(n, dtype=bool)
        self.row_hooks: list[RowHook] = []
        self.changed_rows: list[int] = []
        """Every row :meth:`sync` rewrote, in order (repeats kept): a cache of values derived
        from rows catches up by reading on from where it last stopped."""
        self.columns: dict[str, FloatArray] = {}
        """Extra per-node columns maintained by row hooks (e.g. device summaries)."""
        self._label_codes: dict[str, tuple[IntArray, dict[str, int]]] = {}
        self._taint_groups: tuple[IntArray, list[tuple[Taint, ...]]] | None = None
        self._request_dims: dict[object, tuple[IntArray, FloatArray, list[str]]] = {}
        """:meth:`request_dims` per request value: a session asks for a few shapes many times."""
        self._fit_masks: dict[tuple[object, bool], _FitMask] = {}
        """:meth:`fit_mask` per request value and source column, kept up to date from
        :attr:`changed_rows`."""
        self._previous: NodeTable | None = None
        """The table this one carried rows over from (until its row hooks are registered)."""
        self._renewed_rows: list[int] = []
        self.derived: dict[str, Any] = {}
        """Values derived from the rows (e.g. image sizes), kept for the next table to reuse
        through :meth:`carried`; each must describe the rows as the snapshot gave them."""
        if previous is not None and renewed is not None and carry:
            previous._previous = None  # keep no chain of older tables alive
            self._previous = previous
            self._renewed_rows = sorted(self.index[name] for name in renewed)
            rows: Iterable[int] = self._renewed_rows
            # The previous table's static columns, usable while the renewed rows match them.
            self._carried: _Carried | None = _Carried(
                label_codes=previous._label_codes, taint_groups=previous._taint_groups,
                before=[previous.nodes[i] for i in self._renewed_rows])
        else:
            rows = range(n)
            self._carried = None
        for i in rows:
            node = self.nodes[i]
            node.index = i
            self.allocatable[i] = self.vector(node.allocatable)
            self.unschedulable[i] = node.unschedulable
            self.sync(i)

    def carried(self, key: str) -> tuple[Any, list[int]] | None:
        """The previous table's ``derived[key]`` and the rows renewed since (whose values it
        may have wrong), or None when this table was built without a previous one."""
        previous = self._previous
        if previous is None:
            return None
        value = previous.derived.get(key)
        return None if value is None else (value, self._renewed_rows)

    def _take_columns(self, previous: NodeTable) -> None:
        """Start from ``previous``'s resource columns (same nodes, same dimensions)."""
        for name in ("allocatable", "idle", "used", "releasing", "pipelined", "future_idle",
                     "pod_count", "unschedulable"):
            column = getattr(previous, name)
            setattr(self, name, column)
            setattr(previous, name, column[:0])

    def __len__(self) -> int:
        return len(self.nodes)

    def span(self, rows: slice) -> range:
        """The row numbers of the ``rows`` slice of this table (a window of the node search)."""
        return range(*rows.indices(len(self.nodes)))

    def total_allocatable(self) -> Resource:
        """The sum of every node's allocatable, as adding node by node gives it: from the
        column sums when every value is integral (exact in any order), else node by node."""
        columns = self.allocatable
        if columns.size and np.any(np.mod(columns, 1.0)):
            total = Resource()
            for node in self.nodes:
                total.add(node.allocatable)
            return total
        sums = columns.sum(axis=0) if columns.size else np.zeros(len(self.dims))
        return Resource(float(sums[0]), float(sums[1]), {
            name: float(sums[self.dim_index[name]]) for name in sorted(self.allocatable_scalars)})

    # -- rows -----------------------------------------------------------------------------
    def vector(self, resource: Resource) -> FloatArray:
        """``resource`` as a row over this table's dimensions (unknown scalars dropped)."""
        row = np.zeros(len(self.dims))
        row[0] = resource.milli_cpu
        row[1] = resource.memory
        for name, value in resource.scalars.items():
            col = self.dim_index.get(name)
            if col is not None:
                row[col] = value
        return row

    def sync(self, i: int) -> None:
        """Copy node ``i``'s accounting into the columns; call after every task change (the
        resource columns change only here)."""
        node = self.nodes[i]
        self.changed_rows.append(i)
        self.idle[i] = self.vector(node.idle)
        self.used[i] = self.vector(node.used)
        self.releasing[i] = self.vector(node.releasing)
        self.pipelined[i] = self.vector(node.pipelined)
        self.future_idle[i] = self.idle[i] + self.releasing[i] - self.pipelined[i]
        self.pod_count[i] = len(node.tasks)
        for hook in self.row_hooks:
            hook(i, node)

    def add_row_hook(self, hook: RowHook, *, columns: Iterable[str] = ()) -> None:
        """Register a per-row updater and bring every row up to date with it.

        A hook that names the extra ``columns`` it fills runs only on the renewed rows when
        this table carried its rows over from a previous one that had those columns; named
        columns the table lacks otherwise start as zeros.
        """
        self.row_hooks.append(hook)
        names = list(columns)
        previous = self._previous
        rows: Iterable[int] = range(len(self.nodes))
        if names and previous is not None and all(name in previous.columns for name in names):
            # Taken over, not copied: the previous table's session is over.
            for name in names:
                self.columns[name] = previous.columns.pop(name)
            rows = self._renewed_rows
        else:
            for name in names:
                if name not in self.columns:
                    self.columns[name] = np.zeros(len(self.nodes))
        for i in rows:
            hook(i, self.nodes[i])

    # -- resource fit ---------------------------------------------------------------------
    def request_dims(self, request: Resource) -> tuple[IntArray, FloatArray, list[str]]:
        """Requested dimensions (``pods`` included) in message order: cpu, memory, scalars.

        The arrays are shared between calls for equal requests: read them, never write."""
        key = self._request_key(request)
        cached = self._request_dims.get(key)
        if cached is None:
            cached = self._request_dims[key] = self._dims_of(request)
        return cached

    @staticmethod
    def _request_key(request: Resource) -> tuple[object, ...]:
        return (request.milli_cpu, request.memory, *request.scalars.items())

    def _dims_of(self, request: Resource) -> tuple[IntArray, FloatArray, list[str]]:
        # ``pods`` too: every task asks for one pod and a node's idle holds its free pod
        # slots, so a full node fails the fit as in Volcano's allocate ``predicate``.
        names = [name for name in request.names() if request.get(name) >= MIN_RESOURCE]
        cols: list[int] = []
        values: list[float] = []
        for name in names:
            col = self.dim_index.get(name)
            cols.append(-1 if col is None else col)
            values.append(request.get(name))
        col_array, value_array = np.array(cols, dtype=np.intp), np.array(values)
        col_array.flags.writeable = value_array.flags.writeable = False  # shared, see above
        return col_array, value_array, names

    def fit_mask(
        self, request: Resource, *, future: bool = True, rows: IntArray | slice | None = None
    ) -> BoolArray:
        """Nodes whose (future) idle holds ``request`` within Volcano's tolerance: a new
        array over all nodes, or over ``rows`` (row numbers or a slice) only when given.

        The answer for each request value is kept and brought up to date from the rows
        :meth:`sync` rewrote since it was last asked for: a job's pods ask for the same
        request again and again while each placement changes one node."""
        key = (self._request_key(request), future)
        entry = self._fit_masks.get(key)
        changed = len(self.changed_rows)
        if entry is None:
            if len(self._fit_masks) >= _MAX_KEPT_MASKS:
                del self._fit_masks[next(iter(self._fit_masks))]
            entry = self._fit_masks[key] = _FitMask(self._fit_vector(request, future), changed)
        elif entry.position < changed:
            stale = self.changed_rows[entry.position:]
            if len(stale) > _FEW_ROWS:
                entry.mask = self._fit_vector(request, future)
            else:
                cols, values, _ = self.request_dims(request)
                needs = list(zip(cols.tolist(), values.tolist(), strict=True))
                source = self.future_idle if future else self.idle
                # with no requested dimension, or one no node has, every row's answer is fixed
                if needs and min(col for col, _ in needs) >= 0:
                    for row in set(stale):
                        idle = source[row].tolist()
                        entry.mask[row] = all(value - idle[col] < MIN_RESOURCE
                                              for col, value in needs)
            entry.position = changed
        if rows is None:
            return entry.mask.copy()
        return entry.mask[rows].copy() if isinstance(rows, slice) else entry.mask[rows]

    def _fit_vector(self, request: Resource, future: bool) -> BoolArray:
        cols, values, _ = self.request_dims(request)
        if len(cols) == 0:
            return np.ones(len(self.nodes), dtype=bool)
        if (cols < 0).any():  # a resource no node has at all
            return np.zeros(len(self.nodes), dtype=bool)
        source = self.future_idle if future else self.idle
        # Column by column: a fancy-indexed copy and a row-wise reduction cost more than the
        # one or two requested dimensions a pod usually has.
        mask = values[0] - source[:, cols[0]] < MIN_RESOURCE
        for col, value in zip(cols[1:], values[1:], strict=True):
            mask &= value - source[:, col] < MIN_RESOURCE
        return mask

    def fit_reasons(self, request: Resource, alive: BoolArray) -> list[tuple[BoolArray, str]]:
        """Per node in ``alive``, the first insufficient resource: ``Insufficient <name>``."""
        cols, values, names = self.request_dims(request)
        out: list[tuple[BoolArray, str]] = []
        remaining = alive.copy()
        for col, value, name in zip(cols, values, names, strict=True):
            if col < 0:
                failed = remaining.copy()
            else:
                failed = remaining & (value - self.future_idle[:, col] >= MIN_RESOURCE)
            if failed.any():
                out.append((failed, f"Insufficient {name}"))
                remaining &= ~failed
        return out

    # -- static columns -------------------------------------------------------------------
    def label_codes(self, key: str) -> tuple[IntArray, dict[str, int]]:
        """Integer codes of label ``key`` per node (-1 = absent) and the value → code map."""
        cached = self._label_codes.get(key)
        if cached is None and self._carried is not None:
            cached = self._carried.label_codes.get(key)
            if cached is not None and not all(
                    old.labels.get(key) == self.nodes[i].labels.get(key)
                    for i, old in zip(self._renewed_rows, self._carried.before, strict=True)):
                cached = None
            if cached is not None:
                self._label_codes[key] = cached
        if cached is None:
            mapping: dict[str, int] = {}
            codes = np.full(len(self.nodes), -1, dtype=np.intp)
            for i, node in enumerate(self.nodes):
                value = node.labels.get(key)
                if value is not None:
                    codes[i] = mapping.setdefault(value, len(mapping))
            codes.flags.writeable = False  # shared with the next table's session
            cached = (codes, mapping)
            self._label_codes[key] = cached
        return cached

    def taint_groups(self) -> tuple[IntArray, list[tuple[Taint, ...]]]:
        """Group id per node by identical taint lists, and the taint list of each group."""
        carried = self._carried
        if self._taint_groups is None and carried is not None \
                and carried.taint_groups is not None and all(
                    old.taints == self.nodes[i].taints
                    for i, old in zip(self._renewed_rows, carried.before, strict=True)):
            self._taint_groups = carried.taint_groups
        if self._taint_groups is None:
            groups: dict[tuple[Taint, ...], int] = {}
            ids = np.zeros(len(self.nodes), dtype=np.intp)
            for i, node in enumerate(self.nodes):
                ids[i] = groups.setdefault(node.taints, len(groups))
            ids.flags.writeable = False  # shared with the next table's session
            self._taint_groups = (ids, list(groups))
        return self._taint_groups
