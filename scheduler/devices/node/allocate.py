"""``Allocate`` as the node-lock handshake describes it: the scheduler's choice, not kubelet's.

Kubelet picks device IDs it thinks free and calls the endpoint's ``Allocate`` once per
container, without naming the pod. The agent ignores the IDs (only their number counts): it
finds the pod the call is for from the pods bound to this node, reads the devices the
scheduler wrote into the pod's annotations, and answers with the container environment,
mounts and device nodes the family's peer gives, so their container images work unchanged.

* **GPU share** (volcano-device-plugin, ``pkg/plugin/nvidia/server.go`` ``Allocate`` and
  ``utils.go``): the ``Pending`` pod with a ``volcano.sh/gpu-index`` that is not yet
  ``volcano.sh/gpu-assigned``, oldest ``volcano.sh/predicate-time`` first, one of whose
  containers' limit of the resource equals the number of IDs. Environment:
  ``NVIDIA_VISIBLE_DEVICES`` = the card indices, ``VOLCANO_GPU_ALLOCATED`` (IDs × factor),
  ``VOLCANO_GPU_MEMORY_TOTAL`` (the card's MiB). When every GPU container of the pod is
  served the pod gets ``volcano.sh/gpu-assigned: "true"``; the ``gpu`` lock is released after
  every call.
* **vGPU** (volcano-vgpu ``pkg/plugin/vgpu/plugin.go`` / HAMi
  ``pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go`` ``Allocate``, with
  ``GetNextDeviceRequest``, ``EraseNextDeviceTypeFromAnnotation`` and
  ``PodAllocationTrySuccess``): the ``Pending`` pod bound here in bind phase ``allocating``
  (HAMi: the pod the lock names first; then the oldest ``bind-time``) whose next container in
  ``devices-to-allocate`` has as many devices as the call. That container's devices get
  ``NVIDIA_VISIBLE_DEVICES`` (UUIDs), ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` (``<MiB>m``),
  ``CUDA_DEVICE_SM_LIMIT``, ``CUDA_DEVICE_MEMORY_SHARED_CACHE`` and HAMi-core's mounts; the
  container is erased from ``devices-to-allocate``; when none is left the pod's bind phase
  becomes ``success`` and the node lock is released.
* **Fine-grained** (koordlet's runtime hooks ``pkg/koordlet/runtimehooks/hooks/gpu/gpu.go``
  and ``hooks/rdma/rdma.go``, moved into the device plugin): the oldest ``Pending`` pod with a
  ``scheduling.koordinator.sh/device-allocated`` annotation and a container not served yet
  asking as much of the resource as the call. GPUs: ``NVIDIA_VISIBLE_DEVICES`` = the minors,
  and for a HAMi-core isolated share ``CUDA_DEVICE_MEMORY_LIMIT``, ``CUDA_DEVICE_SM_LIMIT``,
  ``LD_PRELOAD`` and the library mount; RDMA: the ``/dev/infiniband`` device nodes of the
  NICs (or their VFs).

When no pod matches, or the matching pod's annotation cannot be used, the call fails with an
:class:`AllocationError` that names the pod and the problem (kubelet fails the pod with it);
for vGPU the pod's bind phase becomes ``failed``. GPU share and the volcano vGPU profile
release the node lock in every case, as their peers do; the HAMi profile releases it only for
the pod that owns it, and leaves it when no pod matched (a bind may still be in flight).
"""

from __future__ import annotations

import os
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.devices.codec import (
    CodecError,
    ContainerDevice,
    decode_index_list,
    decode_pod_devices,
    encode_pod_devices,
)
from scheduler.devices.finegrained.names import (
    ALLOCATED,
    DEPRECATED,
    RDMA,
    TYPE_GPU,
    TYPE_RDMA,
)
from scheduler.devices.names import GPU_ASSIGNED, GPU_INDEX, GPUSHARE_LOCK, PREDICATE_TIME
from scheduler.devices.node.coresettings import hami_core_env, memory_limit
from scheduler.devices.node.handshake import FAILED, SUCCESS, HandshakeAccess
from scheduler.devices.node.inventory import Inventory, uverbs_of
from scheduler.devices.node.nodelock import NodeLocker, parse_lock
from scheduler.devices.node.resources import FINEGRAINED, GPUSHARE, AgentConfig, Endpoint
from scheduler.devices.node.runtime import container_env

