"""Dynamic Resource Allocation (``resource.k8s.io/v1`` ResourceClaims) in node fit and in each
placement, for the ``predicates`` plugin.

kube-scheduler's ``DynamicResources`` plugin, which Volcano's ``predicates`` runs
(``predicate.DynamicResourceAllocationEnable``, on here by default). Per pod:

* pre-predicate: the pod's claims are found (by name, or through ``status.resourceClaimStatuses``
  for a claim made from a template); a missing claim, or one not made yet, keeps the pod pending
  with that reason;
* vector predicate: a pod with claims needing allocation is kept off nodes no ResourceSlice
  serves (one mask per session);
* exact predicate, on the candidates left only: the structured allocator
  (:mod:`scheduler.devices.dra.allocator`) must allocate every claim of the pod on the node, with
  the devices this session already handed out counted as in use; a claim allocated before (a
  shared claim) must be available on the node. "No device fits" is the allocator's reason; an
  allocator *error* (a CEL expression that fails, a gated feature that is off) is recorded and
  written as ``PodScheduled=False`` reason ``SchedulerError`` with the allocator's text;
* on allocate: the allocation is charged to the session's allocated state and recorded in the
  snapshot's :class:`~scheduler.framework.draview.DraView`; a Statement rollback (a gang that
  does not commit) takes it back. A claim shared by several pods is allocated once; every pod
  is added to its ``reservedFor`` when its bind is written.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from scheduler.api.errors import ObjectError
from scheduler.api.node import NodeInfo
from scheduler.api.podclaims import claim_key, pod_claims, resolve_claim_names
from scheduler.api.status import FitErrors, Status
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskID, TaskStatus
from scheduler.framework.draapi import (
    AllocatedState,
    AllocatorError,
    Unschedulable,
    allocate,
    allocation_to_dict,
    claims_may_use,
)
from scheduler.framework.dracache import FitMemo
from scheduler.framework.draview import PendingClaim
from scheduler.framework.hooks import BoolArray
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.session import AllocateError, Session

__all__ = ["REASON_NO_SLICES", "RESERVED_FOR_MAX", "DraFilter"]

REASON_NO_SLICES = "cannot allocate all claims: no ResourceSlice serves the node"
RESERVED_FOR_MAX = 256
"""``ResourceClaimReservedForMaxSize``: pods one claim may be reserved for."""


@dataclass(slots=True)
class _Held:
    """A claim this session allocated, and the placed pods that use it."""

    allocation: Any
    holders: list[TaskID]


@dataclass(slots=True)
class _Claims:
    """A pod's claims as resolved this session: (key, parsed claim), or why they cannot be."""

    keys: list[tuple[str, Any]] = field(default_factory=list)
    problem: str = ""


_NO_CLAIMS = _Claims()


