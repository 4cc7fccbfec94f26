"""The cache's Dynamic Resource Allocation objects, and the claim writes before a bind.

DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates (``resource.k8s.io/v1``)
are kept raw and parsed once per version by the allocator's model. A session sees them through a
:class:`DraView` taken with the snapshot; the view also carries what the scheduler decided but has
not written yet (:attr:`DraStore.pending`), so a claim allocated in one cycle and written in the
next is never handed out twice.

A session's DRA plugin records each placed task's claims in :attr:`DraView.session`; when the
session commits the task for binding, :meth:`DraStore.committed` moves them to ``pending``. The
bind worker then writes every claim's ``status.allocation`` and ``status.reservedFor`` before the
Binding (:meth:`DraStore.before_bind`), with the claim's ``resourceVersion`` (optimistic
concurrency); a conflict re-reads the claim and tries again while the claim is still free or
allocated the same way, else the bind fails, which rolls the task back and resyncs it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import structlog

from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskID
from scheduler.cache.drabinding import BINDING_TIMEOUT, await_binding_conditions
from scheduler.cache.interface import WriteError
from scheduler.framework.draapi import (
    allocation_to_dict,
    device_class_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.framework.draview import DraView, PendingClaim

__all__ = ["DRA_API_VERSION", "DRA_KINDS", "ClaimWriter", "DraStore", "check_dra_object"]

log = structlog.get_logger("lahar.dra")

DRA_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
DRA_API_VERSION = "resource.k8s.io/v1"
_CONFLICT_RETRIES = 3


@runtime_checkable
class ClaimWriter(Protocol):
    """The writes a cluster offers for ResourceClaims (``lahar run``'s writer, the embedded
    cluster); a writer without them cannot schedule pods with claims."""

    def get_resource_claim(self, *, namespace: str, name: str) -> dict[str, Any] | None: ...

    def update_resource_claim_status(self, claim: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the claim's ``status`` subresource (its ``resourceVersion`` included); raises
        :class:`WriteError` with status 409 on a conflict. Returns the claim as written."""


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name") or "")