__all__ = ["AllocationError", "Allocator", "ContainerAnswer", "DeviceNode", "Mount",
           "hami_core_edits"]

ALLOCATING = "allocating"
NVIDIA_TYPE = "NVIDIA"
RDMA_CM = "/dev/infiniband/rdma_cm"
_TERMINAL = frozenset({"Succeeded", "Failed"})


class AllocationError(Exception):
    """Why ``Allocate`` cannot answer; the message names node, pod and problem."""


@dataclass(frozen=True, slots=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class DeviceNode:
    container_path: str
    host_path: str
    permissions: str = "rw"


@dataclass(frozen=True, slots=True)
class ContainerAnswer:
    """One ``ContainerAllocateResponse``: what the container is given."""

    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceNode, ...] = ()
    cdi_devices: tuple[str, ...] = ()
    """CDI names of the devices (``--cdi``, :mod:`.cdi`)."""
    pod: str = ""
    """``namespace/name`` of the pod served (for logs and tests; not sent to kubelet)."""
    container: str = ""


# -- reading pods --------------------------------------------------------------------------
def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _meta(obj).get("annotations") or {}


def _key(pod: Mapping[str, Any]) -> str:
    return f"{_meta(pod).get('namespace') or 'default'}/{_meta(pod).get('name')}"


def _pending_on(pod: Mapping[str, Any], node_name: str) -> bool:
    """Bound here, not being deleted, and not yet started: kubelet admits ``Pending`` pods."""
    if (pod.get("spec") or {}).get("nodeName") != node_name or _meta(pod).get("deletionTimestamp"):
        return False
    return ((pod.get("status") or {}).get("phase") or "Pending") == "Pending"