class DraFilter:
    """One session's DRA checks and in-session allocations (built per session)."""

    NAME = "predicates"

    def __init__(self, features: Any) -> None:
        self.features = features
        self.session: Session | None = None
        self.view: Any = None
        self.state: Any = None
        self._claims: dict[TaskID, _Claims] = {}
        self._held: dict[str, _Held] = {}
        self._placed: dict[TaskID, list[str]] = {}
        self._errors: dict[TaskID, str] = {}
        self._freed: dict[TaskID, list[Any]] = {}
        self._share_rng = random.Random(0)
        """Evicted tasks → the allocations their eviction freed in this session."""
        self._mask: BoolArray | None = None
        self._local: dict[str, list[Any]] = {}
        self._network: list[Any] = []
        self._spanning: list[Any] = []
        self.memo = FitMemo()
        """The node check's outcomes per claim contents (see :mod:`dracache`)."""

    # -- session --------------------------------------------------------------------------
    @property
    def ssn(self) -> Session:
        assert self.session is not None, "used outside a session"
        return self.session

    def on_session_open(self, session: Session) -> None:
        self.session = session
        # shareIDs (UUIDs in kube-scheduler) from the session's seed: a run is repeatable
        self._share_rng = random.Random(session.uid)
        self.view = session.snapshot.dra
        if self.view is None or self.view.empty:
            self.view = None
            return
        claims = [claim for claim in self.view.claims.values() if claim.allocation is not None]
        self.state = AllocatedState.from_claims(claims)
        written = {key for key, claim in self.view.claims.items() if claim.allocation is not None}
        for key, allocation in self.view.allocations.items():
            if key not in written:  # decided in an earlier cycle, not written yet
                self.state.add(allocation)
        for item in self.view.slices:
            if item.node_name:
                self._local.setdefault(item.node_name, []).append(item)
            else:
                self._network.append(item)
        self._spanning = _spanning(self.view.slices)
        self.memo.index([node.name for node in session.table.nodes], self._local,
                        self._network + self._spanning)
        classes, features = self.view.classes, self.features
        self.memo.uses = lambda claims, device, driver: claims_may_use(
            claims, device, driver, classes=classes, features=features)

    def on_session_close(self, session: Session) -> None:
        for uid, text in self._errors.items():
            for job in session.jobs.values():
                errors = job.nodes_fit_errors.get(uid)
                if errors is not None and job.tasks.get(uid) is not None \
                        and job.tasks[uid].status is TaskStatus.PENDING:
                    job.nodes_fit_errors[uid] = FitErrors(
                        nodes=errors.nodes, error=text, condition_reason="SchedulerError")
                    break
        # The session unlinks its plugins' references to it (Session.release); this object
        # is one level further down, so it lets go of the session here.
        self.session = None
        self._claims.clear()
        self._held.clear()
        self._placed.clear()
        self._freed.clear()
        self.memo.clear()

    def _share_id(self) -> str:
        return str(uuid.UUID(int=self._share_rng.getrandbits(128), version=4))

    # -- claims of a pod ------------------------------------------------------------------
    def claims(self, task: TaskInfo) -> _Claims:
        if not (task.pod.get("spec") or {}).get("resourceClaims"):
            return _NO_CLAIMS  # most pods: nothing to resolve or cache
        cached = self._claims.get(task.uid)
        if cached is None:
            cached = self._claims[task.uid] = self._resolve(task)
        return cached

    def _resolve(self, task: TaskInfo) -> _Claims:
        out = _Claims()
        try:
            entries = pod_claims(task.pod)
        except ObjectError as exc:
            out.problem = str(exc)
            return out
        if not entries:
            return out
        view = self.view
        for entry, name in resolve_claim_names(task.pod, entries):
            if name == "":
                continue  # the controller said this entry needs no claim
            if name is None:
                template = claim_key(task.namespace, entry.template_name)
                if view is None or template not in view.templates:
                    out.problem = (f"pod {task.key}: ResourceClaimTemplate {template} of pod "
                                   f"claim {entry.name!r} not found")
                else:
                    out.problem = (f"pod {task.key}: waiting for the ResourceClaim of pod "
                                   f"claim {entry.name!r} (template {entry.template_name}) "
                                   f"to be created")
                return out
            key = claim_key(task.namespace, name)
            claim = None if view is None else view.claims.get(key)
            if claim is None:
                out.problem = f'resourceclaim "{key}" not found'
                return out
            problem = self._claim_problem(task, key, entry.template_name)
            if problem:
                out.problem = problem
                return out
            out.keys.append((key, claim))
        return out

    def _claim_problem(self, task: TaskInfo, key: str, template: str) -> str:
        obj = self.view.claim_objects.get(key) or {}
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return f'resourceclaim "{key}" is being deleted'
        reserved = self.view.reserved.get(key, ())
        if len(reserved) >= RESERVED_FOR_MAX and (_pod_uid(task) or str(task.uid)) \
                not in reserved:
            return f'resourceclaim "{key}" is in use by {len(reserved)} pods, the most it can ' \
                   f'be reserved for'
        if template:
            owners = [ref.get("uid") for ref in meta.get("ownerReferences") or []
                      if isinstance(ref, Mapping) and ref.get("controller")]
            if owners and str(task.uid) not in owners and _pod_uid(task) not in owners:
                return f"ResourceClaim {key} was not created for pod {task.key} " \
                       f"(pod is not owner)"
        return ""

    # -- filtering ------------------------------------------------------------------------
    def pre_predicate(self, task: TaskInfo) -> Status | None:
        claims = self.claims(task)
        if claims.problem:
            return Status.unresolvable(claims.problem, plugin=self.NAME)
        return None

    def _needs_devices(self, task: TaskInfo) -> bool:
        claims = self.claims(task)
        return any(self._allocation_of(key) is None for key, _ in claims.keys)

    def predicate_mask(self, task: TaskInfo, table: NodeTable) -> BoolArray | None:
        """The nodes a ResourceSlice serves, for a pod with a claim to allocate; None when
        this check rules out no node (most pods: no claims)."""
        if self.view is None or not self.claims(task).keys or not self._needs_devices(task):
            return None
        return self._served(table)

    def _served(self, table: NodeTable) -> BoolArray:
        if self._mask is None:
            if self._network:
                self._mask = np.ones(len(table), dtype=bool)
            else:
                nodes = self.view.slice_nodes
                self._mask = np.fromiter((node.name in nodes for node in table.nodes),
                                         dtype=bool, count=len(table))
        return self._mask

    def predicate_reasons(self, task: TaskInfo, table: NodeTable, alive: BoolArray
                          ) -> list[tuple[BoolArray, str]]:
        if self.view is None or not self.claims(task).keys or not self._needs_devices(task):
            return []
        return [(~self._served(table), REASON_NO_SLICES)]

    def wants_exact(self, task: TaskInfo) -> bool:
        return self.view is not None and bool(self.claims(task).keys)

    def check_node(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        try:
            self._fit(task, node, check=True)
        except Unschedulable as exc:
            return Status.unschedulable(self._naming_claims(task, str(exc)), plugin=self.NAME)
        except AllocatorError as exc:
            text = self._naming_claims(task, str(exc))
            self._errors[task.uid] = text
            return Status.error(text, plugin=self.NAME)
        return None

    def exact_known(self, task: TaskInfo, rows: Any) -> tuple[Any, list[str]] | None:
        """What the memo already knows of :meth:`check_node` on the node ``rows``: codes (1
        fits, 0 unknown, ``-1 - i`` fails with ``reasons[i]``) and the reasons; None when it
        cannot say (a claim allocated before, whose node selector is checked per node)."""
        if self.view is None or self.memo.versions is None:
            return None
        needed = []
        for key, claim in self.claims(task).keys:
            if self._allocation_of(key) is not None:
                return None
            needed.append((key, claim))
        if not needed:
            return None
        codes, reasons = self.memo.known(self.memo.shape(needed), rows, needed,
                                         only=Unschedulable)
        return codes, [self._naming_claims(task, reason) for reason in reasons]

    def _naming_claims(self, task: TaskInfo, reason: str) -> str:
        """``reason``, preceded by the pod's claims when it names none of them (the pending
        pod's message and event must say which claim waits)."""
        keys = [key for key, _ in self.claims(task).keys]
        if any(key in reason for key in keys):
            return reason
        return f"{'claim' if len(keys) == 1 else 'claims'} {', '.join(keys)}: {reason}"

    def _allocation_of(self, key: str) -> Any:
        held = self._held.get(key)
        if held is not None:
            return held.allocation
        return self.view.allocations.get(key) if self.view is not None else None

    def _fit(self, task: TaskInfo, node: NodeInfo, *, check: bool = False
             ) -> list[tuple[str, Any, bool]]:
        """Each claim of ``task`` with its allocation on ``node`` and whether it is new;
        raises the allocator's ``Unschedulable`` or ``AllocatorError``. With ``check`` only
        whether it fits counts (the new claims are left out of the answer): the outcome is
        memoised per claim contents until the node's devices change."""
        out: list[tuple[str, Any, bool]] = []
        needed: list[tuple[str, Any]] = []
        for key, claim in self.claims(task).keys:
            allocation = self._allocation_of(key)
            if allocation is None:
                needed.append((key, claim))
                continue
            if not _selector_matches(allocation_to_dict(allocation).get("nodeSelector"), node):
                raise Unschedulable(f"resourceclaim {key}: allocation is not available on "
                                    f"node {node.name}")
            out.append((key, allocation, False))
        if needed and check:
            shape = self.memo.shape(needed)
            known, error = self.memo.lookup(node.name, shape, needed)
            if not known:
                try:
                    found = self._allocate(node, needed, share_id=_check_share_id)
                except (Unschedulable, AllocatorError) as exc:
                    self.memo.store(node.name, shape, needed, exc)
                    raise
                self.memo.store(node.name, shape, needed, None, found)
            elif error is not None:
                raise error
        elif needed:
            results = self._reuse(node, needed)
            if results is None:
                results = self._allocate(node, needed, share_id=self._share_id)
            out.extend((key, result, True) for (key, _), result in
                       zip(needed, results, strict=True))
        return out

    def _reuse(self, node: NodeInfo, needed: list[tuple[str, Any]]) -> list[Any] | None:
        """The check's results on ``node`` while still valid, with shareIDs of their own."""
        found = self.memo.results(node.name, self.memo.shape(needed))
        if found is None:
            return None
        return [replace(result, results=tuple(
            r if r.share_id is None else replace(r, share_id=self._share_id())
            for r in result.results)) for result in found]

    def _allocate(self, node: NodeInfo, needed: list[tuple[str, Any]], *,
                  share_id: Any) -> list[Any]:
        return allocate(
            node_name=node.name, node_labels=dict(node.labels),
            claims=[claim for _, claim in needed], classes=self.view.classes,
            slices=self._local.get(node.name, []) + self._network
            + [item for item in self._spanning if item.node_name != node.name],
            allocated=self.state, features=self.features, share_id=share_id)

    def _add(self, allocation: Any) -> None:
        self.state.add(allocation)
        self.memo.touch(allocation)

    def _remove(self, allocation: Any) -> None:
        self.state.remove(allocation)
        self.memo.touch(allocation)

    # -- allocation -----------------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        if self.view is None:
            return
        freed = self._freed.pop(task.uid, None)
        if freed is not None:  # an eviction undone: the pod holds its devices again
            for allocation in freed:
                self._add(allocation)
            return
        if task.status not in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED) \
                or not self.claims(task).keys:
            return
        node = self.ssn.nodes[task.node_name]
        try:
            decided = self._fit(task, node)
        except (Unschedulable, AllocatorError) as exc:
            if isinstance(exc, AllocatorError):
                self._errors[task.uid] = str(exc)
            raise AllocateError(str(exc)) from None
        keys: list[str] = []
        entries = []
        for key, allocation, new in decided:
            if new:
                self._add(allocation)
                self._held[key] = _Held(allocation, [task.uid])
            elif key in self._held:
                self._held[key].holders.append(task.uid)
            keys.append(key)
            entries.append(PendingClaim(key=key, allocation=allocation, pod_name=task.name,
                                        pod_uid=_pod_uid(task) or str(task.uid)))
        self._placed[task.uid] = keys
        self.view.session[task.uid] = entries

    def on_deallocate(self, task: TaskInfo) -> None:
        if task.status is TaskStatus.RELEASING:
            self._free(task)
            return
        if task.status is not TaskStatus.PENDING:
            return
        keys = self._placed.pop(task.uid, None)
        if keys is None:
            return
        self.view.session.pop(task.uid, None)
        for key in keys:
            held = self._held.get(key)
            if held is None or task.uid not in held.holders:
                continue
            held.holders.remove(task.uid)
            if not held.holders:
                self._remove(held.allocation)
                del self._held[key]

    def _free(self, task: TaskInfo) -> None:
        """An evicted pod's claims that no other pod holds are freed when it is gone (its
        template's claim is deleted with it, a named claim is deallocated once its reservedFor
        is empty), so a preemptor may count on their devices in this session."""
        if self.view is None or task.uid in self._freed:
            return
        uid = _pod_uid(task) or str(task.uid)
        freed = []
        for key, _ in self.claims(task).keys:
            allocation = self.view.allocations.get(key)
            if allocation is not None and key not in self._held \
                    and self.view.reserved.get(key, ()) == (uid,):
                self._remove(allocation)
                freed.append(allocation)
        self._freed[task.uid] = freed

    # -- what other parts read ------------------------------------------------------------
    def allocated_devices(self, task: TaskInfo) -> list[tuple[str, Any]]:
        """The (claim key, allocation) pairs this session placed ``task`` with."""
        return [(key, self._allocation_of(key)) for key in self._placed.get(task.uid, [])]