class DraStore:
    """DRA objects as the cache holds them, and the claims decided but not yet written."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[str, dict[str, Mapping[str, Any]]] = {kind: {} for kind in DRA_KINDS}
        self.parsed: dict[str, dict[str, Any]] = {kind: {} for kind in DRA_KINDS}
        self.pending: dict[TaskID, list[PendingClaim]] = {}
        self.written: dict[TaskID, list[PendingClaim]] = {}
        """Claims written for a pod whose Binding is on its way (released if it fails)."""
        self.last_view: DraView | None = None
        self._view: DraView | None = None
        self.binding_timeout = BINDING_TIMEOUT
        """How long a bind waits for its devices' binding conditions (seconds)."""
        self.binding_poll = 1.0
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], None] = time.sleep

    # -- events ---------------------------------------------------------------------------
    def apply(self, kind: str, deleted: bool, obj: Mapping[str, Any]) -> None:
        """Take one object; raises ``ValueError`` naming the object and field when the
        allocator's model cannot read it (the cache reports it and keeps the last version)."""
        key = _key(obj)
        with self.lock:
            if not deleted and _older(obj, self.objects[kind].get(key)):
                return  # a watch event from before a claim write this store applied already
            if deleted:
                self.objects[kind].pop(key, None)
                self.parsed[kind].pop(key, None)
            else:
                parsed = _PARSERS[kind](obj) if kind in _PARSERS else None
                self.objects[kind][key] = obj
                self.parsed[kind][key] = parsed
            self._view = None

    def claim_object(self, key: str) -> Mapping[str, Any] | None:
        with self.lock:
            return self.objects["ResourceClaim"].get(key)

    def has_template(self, key: str) -> bool:
        with self.lock:
            return key in self.objects["ResourceClaimTemplate"]

    # -- snapshot -------------------------------------------------------------------------
    def view(self, *, session: bool = True) -> DraView:
        """The view for the next session (rebuilt only when something changed); with
        ``session`` False a view for reading only, whose decisions are never written."""
        with self.lock:
            base = self._view
            if base is None:
                base = self._view = self._build()
            view = DraView(
                classes=base.classes, slices=base.slices, claims=base.claims,
                claim_objects=base.claim_objects, templates=base.templates,
                allocations=dict(base.allocations), reserved=dict(base.reserved),
                slice_nodes=base.slice_nodes, network_slices=base.network_slices)
            for entries in self.pending.values():
                for entry in entries:
                    view.allocations[entry.key] = entry.allocation
                    holders = view.reserved.get(entry.key, ())
                    if entry.pod_uid not in holders:
                        view.reserved[entry.key] = (*holders, entry.pod_uid)
            if session:
                self.last_view = view
            return view

    def _build(self) -> DraView:
        slices = [s for s in self.parsed["ResourceSlice"].values() if s is not None]
        claims = {k: c for k, c in self.parsed["ResourceClaim"].items() if c is not None}
        allocations: dict[str, Any] = {}
        reserved: dict[str, tuple[str, ...]] = {}
        for key, claim in claims.items():
            if claim.allocation is not None:
                allocations[key] = claim.allocation
            obj = self.objects["ResourceClaim"][key]
            uids = tuple(str(ref.get("uid") or "") for ref in
                         (obj.get("status") or {}).get("reservedFor") or []
                         if isinstance(ref, Mapping))
            if uids:
                reserved[key] = uids
        return DraView(
            classes={name: c for name, c in self.parsed["DeviceClass"].items() if c is not None},
            slices=slices, claims=claims, claim_objects=dict(self.objects["ResourceClaim"]),
            templates=frozenset(self.objects["ResourceClaimTemplate"]),
            allocations=allocations, reserved=reserved,
            slice_nodes=frozenset(s.node_name for s in slices if s.node_name),
            network_slices=any(not s.node_name for s in slices))

    # -- session → binder -----------------------------------------------------------------
    def committed(self, tasks: list[TaskInfo]) -> None:
        """The session committed ``tasks`` for binding: their claims become pending writes."""
        view = self.last_view
        if view is None or not view.session:
            return
        with self.lock:
            for task in tasks:
                entries = view.session.pop(task.uid, None)
                if entries:
                    self.pending[task.uid] = entries

    def forget(self, uid: TaskID) -> None:
        """Drop what a pod's bind would have written (the bind failed or was dropped)."""
        with self.lock:
            self.pending.pop(uid, None)

    def before_bind(self, writer: object, task: TaskInfo) -> None:
        """Write the task's pending claims; raises :class:`WriteError` when one cannot be."""
        with self.lock:
            entries = list(self.pending.get(task.uid, ()))
        if not entries:
            return
        if not isinstance(writer, ClaimWriter):
            raise WriteError("this cluster cannot write ResourceClaims")
        written: list[PendingClaim] = []
        try:
            for entry in entries:
                self._write_claim(writer, entry)
                written.append(entry)
            await_binding_conditions(writer, written, timeout=self.binding_timeout,
                                     interval=self.binding_poll, clock=self.clock,
                                     sleep=self.sleep)
        except WriteError:
            self._release(writer, written)
            raise
        with self.lock:
            self.pending.pop(task.uid, None)
            self.written[task.uid] = written

    def after_bind(self, writer: object, task: TaskInfo, failure: Exception | None) -> None:
        """After a failed Binding, take the pod out of the claims written for it (and free
        a claim no other pod uses), as kube-scheduler's Unreserve does."""
        with self.lock:
            self.pending.pop(task.uid, None)
            written = self.written.pop(task.uid, [])
        if failure is not None and written and isinstance(writer, ClaimWriter):
            self._release(writer, written)

    def _release(self, writer: ClaimWriter, entries: list[PendingClaim]) -> None:
        for entry in entries:
            namespace, name = entry.key.split("/", 1)
            for _ in range(_CONFLICT_RETRIES + 1):
                try:
                    obj = writer.get_resource_claim(namespace=namespace, name=name)
                    if obj is None:
                        break
                    status = dict(obj.get("status") or {})
                    reserved = [r for r in status.get("reservedFor") or []
                                if isinstance(r, Mapping) and r.get("uid") != entry.pod_uid]
                    status["reservedFor"] = reserved
                    if not reserved:
                        status.pop("allocation", None)
                        status.pop("reservedFor", None)
                    written = writer.update_resource_claim_status({**obj, "status": status})
                except WriteError as exc:
                    if exc.status == 409:
                        continue
                    log.warning("could not release a claim", claim=entry.key, error=str(exc))
                    break
                self.apply("ResourceClaim", False, written)
                break

    def _write_claim(self, writer: ClaimWriter, entry: PendingClaim) -> None:
        namespace, name = entry.key.split("/", 1)
        obj = self.claim_object(entry.key)
        wanted = allocation_to_dict(entry.allocation)
        for attempt in range(_CONFLICT_RETRIES + 1):
            if obj is None:
                raise WriteError(f"ResourceClaim {entry.key} not found", status=404)
            status = dict(obj.get("status") or {})
            current = status.get("allocation")
            if current and not _same_allocation(current, wanted):
                raise WriteError(f"ResourceClaim {entry.key} was allocated elsewhere meanwhile")
            reserved = [dict(r) for r in status.get("reservedFor") or [] if isinstance(r, Mapping)]
            if current and any(r.get("uid") == entry.pod_uid for r in reserved):
                return  # already written (a retried bind)
            if not current:
                status["allocation"] = wanted
            if not any(r.get("uid") == entry.pod_uid for r in reserved):
                reserved.append({"resource": "pods", "name": entry.pod_name,
                                 "uid": entry.pod_uid})
            status["reservedFor"] = reserved
            updated = dict(obj)
            updated["status"] = status
            try:
                written = writer.update_resource_claim_status(updated)
            except WriteError as exc:
                if exc.status != 409 or attempt == _CONFLICT_RETRIES:
                    # Not 409: to the binder that means "the pod is bound already".
                    raise WriteError(f"ResourceClaim {entry.key}: {exc}",
                                     status=0 if exc.status == 409 else exc.status) from None
                log.info("claim changed meanwhile, reading it again", claim=entry.key)
                obj = writer.get_resource_claim(namespace=namespace, name=name)
                continue
            self.apply("ResourceClaim", False, written)
            return


def _older(obj: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether ``obj`` is an earlier version of ``current`` (numeric resourceVersions, as the
    API server's etcd revisions are; anything else is taken as newer)."""
    if current is None:
        return False
    new = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    old = str((current.get("metadata") or {}).get("resourceVersion") or "")
    return new.isdigit() and old.isdigit() and int(new) < int(old)


def _same_allocation(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """The same devices (results compared without their order), whatever else differs."""
    def results(allocation: Mapping[str, Any]) -> list[tuple[str, ...]]:
        items = ((allocation.get("devices") or {}).get("results")) or []
        return sorted((str(r.get("request")), str(r.get("driver")), str(r.get("pool")),
                       str(r.get("device")), str(r.get("shareID") or "")) for r in items)

    return results(current) == results(wanted)


def check_dra_object(kind: str, obj: Mapping[str, Any]) -> None:
    """Raise the model's ``ValueError`` (naming the object and field) for an unreadable one."""
    parser = _PARSERS.get(kind)
    if parser is not None:
        parser(obj)


_PARSERS: dict[str, Any] = {
    "DeviceClass": device_class_from_dict,
    "ResourceSlice": resource_slice_from_dict,
    "ResourceClaim": resource_claim_from_dict,
}