def _containers(pod: Mapping[str, Any], *, init: bool = False) -> list[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    found = [*(spec.get("initContainers") or [])] if init else []
    found += spec.get("containers") or []
    return [c for c in found if isinstance(c, Mapping)]


def container_quantity(container: Mapping[str, Any], resource: str) -> int:
    """The container's whole amount of ``resource``: limits, else requests (legacy spelling
    too), 0 when absent or unreadable."""
    resources = container.get("resources") or {}
    names = [resource, *(old for old, new in DEPRECATED.items() if new == resource)]
    for section in ("limits", "requests"):
        values = resources.get(section) or {}
        for name in names:
            if name in values:
                try:
                    return max(int(parse_quantity(values[name])), 0)
                except (QuantityError, TypeError, ValueError):
                    return 0
    return 0


def _stamp(pod: Mapping[str, Any], key: str) -> int:
    try:
        return int(str(_annotations(pod).get(key, "")).strip())
    except ValueError:
        return 2**64  # volcano's GetPredicateTimeFromPodAnnotation: unreadable sorts last


def _created(pod: Mapping[str, Any]) -> str:
    return str(_meta(pod).get("creationTimestamp") or "")


@dataclass(slots=True)
class Allocator:
    """Answers ``Allocate`` and ``GetPreferredAllocation`` for every endpoint of the agent.

    One lock serialises the calls (HAMi's plugin-wide mutex): kubelet may call concurrently,
    and two calls must never pick the same pod."""

    access: HandshakeAccess
    config: AgentConfig
    inventory: Callable[[], Inventory]
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    new_id: Callable[[], str] = lambda: str(uuidlib.uuid4())
    mig: Any = None
    """vGPU ``mig`` mode: the cards' MIG devices (:class:`.modes.MigSource`)."""
    mode_answer: Callable[..., ContainerAnswer] | None = None
    """vGPU ``mig``/``mps`` mode: :func:`.modes.mode_answer`, handed in by the agent (the modes
    module builds on this one, so it is not imported here)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _served: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    """pod uid → (container, resource) handed out by this process (GPU share and
    fine-grained keep no progress in the pod; vGPU keeps it in ``devices-to-allocate``)."""

    @property
    def node_name(self) -> str:
        return self.config.node_name

    def allocate(self, endpoint: Endpoint, requests: Sequence[Sequence[str]]
                 ) -> list[ContainerAnswer]:
        with self._lock:
            answers = [self._one(endpoint, len(ids)) for ids in requests]
        if self.config.cdi:  # the devices by CDI name instead of NVIDIA_VISIBLE_DEVICES
            from scheduler.devices.node.cdi import with_cdi

            inventory = self.inventory()
            answers = [with_cdi(a, inventory, by_minor=endpoint.family == FINEGRAINED)
                       for a in answers]
        return answers

    def _one(self, endpoint: Endpoint, count: int) -> ContainerAnswer:
        if endpoint.family == GPUSHARE:
            return self._gpushare(endpoint, count)
        if endpoint.family == FINEGRAINED:
            return self._finegrained(endpoint, count)
        return self._vgpu(count)

    def preferred(self, endpoint: Endpoint, available: Sequence[str],
                  must_include: Sequence[str], size: int) -> list[str]:
        """IDs on the cards the scheduler chose for the pod ``Allocate`` will serve (HAMi's
        ``GetPreferredAllocation``), so kubelet's books match the scheduler's."""
        from scheduler.devices.node.resources import physical_id

        wanted = self._wanted_cards(endpoint, size)
        chosen = list(must_include)[:size]
        pool = [i for i in available if i not in chosen]
        for card in wanted:
            if len(chosen) >= size:
                break
            pick = next((i for i in pool if physical_id(endpoint, i) == card), None)
            if pick is not None:
                chosen.append(pick)
                pool.remove(pick)
        chosen += pool[: max(size - len(chosen), 0)]
        return chosen[:size]

    def _wanted_cards(self, endpoint: Endpoint, size: int) -> list[str]:
        try:
            pods = self.access.list_pods_on_node(self.node_name)
        except Exception:
            return []
        if endpoint.family == GPUSHARE:
            found = self._find_gpushare(pods, endpoint, size)
            if found is None:
                return []
            try:
                indices = decode_index_list(str(_annotations(found[0]).get(GPU_INDEX, "")))
            except CodecError:
                return []
            per_card = -(-size // max(len(indices), 1))
            return [str(i) for i in indices for _ in range(per_card)]
        if endpoint.family == FINEGRAINED:
            return []
        names = self.config.devices.names
        for pod in self._vgpu_candidates(pods):
            try:
                containers = decode_pod_devices(str(_annotations(pod).get(names.to_allocate, "")),
                                                terminated=names.profile == "hami")
            except CodecError:
                continue
            nxt = next((c for c in containers if c), [])
            if len(nxt) == size:
                return [d.uuid.split("[", 1)[0] for d in nxt]
        return []

    def _pods(self, *, fresh: bool = False) -> list[dict[str, Any]] | None:
        """The pods bound to the node. The Kubernetes adapter answers from a watch-fed mirror,
        which can lag behind a pod created a moment ago; ``fresh`` asks the API server itself
        (its ``list_pods_on_node_uncached``) after the mirror offered nothing to serve, and is
        None for an access without a mirror (its first answer was already current)."""
        if not fresh:
            return self.access.list_pods_on_node(self.node_name)
        uncached = getattr(self.access, "list_pods_on_node_uncached", None)
        return None if uncached is None else list(uncached(self.node_name))

    # -- the node lock --------------------------------------------------------------------
    def _release(self, key: str, *, owner: str | None = None) -> bool:
        locker = NodeLocker(access=self.access, clock=self.clock, sleep=self.sleep)
        try:
            return locker.release(self.node_name, key, owner=owner)
        except Exception:  # unreadable or unwritable node: the lock expires by its TTL
            return False

    def _patch(self, pod: Mapping[str, Any], annotations: dict[str, str | None]) -> str:
        """Patch the pod's annotations; the error text, or '' on success."""
        try:
            self.access.patch_pod_annotations(str(_meta(pod).get("namespace") or "default"),
                                              str(_meta(pod).get("name")), annotations)
        except Exception as exc:
            return f"could not update pod {_key(pod)}: {exc}"
        return ""

    def _mark_served(self, pod: Mapping[str, Any], container: str, resource: str) -> None:
        uid = str(_meta(pod).get("uid") or _key(pod))
        self._served.setdefault(uid, set()).add((container, resource))

    def _was_served(self, pod: Mapping[str, Any], container: str, resource: str) -> bool:
        uid = str(_meta(pod).get("uid") or _key(pod))
        return (container, resource) in self._served.get(uid, set())

    def forget(self, live_uids: set[str]) -> None:
        """Drop the progress of pods that are gone."""
        with self._lock:
            for uid in [u for u in self._served if u not in live_uids]:
                del self._served[uid]

    # -- GPU share ------------------------------------------------------------------------
    def _find_gpushare(self, pods: list[dict[str, Any]], endpoint: Endpoint, count: int
                       ) -> tuple[dict[str, Any], str] | None:
        candidates = sorted(
            (p for p in pods if _pending_on(p, self.node_name) and GPU_INDEX in _annotations(p)
             and str(_annotations(p).get(GPU_ASSIGNED, "false")).lower() == "false"),
            key=lambda p: (_stamp(p, PREDICATE_TIME), _key(p)))
        for pod in candidates:
            for container in _containers(pod):
                name = str(container.get("name", ""))
                if (container_quantity(container, endpoint.resource) == count
                        and not self._was_served(pod, name, endpoint.resource)):
                    return pod, name
        return None

    def _gpushare(self, endpoint: Endpoint, count: int) -> ContainerAnswer:
        found = None
        for fresh in (False, True):
            pods = self._pods(fresh=fresh)
            if pods is None:
                break
            found = self._find_gpushare(pods, endpoint, count)
            if found is not None:
                break
        if found is None:
            self._release(GPUSHARE_LOCK)
            raise AllocationError(
                f"node {self.node_name}: no pending pod with an unassigned {GPU_INDEX} has a "
                f"container asking for {count} {endpoint.resource}")
        pod, container = found
        inventory = self.inventory()
        text = str(_annotations(pod).get(GPU_INDEX, ""))
        try:
            indices = decode_index_list(text)
        except CodecError as exc:
            self._release(GPUSHARE_LOCK)
            raise AllocationError(f"pod {_key(pod)}: unreadable {GPU_INDEX} {text!r}: {exc}"
                                  ) from None
        cards = [inventory.gpu_by_index(i) for i in indices]
        if any(card is None for card in cards):
            self._release(GPUSHARE_LOCK)
            raise AllocationError(
                f"pod {_key(pod)}: {GPU_INDEX} {text!r} names a card node {self.node_name} "
                f"does not have (it has {len(inventory.gpus)})")
        self._mark_served(pod, container, endpoint.resource)
        gpu_containers = [str(c.get("name", "")) for c in _containers(pod)
                          if container_quantity(c, endpoint.resource) > 0]
        problem = ""
        if all(self._was_served(pod, name, endpoint.resource) for name in gpu_containers):
            problem = self._patch(pod, {GPU_ASSIGNED: "true"})
        self._release(GPUSHARE_LOCK)
        if problem:
            raise AllocationError(problem)
        first = cards[0]
        assert first is not None
        factor = self.config.gpu_memory_factor
        return ContainerAnswer(envs={
            "NVIDIA_VISIBLE_DEVICES": ",".join(str(i) for i in indices),
            "VOLCANO_GPU_ALLOCATED": str(count * factor),
            "VOLCANO_GPU_MEMORY_TOTAL": str(first.memory_mib),
        }, pod=_key(pod), container=container)

    # -- vGPU -----------------------------------------------------------------------------
    def _vgpu_candidates(self, pods: list[dict[str, Any]],
                         node: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        names = self.config.devices.names
        waiting = [p for p in pods if _pending_on(p, self.node_name)
                   and _annotations(p).get(names.bind_phase) == ALLOCATING
                   and _annotations(p).get(names.assigned_node, self.node_name) == self.node_name]
        holder = ""
        if node is not None and names.lock_with_owner:
            holder = parse_lock(str(_annotations(node).get(names.lock, "")))[1]
        return sorted(waiting, key=lambda p: (bool(holder) and _key(p) != holder,
                                              _stamp(p, names.bind_time), _key(p)))

    def _vgpu_problem(self, pod: Mapping[str, Any], count: int, inventory: Inventory
                      ) -> tuple[list[list[ContainerDevice]], int, str]:
        """The pod's containers, the position of its next one, and why it cannot serve this
        call ('' when it can)."""
        names = self.config.devices.names
        text = _annotations(pod).get(names.to_allocate)
        if not text:
            return [], -1, f"pod {_key(pod)} has no {names.to_allocate} annotation"
        try:
            containers = decode_pod_devices(str(text), terminated=names.profile == "hami")
        except CodecError as exc:
            return [], -1, (f"pod {_key(pod)} has an unreadable {names.to_allocate} "
                            f"annotation: {exc}")
        position = next((i for i, c in enumerate(containers)
                         if any(d.type.upper().startswith(NVIDIA_TYPE) for d in c)), -1)
        if position < 0:
            return containers, -1, f"pod {_key(pod)} has no device left in {names.to_allocate}"
        devices = containers[position]
        # a MIG instance (``UUID[group-position]``) is on the card its UUID names
        unknown = sorted({d.uuid.split("[", 1)[0] for d in devices}
                         - {g.uuid for g in inventory.gpus})
        if unknown:
            return containers, position, (f"pod {_key(pod)} was given GPU(s) "
                                          f"{', '.join(unknown)}, which node {self.node_name} "
                                          f"does not have")
        if len(devices) != count:
            return containers, position, (f"pod {_key(pod)}: device number not matched: its "
                                          f"next container has {len(devices)} vGPU(s), kubelet "
                                          f"asks for {count}")
        return containers, position, ""

    def _vgpu_fail(self, pod: Mapping[str, Any] | None, reason: str) -> AllocationError:
        """Mark the pod failed and release the lock as the profile's peer does: volcano-vgpu
        releases it whatever holds it (``nodelock.ReleaseNodeLock`` has no owner), HAMi only
        when the failing pod owns it, and not at all when no pod matched: a lock without a
        pending pod belongs to a bind still in flight (``GetPendingPod``'s error path)."""
        names = self.config.devices.names
        if pod is not None:
            problem = self._patch(pod, {names.bind_phase: FAILED})
            reason = "; ".join(filter(None, [reason, problem]))
            self._release(names.lock, owner=_key(pod) if names.lock_with_owner else None)
        elif not names.lock_with_owner:
            self._release(names.lock)
        return AllocationError(reason)

    def _vgpu(self, count: int) -> ContainerAnswer:
        names = self.config.devices.names
        inventory = self.inventory()
        node = None
        if names.lock_with_owner:  # HAMi serves the pod the lock names first
            try:
                node = self.access.get_node(self.node_name)
            except Exception:
                node = None
        candidates: list[dict[str, Any]] = []
        first_problem = ""
        for fresh in (False, True):
            pods = self._pods(fresh=fresh)
            if pods is None:
                break
            candidates = self._vgpu_candidates(pods, node)
            for pod in candidates:
                containers, position, problem = self._vgpu_problem(pod, count, inventory)
                if not problem:
                    return self._vgpu_serve(pod, containers, position)
                if pod is candidates[0]:
                    first_problem = problem
        if not candidates:
            raise self._vgpu_fail(None, f"node {self.node_name}: no pending pod is in bind phase "
                                        f"{ALLOCATING} ({names.bind_phase}) for {count} vGPU(s)")
        raise self._vgpu_fail(candidates[0], first_problem)

    def _vgpu_serve(self, pod: Mapping[str, Any], containers: list[list[ContainerDevice]],
                    position: int) -> ContainerAnswer:
        names = self.config.devices.names
        devices = containers[position]
        spec_containers = _annotated_containers(pod, len(containers), profile=names.profile)
        spec = spec_containers[position] if position < len(spec_containers) else {}
        answer = self._vgpu_answer(pod, spec, devices)
        rest = [list(c) if i != position else [] for i, c in enumerate(containers)]
        patch: dict[str, str | None] = {
            names.to_allocate: encode_pod_devices(rest, terminated=names.profile == "hami")}
        done = not any(rest)  # PodAllocationTrySuccess: nothing left to hand out
        if done:
            patch[names.bind_phase] = SUCCESS  # one write with the erase
        problem = self._patch(pod, patch)
        if problem:
            raise self._vgpu_fail(pod, problem)
        if done:
            self._release(names.lock, owner=_key(pod) if names.lock_with_owner else None)
        return answer

    def _vgpu_answer(self, pod: Mapping[str, Any], container: Mapping[str, Any],
                     devices: list[ContainerDevice]) -> ContainerAnswer:
        if self.config.vgpu_mode != "hami-core":  # MIG instances or MPS (modes.py)
            if self.mode_answer is None:
                raise self._vgpu_fail(pod, f"vGPU {self.config.vgpu_mode} mode is not served")
            try:
                return self.mode_answer(config=self.config, inventory=self.inventory(),
                                   source=self.mig, pod=_key(pod),
                                   container=str(container.get("name", "")), devices=devices)
            except AllocationError as exc:
                raise self._vgpu_fail(pod, str(exc)) from None
        name = str(container.get("name", ""))
        envs, mounts = hami_core_edits(
            self.config, devices, cache_id=self.new_id(),
            cache_dir_name=f"{_meta(pod).get('uid', '')}_{name}", container=container)
        return ContainerAnswer(envs=envs, mounts=mounts, pod=_key(pod), container=name)

    # -- fine-grained ---------------------------------------------------------------------
    def _finegrained(self, endpoint: Endpoint, count: int) -> ContainerAnswer:
        for fresh in (False, True):
            pods = self._pods(fresh=fresh)
            if pods is None:
                break
            candidates = sorted((p for p in pods if _pending_on(p, self.node_name)
                                 and ALLOCATED in _annotations(p)),
                                key=lambda p: (_created(p), _key(p)))
            for pod in candidates:
                for container in _containers(pod, init=True):
                    name = str(container.get("name", ""))
                    if (container_quantity(container, endpoint.resource) == count
                            and not self._was_served(pod, name, endpoint.resource)
                            and not _started(pod, name)):
                        answer = self._finegrained_answer(pod, name, endpoint)
                        self._mark_served(pod, name, endpoint.resource)
                        return answer
        raise AllocationError(
            f"node {self.node_name}: no pending pod with a {ALLOCATED} annotation has a "
            f"container asking for {count} {endpoint.resource}")

    def _finegrained_answer(self, pod: Mapping[str, Any], container: str,
                            endpoint: Endpoint) -> ContainerAnswer:
        """What koordlet's hooks inject into *every* container of the pod, whichever of the
        pod's resources the call is for: the GPU hook's environment (and HAMi-core's mounts)
        and the RDMA hook's device nodes. Kubelet merges the answers of a container's
        resources (the same variables, devices by container path), so a container asking
        for GPU and RDMA gets each once, and one asking for either gets both."""
        # The ledger pulls in the fine-grained placement code (numpy): only this family needs it.
        from scheduler.devices.finegrained.ledger import AllocationError as DecodeError
        from scheduler.devices.finegrained.ledger import decode_allocation

        text = str(_annotations(pod).get(ALLOCATED, ""))
        try:
            allocation = decode_allocation(text)
        except (DecodeError, ValueError) as exc:
            raise AllocationError(f"pod {_key(pod)}: unreadable {ALLOCATED} annotation: {exc}"
                                  ) from None
        gpus, picks = allocation.get(TYPE_GPU, ()), allocation.get(TYPE_RDMA, ())
        rdma = endpoint.resource == RDMA
        if not rdma and not gpus:
            raise AllocationError(f"pod {_key(pod)}: {ALLOCATED} holds no GPU for "
                                  f"{endpoint.resource}")
        devices = self._rdma_nodes(pod, picks) if rdma or picks else ()
        if not gpus:
            return ContainerAnswer(devices=devices, pod=_key(pod), container=container)
        inventory = self.inventory()
        missing = sorted({p.minor for p in gpus} - {g.minor for g in inventory.gpus})
        if missing:
            raise AllocationError(f"pod {_key(pod)}: {ALLOCATED} names GPU minor(s) "
                                  f"{', '.join(map(str, missing))} that node {self.node_name} "
                                  f"does not have")
        envs = container_env(allocation, labels=_meta(pod).get("labels") or {})
        mounts: tuple[Mount, ...] = ()
        if "CUDA_DEVICE_MEMORY_LIMIT" in envs or "CUDA_DEVICE_SM_LIMIT" in envs:
            library = self.config.hami_core_library
            envs["LD_PRELOAD"] = library
            mounts = (Mount(library, library, True), Mount("/tmp/vgpulock", "/tmp/vgpulock",
                                                           False))
        return ContainerAnswer(envs=envs, mounts=mounts, devices=devices, pod=_key(pod),
                               container=container)

    def _rdma_nodes(self, pod: Mapping[str, Any], picks: Sequence[Any]) -> tuple[DeviceNode, ...]:
        inventory = self.inventory()
        by_minor = {nic.minor: nic for nic in inventory.nics}
        nodes = [DeviceNode(RDMA_CM, RDMA_CM)]
        for pick in picks:
            nic = by_minor.get(pick.minor)
            if nic is None:
                raise AllocationError(f"pod {_key(pod)}: {ALLOCATED} names RDMA minor "
                                      f"{pick.minor} that node {self.node_name} does not have")
            functions = [bus for _, bus in pick.vfs] or [nic.bus_id]
            for bus in functions:  # a VF when the pod holds one, else the PF (koordlet)
                path = uverbs_of(self.config.sysfs, bus) or (
                    f"/dev/infiniband/uverbs{nic.minor}" if bus == nic.bus_id else "")
                if not path:
                    raise AllocationError(f"pod {_key(pod)}: no uverbs device for RDMA "
                                          f"function {bus} on node {self.node_name}")
                nodes.append(DeviceNode(path, path))
        return tuple(nodes)



def hami_core_edits(config: AgentConfig, devices: Sequence[ContainerDevice], *, cache_id: str,
                    cache_dir_name: str, container: Mapping[str, Any]
                    ) -> tuple[dict[str, str], tuple[Mount, ...]]:
    """The environment and mounts of a container whose ``devices`` (UUID, MiB, cores) are
    shares enforced by HAMi-core: ``NVIDIA_VISIBLE_DEVICES``, ``CUDA_DEVICE_MEMORY_LIMIT_<i>``,
    ``CUDA_DEVICE_SM_LIMIT``, the shared cache, the switches of :func:`hami_core_env`, the
    library, its per-container cache directory (``<hook>/vgpu/containers/<cache_dir_name>``),
    the lock directory and ``/etc/ld.so.preload``. Shared by the vGPU ``Allocate`` and DRA's
    prepare of a shared GPU, so both give the same values."""
    hami = config.devices.profile == "hami"
    hook = config.vgpu_hook_path
    profile = config.devices.profile
    envs = {"NVIDIA_VISIBLE_DEVICES": ",".join(d.uuid for d in devices)}
    for i, device in enumerate(devices):
        envs[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = memory_limit(
            device.memory, profile=profile, gpu_memory_factor=config.gpu_memory_factor)
    envs["CUDA_DEVICE_SM_LIMIT"] = str(devices[0].cores)
    cache_root = f"{hook}/vgpu" if hami else "/tmp/vgpu"
    envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = f"{cache_root}/{cache_id}.cache"
    envs.update(hami_core_env(
        profile=profile, device_memory_scaling=config.device_memory_scaling,
        device_cores_scaling=config.device_cores_scaling,
        disable_core_limit=config.disable_core_limit,
        libcuda_log_level=config.libcuda_log_level, gpu_core_policy=config.gpu_core_policy,
        container=container))
    cache_dir = f"{hook}/vgpu/containers/{cache_dir_name}"
    if config.prepare_host_dirs:
        for path in (cache_dir, "/tmp/vgpulock"):
            os.makedirs(path, mode=0o777, exist_ok=True)
    if hami:
        mounts = [Mount(f"{hook}/vgpu/libvgpu.so", f"{hook}/vgpu/libvgpu.so", True),
                  Mount(f"{hook}/vgpu", cache_dir, False)]
        preload = f"{hook}/vgpu/ld.so.preload"
    else:
        mounts = [Mount("/usr/local/vgpu/libvgpu.so", f"{hook}/libvgpu.so", True),
                  Mount("/tmp/vgpu", cache_dir, False)]
        preload = f"{hook}/ld.so.preload"
    mounts.append(Mount("/tmp/vgpulock", "/tmp/vgpulock", False))
    if not _disables_control(container, profile=profile):
        mounts.append(Mount("/etc/ld.so.preload", preload, True))
    return envs, tuple(mounts)

def _annotated_containers(pod: Mapping[str, Any], entries: int, *, profile: str
                          ) -> list[Mapping[str, Any]]:
    """The containers the entries of ``devices-to-allocate`` stand for, in order. HAMi writes
    one entry per container, init containers first (``Resourcereqs``; the device plugin's
    ``popNextContainerDevices`` reads them so); volcano-vgpu's ``GetNextDeviceRequest``
    indexes the app containers only, and so does an annotation with one entry per app
    container (Lahar's own, which places app containers)."""
    init = [c for c in (pod.get("spec") or {}).get("initContainers") or []
            if isinstance(c, Mapping)]
    app = _containers(pod)
    if profile == "hami" and init and entries == len(init) + len(app):
        return [*init, *app]
    return app


_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def _disables_control(container: Mapping[str, Any], *, profile: str) -> bool:
    """Whether the container keeps HAMi-core out (no ``/etc/ld.so.preload`` mount): HAMi
    wants ``CUDA_DISABLE_CONTROL`` set to a Go ``ParseBool`` true; volcano-vgpu only that the
    variable is there, whatever its value."""
    envs = [env for env in container.get("env") or []
            if isinstance(env, Mapping) and env.get("name") == "CUDA_DISABLE_CONTROL"]
    if profile != "hami":
        return bool(envs)
    return any(str(env.get("value", "")) in _GO_TRUE for env in envs)


def _started(pod: Mapping[str, Any], container: str) -> bool:
    status = pod.get("status") or {}
    for entry in (*(status.get("initContainerStatuses") or []),
                  *(status.get("containerStatuses") or [])):
        if isinstance(entry, Mapping) and entry.get("name") == container:
            state = entry.get("state") or {}
            return "running" in state or "terminated" in state
    return False