def _spanning(slices: list[Any]) -> list[Any]:
    """The node-local slices of pools whose slices are not all on one node: every node is
    handed the other nodes' ones with its own and the network-attached ones, so that a node
    seeing one slice of such a pool sees the whole pool (else it would count as incomplete,
    "being updated"), and the memo treats an allocation there as one on a network-attached
    pool."""
    where: dict[tuple[str, str], set[str]] = {}
    for item in slices:
        where.setdefault((item.driver, item.pool), set()).add(item.node_name)
    return [item for item in slices
            if item.node_name and len(where[(item.driver, item.pool)]) > 1]


def _check_share_id() -> str:
    """The shareID of a check's result, which is thrown away (the session's seeded draws
    are kept for the results that are written)."""
    return "check"


def _pod_uid(task: TaskInfo) -> str:
    return str((task.pod.get("metadata") or {}).get("uid") or "")


def _selector_matches(selector: Any, node: NodeInfo) -> bool:
    """Whether ``node`` matches a v1 NodeSelector (None or empty: every node)."""
    if not selector:
        return True
    terms = selector.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(_term_matches(term, node) for term in terms)


def _term_matches(term: Mapping[str, Any], node: NodeInfo) -> bool:
    requirements = [(r, node.labels.get(str(r.get("key")))) for r in
                    term.get("matchExpressions") or []]
    requirements += [(r, node.name if r.get("key") == "metadata.name" else None)
                     for r in term.get("matchFields") or []]
    if not requirements:
        return False
    for req, value in requirements:
        operator = req.get("operator")
        values = [str(v) for v in req.get("values") or []]
        if operator == "In" and value not in values:
            return False
        if operator == "NotIn" and value in values:
            return False
        if operator == "Exists" and value is None:
            return False
        if operator == "DoesNotExist" and value is not None:
            return False
        if operator in ("Gt", "Lt"):
            try:
                number, bound = int(value or ""), int(values[0])
            except (ValueError, IndexError):
                return False
            if (operator == "Gt" and not number > bound) or \
                    (operator == "Lt" and not number < bound):
                return False
    return True
