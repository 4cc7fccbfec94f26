"""The columnar index of placed pods that inter-pod affinity and topology spread read.

kube-scheduler answers "how many pods matching this selector sit in each topology domain" by
walking every pod of every node for every pod it schedules. Here placed pods are grouped by
what a selector can see of them — namespace, labels, whether they are terminating — and each
distinct question is a :class:`CountQuery` whose per-node and per-domain counts are built once
per session from the matching groups and then kept current on every in-session allocate,
pipeline and evict. A pod's own (anti-)affinity terms that bind *later* pods (required
anti-affinity, preferred terms) are kept the same way as :class:`Carrier` domain counts.

Counting follows Volcano's predicates plugin: every pod on a node at session open counts
(terminating ones too; topology spread leaves those out itself), a pod placed in the session
is added and a pod evicted in the session is removed. The index is built on first use, so a
session where no pod has pod-to-pod constraints pays only a scan for carriers at open.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.node import NodeInfo
from scheduler.api.podterms import PodAffinityTerm
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskID
from scheduler.framework.hooks import IntArray
from scheduler.framework.nodetable import NodeTable

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = ["Carrier", "CountQuery", "LabelGroup", "PodIndex", "PodIndexUser", "pod_index"]

REQUIRED_ANTI = "required-anti-affinity"
PREFERRED = "preferred-affinity"
PREFERRED_ANTI = "preferred-anti-affinity"

GroupKey = tuple[str, tuple[tuple[str, str], ...], bool]


@dataclass(slots=True)
class LabelGroup:
    """Placed pods indistinguishable to any selector: same namespace, labels and deletion."""

    namespace: str
    labels: dict[str, str]
    namespace_labels: Mapping[str, str]
    deleting: bool
    rows: dict[int, int] = field(default_factory=dict)
    """Node row → number of this group's pods there."""
    queries: list[CountQuery] = field(default_factory=list)
    """The queries this group matches (kept in step as queries are added)."""


@dataclass(slots=True)
class CountQuery:
    """Placed pods matching one predicate over label groups, counted per node and domain."""

    matches: Callable[[LabelGroup], bool]
    per_node: IntArray
    domains: dict[str, IntArray] = field(default_factory=dict)
    """Topology key → count per label code of that key (nodes without the key left out)."""


@dataclass(slots=True)
class Carrier:
    """Placed pods carrying one (kind, term, weight), counted per domain of the term's key."""

    kind: str
    term: PodAffinityTerm
    weight: int
    domains: IntArray
    pods: int = 0


