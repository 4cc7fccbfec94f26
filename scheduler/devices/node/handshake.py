"""The node side of the device handshake: what a node's device plugin does for the scheduler.

Kubelet asks a device plugin to ``Allocate`` devices without saying for which pod, so the
plugin finds the pod itself from annotations: the pending pod bound to its node whose
``bind-phase`` is ``allocating`` (oldest ``bind-time`` first; in the HAMi profile the pod named
by the node lock comes first). It decodes the pod's ``devices-to-allocate``, marks the pod
``bind-phase: success`` — or ``failed`` when the annotation is missing or unreadable or names a
card the node does not register — and in every case releases the node lock, so a broken
annotation can never leave a node locked.

When no pod waits, the lock is left alone: the scheduler takes it before the bind, so a lock
without a pending pod usually belongs to a bind still in flight, and releasing it would let a
second device pod onto the node. A lock nobody releases expires after the TTL (see
:mod:`scheduler.devices.node.nodelock`).

The embedded cluster runs these functions as its simulated device plugin after each bind; a
real node-side component can call them with an adapter over the API server. The embedded
cluster marks a bound pod ``Running`` at once, so a pod in any non-terminal phase counts, with
``Pending`` pods served before the others.

:func:`handshake_gpushare` is the same for Volcano's GPU share device plugin: the oldest pod
(by ``volcano.sh/predicate-time``) with a ``volcano.sh/gpu-index`` that is not yet
``volcano.sh/gpu-assigned: "true"`` gets that mark, and the ``gpu`` lock is released.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from scheduler.devices.codec import (
    CodecError,
    ContainerDevice,
    decode_index_list,
    decode_pod_devices,
    parse_register,
)
from scheduler.devices.names import (
    GPU_ASSIGNED,
    GPU_INDEX,
    GPU_NUMBER,
    GPUSHARE_LOCK,
    PREDICATE_TIME,
    VGpuNames,
)
from scheduler.devices.node.nodelock import NodeLocker, parse_lock

__all__ = [
    "ALLOCATING",
    "FAILED",
    "SUCCESS",
    "HandshakeAccess",
    "HandshakeResult",
    "handshake_gpushare",
    "handshake_node",
]

ALLOCATING = "allocating"
SUCCESS = "success"
FAILED = "failed"
_TERMINAL = frozenset({"Succeeded", "Failed"})


class HandshakeAccess(Protocol):
    """What the node side needs from the cluster (the embedded cluster offers all four)."""

    def get_node(self, name: str) -> dict[str, Any]: ...

    def replace_node(self, node: dict[str, Any]) -> dict[str, Any]:
        """Raises on a stale ``resourceVersion`` (HTTP 409 / ``ConflictError``)."""
        ...

    def list_pods_on_node(self, node_name: str) -> list[dict[str, Any]]: ...

    def patch_pod_annotations(self, namespace: str, name: str,
                              annotations: dict[str, str | None]) -> None:
        """Merge the annotations into the pod; a ``None`` value deletes the key."""
        ...


@dataclass(frozen=True, slots=True)
class HandshakeResult:
    """What one handshake did: which pod, with what outcome, and which devices it handed out."""

    pod: str
    """``namespace/name``."""
    outcome: str
    """:data:`SUCCESS` or :data:`FAILED`."""
    devices: tuple[tuple[ContainerDevice, ...], ...] = ()
    """vGPU: the decoded devices per container (empty when the annotation was unreadable)."""
    cards: tuple[int, ...] = ()
    """GPU share: the card indices of ``volcano.sh/gpu-index``."""
    reason: str = ""
    """Why the outcome is ``failed`` (or what else went wrong), for logs and events."""
    lock_released: bool = False


# -- vGPU ----------------------------------------------------------------------------------
def handshake_node(access: HandshakeAccess, node_name: str, names: VGpuNames, now: float, *,
                   sleep: Callable[[float], None] = time.sleep) -> HandshakeResult | None:
    """Serve the oldest ``allocating`` pod on ``node_name``; None when no pod waits.

    ``now`` is the clock of the caller (kept for the lock's log lines and for symmetry with
    the scheduler side); ``sleep`` paces the lock release's conflict retries.
    """
    node = access.get_node(node_name)
    waiting = [pod for pod in access.list_pods_on_node(node_name)
               if _waits(pod, node_name) and _annotations(pod).get(names.bind_phase) == ALLOCATING]
    if not waiting:
        return None
    holder = parse_lock(str(_annotations(node).get(names.lock, "")))[1]
    pod = min(waiting, key=lambda p: (_key(p) != holder if names.lock_with_owner else False,
                                      *_age(p, names.bind_time)))
    devices, reason = _check_devices(pod, node, names)
    outcome = FAILED if reason else SUCCESS
    reason = _patch(access, pod, {names.bind_phase: outcome}, reason)
    owner = _key(pod) if names.lock_with_owner else None
    released = _release(access, node_name, names.lock, owner=owner, now=now, sleep=sleep)
    return HandshakeResult(pod=_key(pod), outcome=outcome, devices=devices, reason=reason,
                           lock_released=released)


def _check_devices(pod: Mapping[str, Any], node: Mapping[str, Any], names: VGpuNames
                   ) -> tuple[tuple[tuple[ContainerDevice, ...], ...], str]:
    """The pod's devices, and why they cannot be handed out ("" when they can)."""
    text = _annotations(pod).get(names.to_allocate)
    if not text:
        return (), f"pod {_key(pod)} has no {names.to_allocate} annotation"
    try:
        containers = decode_pod_devices(str(text), terminated=names.profile == "hami")
    except CodecError as exc:
        return (), f"pod {_key(pod)} has an unreadable {names.to_allocate} annotation: {exc}"
    devices = tuple(tuple(container) for container in containers)
    if not any(devices):
        return devices, f"pod {_key(pod)} has no device in {names.to_allocate}"
    register = _annotations(node).get(names.register)
    if register is None:
        return devices, f"node {_name(node)} has no {names.register} annotation"
    try:
        registered = {card.uuid for card in parse_register(
            str(register), json_format=names.register_json, legacy_fields=True)}
    except CodecError as exc:
        return devices, f"node {_name(node)} has a malformed {names.register} annotation: {exc}"
    # A MIG instance is named ``<card UUID>[group-position]`` (scheduler.devices.mig).
    unknown = sorted({d.uuid for c in devices for d in c
                      if d.uuid.split("[", 1)[0] not in registered})
    if unknown:
        return devices, (f"pod {_key(pod)} was given GPU(s) {', '.join(unknown)}, which node "
                         f"{_name(node)} does not register")
    return devices, ""