class PodIndex:
    def __init__(
        self, table: NodeTable, *, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> None:
        self.table = table
        self.namespace_labels = namespace_labels
        self.built = False
        self.carriers_present = False
        """Whether any placed pod carries terms that bind pods placed after it."""
        self.evicted: set[TaskID] = set()
        """Tasks evicted in this session before the index was built (left out at build)."""
        self.placed: dict[TaskID, tuple[int, LabelGroup]] = {}
        self.groups: dict[GroupKey, LabelGroup] = {}
        self.queries: dict[Hashable, CountQuery] = {}
        self.carriers: dict[tuple[str, PodAffinityTerm, int], Carrier] = {}
        # Inverted indexes by label pair, so that matching a new group, query or pod looks
        # only at the entries that could match instead of at all of them.
        self._groups_by_label: dict[tuple[str, str], list[LabelGroup]] = {}
        self._queries_by_anchor: dict[tuple[str, str], list[CountQuery]] = {}
        self._unanchored_queries: list[CountQuery] = []
        self._carriers_by_anchor: dict[tuple[str, str], list[Carrier]] = {}
        self._unanchored_carriers: list[Carrier] = []
        self.carriers_present = bool(_carrier_rows(table).any())

    # -- events ---------------------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        if task.spec.terms.carries_terms:
            self.carriers_present = True
        if not self.built:
            if self.evicted:
                self.evicted.discard(task.uid)
            return
        row = self.table.index.get(task.node_name)
        if row is not None and task.uid not in self.placed:
            self._add(task, row)

    def on_deallocate(self, task: TaskInfo) -> None:
        if not self.built:
            if task.node_name:  # evicted, still on its node; an unplaced task left it already
                self.evicted.add(task.uid)
            return
        if task.uid in self.placed:
            self._remove(task)

    # -- building -------------------------------------------------------------------------
    def build(self) -> None:
        if self.built:
            return
        self.built = True
        for row, node in enumerate(self.table.nodes):
            for task in node.tasks.values():
                if task.uid not in self.evicted:
                    self._add(task, row)
        self.evicted.clear()

    def _group(self, task: TaskInfo) -> LabelGroup:
        terms = task.spec.terms
        key: GroupKey = (task.namespace, terms.labels, terms.deleting)
        group = self.groups.get(key)
        if group is None:
            group = LabelGroup(
                namespace=task.namespace,
                labels=dict(terms.labels),
                namespace_labels=self.namespace_labels.get(task.namespace, {}),
                deleting=terms.deleting,
            )
            candidates = list(self._unanchored_queries)
            for pair in terms.labels:
                candidates += self._queries_by_anchor.get(pair, ())
                self._groups_by_label.setdefault(pair, []).append(group)
            group.queries = [q for q in candidates if q.matches(group)]
            self.groups[key] = group
        return group

    def _add(self, task: TaskInfo, row: int) -> None:
        group = self._group(task)
        self.placed[task.uid] = (row, group)
        group.rows[row] = group.rows.get(row, 0) + 1
        self._count(group.queries, row, +1)
        if task.spec.terms.carries_terms:
            self._carry(task, row, +1)

    def _remove(self, task: TaskInfo) -> None:
        row, group = self.placed.pop(task.uid)
        left = group.rows[row] - 1
        if left:
            group.rows[row] = left
        else:
            del group.rows[row]
        self._count(group.queries, row, -1)
        if task.spec.terms.carries_terms:
            self._carry(task, row, -1)

    def _count(self, queries: list[CountQuery], row: int, sign: int) -> None:
        for query in queries:
            query.per_node[row] += sign
            for key, domains in query.domains.items():
                code = self.table.label_codes(key)[0][row]
                if code >= 0:
                    domains[code] += sign

    def _carry(self, task: TaskInfo, row: int, sign: int) -> None:
        terms = task.spec.terms
        entries = [(REQUIRED_ANTI, t, 0) for t in terms.anti_affinity]
        entries += [(PREFERRED, w.term, w.weight) for w in terms.preferred_affinity]
        entries += [(PREFERRED_ANTI, w.term, w.weight) for w in terms.preferred_anti_affinity]
        for entry in entries:
            carrier = self.carriers.get(entry)
            if carrier is None:
                _, mapping = self.table.label_codes(entry[1].topology_key)
                carrier = Carrier(*entry, domains=np.zeros(len(mapping), dtype=np.intp))
                self.carriers[entry] = carrier
                anchors = entry[1].selector.anchors()
                if anchors is None:
                    self._unanchored_carriers.append(carrier)
                for pair in anchors or ():
                    self._carriers_by_anchor.setdefault(pair, []).append(carrier)
            carrier.pods += sign
            code = self.table.label_codes(entry[1].topology_key)[0][row]
            if code >= 0:
                carrier.domains[code] += sign

    # -- questions ------------------------------------------------------------------------
    def query(
        self,
        key: Hashable,
        matches: Callable[[LabelGroup], bool],
        *,
        anchors: frozenset[tuple[str, str]] | None = None,
    ) -> CountQuery:
        """The counts of placed pods for which ``matches`` holds; ``key`` names the question
        (equal keys must mean equal predicates). ``anchors``, when given, are label pairs of
        which every matching pod has one (see :meth:`LabelSelector.anchors`)."""
        self.build()
        query = self.queries.get(key)
        if query is None:
            per_node = np.zeros(len(self.table), dtype=np.intp)
            query = CountQuery(matches, per_node)
            if anchors is None:
                candidates: Iterable[LabelGroup] = self.groups.values()
                self._unanchored_queries.append(query)
            else:
                candidates = [g for a in anchors for g in self._groups_by_label.get(a, ())]
                for pair in anchors:
                    self._queries_by_anchor.setdefault(pair, []).append(query)
            for group in candidates:
                if matches(group):
                    group.queries.append(query)
                    for row, count in group.rows.items():
                        per_node[row] += count
            self.queries[key] = query
        return query

    def domain_counts(self, query: CountQuery, key: str) -> IntArray:
        """``query``'s counts per label code of ``key``, kept current from now on."""
        domains = query.domains.get(key)
        if domains is None:
            codes, mapping = self.table.label_codes(key)
            has = codes >= 0
            domains = np.bincount(
                codes[has], weights=query.per_node[has], minlength=len(mapping)
            ).astype(np.intp)
            query.domains[key] = domains
        return domains

    def carriers_matching(
        self, kind: str, *, namespace: str, labels: tuple[tuple[str, str], ...]
    ) -> list[Carrier]:
        """Carriers of ``kind`` with pods left whose term selects a pod with this namespace
        and these labels."""
        if not self.carriers_present:
            return []
        self.build()
        candidates = list(self._unanchored_carriers)
        for pair in labels:
            candidates += self._carriers_by_anchor.get(pair, ())
        if not candidates:
            return []
        label_map = dict(labels)
        ns_labels = self.namespace_labels.get(namespace, {})
        return [
            c
            for c in candidates
            if c.kind == kind and c.pods > 0 and c.term.matches(namespace, label_map, ns_labels)
        ]


def _carriers_on(node: NodeInfo) -> int:
    return sum(1 for task in node.tasks.values() if task.spec.terms.carries_terms)


def _carrier_rows(table: NodeTable) -> IntArray:
    """Per row, the pods on the node (as the snapshot gave it) whose terms bind later pods;
    carried from the last session's table, with only the renewed rows counted again."""
    carried = table.carried("carriers")
    if carried is not None:
        rows = carried[0].copy()
        for i in carried[1]:
            rows[i] = _carriers_on(table.nodes[i])
    else:
        rows = np.fromiter((_carriers_on(node) for node in table.nodes), dtype=np.int64,
                           count=len(table.nodes))
    table.derived["carriers"] = rows
    return rows


_SHARED_KEY = "pod-index"


def pod_index(session: Session) -> PodIndex:
    """The session's pod index, shared by every plugin that reads or feeds it.

    Its event methods are idempotent per task, so each plugin may forward the session's
    allocate/deallocate events without counting a pod twice.
    """
    index = session.shared.get(_SHARED_KEY)
    if not isinstance(index, PodIndex):
        index = PodIndex(session.table, namespace_labels=session.namespace_labels)
        session.shared[_SHARED_KEY] = index
    return index


class PodIndexUser:
    """For a plugin that reads the session's pod index: holds it for the session and feeds it
    the session's allocate/deallocate events (the plugin is then an ``EventHandler``)."""

    _index: PodIndex | None = None

    def open_pod_index(self, session: Session, *, wanted: bool) -> None:
        self._index = pod_index(session) if wanted else None

    def on_allocate(self, task: TaskInfo) -> None:
        if self._index is not None:
            self._index.on_allocate(task)

    def on_deallocate(self, task: TaskInfo) -> None:
        if self._index is not None:
            self._index.on_deallocate(task)