# -- GPU share -----------------------------------------------------------------------------
def handshake_gpushare(access: HandshakeAccess, node_name: str, now: float, *,
                       sleep: Callable[[float], None] = time.sleep) -> HandshakeResult | None:
    """Mark the oldest unassigned GPU share pod on ``node_name`` assigned; None if none waits.

    GPU share has no ``failed`` mark: a pod whose ``volcano.sh/gpu-index`` is unreadable or
    names a card the node does not have is passed over (a real kubelet fails its admission),
    so the pods behind it are still served; it is reported only when no other pod waits.
    """
    node = access.get_node(node_name)
    waiting = sorted((pod for pod in access.list_pods_on_node(node_name)
                      if _waits(pod, node_name) and GPU_INDEX in _annotations(pod)
                      and str(_annotations(pod).get(GPU_ASSIGNED, "")).lower() != "true"),
                     key=lambda p: _age(p, PREDICATE_TIME))
    if not waiting:
        return None
    cards = _card_count(node)
    failures: list[str] = []
    chosen: tuple[Mapping[str, Any], tuple[int, ...]] | None = None
    for pod in waiting:
        try:
            indices = tuple(decode_index_list(str(_annotations(pod)[GPU_INDEX])))
        except CodecError as exc:
            failures.append(f"pod {_key(pod)} has an unreadable {GPU_INDEX}: {exc}")
            continue
        missing = [i for i in indices if cards is not None and i >= cards]
        if missing:
            failures.append(f"pod {_key(pod)} was given card(s) {missing} but node {node_name} "
                            f"has {cards}")
            continue
        chosen = (pod, indices)
        break
    released = _release(access, node_name, GPUSHARE_LOCK, owner=None, now=now, sleep=sleep)
    if chosen is None:
        return HandshakeResult(pod=_key(waiting[0]), outcome=FAILED, reason="; ".join(failures),
                               lock_released=released)
    served, indices = chosen
    reason = _patch(access, served, {GPU_ASSIGNED: "true"}, "; ".join(failures))
    return HandshakeResult(pod=_key(served), outcome=SUCCESS, cards=indices, reason=reason,
                           lock_released=released)


def _card_count(node: Mapping[str, Any]) -> int | None:
    status = node.get("status") or {}
    value = (status.get("capacity") or {}).get(GPU_NUMBER,
                                               (status.get("allocatable") or {}).get(GPU_NUMBER))
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None


# -- shared --------------------------------------------------------------------------------
def _patch(access: HandshakeAccess, pod: Mapping[str, Any], annotations: dict[str, str | None],
           reason: str) -> str:
    meta = pod.get("metadata") or {}
    try:
        access.patch_pod_annotations(str(meta.get("namespace") or "default"),
                                     str(meta.get("name")), annotations)
    except Exception as exc:  # the pod may be gone; the lock must be released regardless
        return "; ".join(filter(None, [reason, f"could not update pod {_key(pod)}: {exc}"]))
    return reason


def _release(access: HandshakeAccess, node_name: str, key: str, *, owner: str | None,
             now: float, sleep: Callable[[float], None]) -> bool:
    locker = NodeLocker(access=access, clock=lambda: now, sleep=sleep)
    try:
        return locker.release(node_name, key, owner=owner)
    except Exception:  # unreadable or unwritable node: the lock expires by its TTL
        return False


def _waits(pod: Mapping[str, Any], node_name: str) -> bool:
    if (pod.get("spec") or {}).get("nodeName") != node_name:
        return False
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") not in _TERMINAL


def _age(pod: Mapping[str, Any], time_key: str) -> tuple[bool, int, str]:
    """Sort key: pending pods first, then by the time annotation (unreadable ones first, so a
    broken pod is dealt with instead of starving), then by name for a stable order."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    try:
        stamp = int(str(_annotations(pod).get(time_key, "")).strip())
    except ValueError:
        stamp = -1
    return phase != "Pending", stamp, _key(pod)


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name"))
