"""PodGroups for plain pods, the way Volcano's podgroup controller makes them.

The scheduler tracks jobs through PodGroups: a pod joins one through the
``scheduling.k8s.io/group-name`` annotation. Pods created by Deployments, StatefulSets or by
hand carry none, and without Volcano's controller manager nobody would give them one. This
controller does that work inside ``lahar run``: for each pending pod of our schedulers without a
group it creates ``podgroup-<controller owner UID>`` (or ``podgroup-<pod UID>``) with
``minMember: 1``, the pod's requests as ``minResources``, the queue from the pod's
``scheduling.volcano.sh/queue-name`` annotation and the pod's priority class, copies the
PodGroup-level annotations Volcano copies, then writes the group name back onto the pod.

The names are Volcano's, so running next to Volcano's own controller is harmless: whichever
writes first wins and the other finds the PodGroup already there. Pods are collected from the
pod watch (:meth:`PodGroupController.observe`, any thread) and served between scheduling cycles
(:meth:`PodGroupController.sync`); a write that fails is logged with the pod's name and tried
again at the next sync.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from scheduler.api.errors import ObjectError
from scheduler.api.pod import pod_requests
from scheduler.api.task import GROUP_NAME_ANNOTATION, VOLCANO_GROUP_NAME_ANNOTATION
from scheduler.cluster.kube.client import MERGE_PATCH, KubeClient, object_path
from scheduler.cluster.kube.retry import RetryPolicy, status_of

__all__ = ["COPIED_ANNOTATIONS", "QUEUE_NAME_ANNOTATION", "PodGroupController", "podgroup_for"]

log = structlog.get_logger("lahar.podgroups")

QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
COPIED_ANNOTATIONS = (
    "volcano.sh/preemptable",
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
    "volcano.sh/jdb-min-available",
    "volcano.sh/jdb-max-unavailable",
)
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"


def _owner(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod's controller reference, or a reference to the pod itself."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid"):
            return {key: ref[key] for key in ("apiVersion", "kind", "name", "uid", "controller")
                    if key in ref}
    return {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name", ""),
            "uid": meta.get("uid", ""), "controller": True}


def podgroup_for(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The PodGroup Volcano's controller would create for ``pod``.

    Raises :class:`ObjectError` when the pod's resource requests cannot be read.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    owner = _owner(pod)
    requests, _ = pod_requests(pod)
    group_spec: dict[str, Any] = {
        "minMember": 1,
        "minResources": requests.to_quantities(),
    }
    queue = annotations.get(QUEUE_NAME_ANNOTATION)
    if queue:
        group_spec["queue"] = queue
    if spec.get("priorityClassName"):
        group_spec["priorityClassName"] = spec["priorityClassName"]
    copied = {key: str(annotations[key]) for key in COPIED_ANNOTATIONS if key in annotations}
    group_meta: dict[str, Any] = {
        "name": f"podgroup-{owner['uid']}",
        "namespace": meta.get("namespace", "default"),
        "ownerReferences": [owner],
    }
    if copied:
        group_meta["annotations"] = copied
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": group_meta, "spec": group_spec, "status": {"phase": "Pending"}}


@dataclass(slots=True)
class PodGroupController:
    """Creates PodGroups for our schedulers' plain pods (see the module docstring)."""

    client: KubeClient
    scheduler_names: Iterable[str]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    report: Callable[[Mapping[str, Any], str], None] | None = None
    """Called with the pod and a message when a pod cannot be given a PodGroup."""
    _names: frozenset[str] = frozenset()
    _pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._names = frozenset(self.scheduler_names)

    def wants(self, pod: Mapping[str, Any]) -> bool:
        """A pending pod of ours, not being deleted, that belongs to no PodGroup."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        annotations = meta.get("annotations") or {}
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        return (spec.get("schedulerName", "default-scheduler") in self._names
                and not spec.get("nodeName")
                and phase == "Pending"
                and not meta.get("deletionTimestamp")
                and not annotations.get(GROUP_NAME_ANNOTATION)
                and not annotations.get(VOLCANO_GROUP_NAME_ANNOTATION))

    def observe(self, event_type: str, pod: Mapping[str, Any]) -> None:
        """Feed one pod watch event (safe from any thread)."""
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        with self._lock:
            if event_type != "DELETED" and self.wants(pod):
                self._pending[key] = dict(pod)
            else:
                self._pending.pop(key, None)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def sync(self) -> int:
        """Give every collected pod its PodGroup; returns how many pods were annotated."""
        with self._lock:
            batch = list(self._pending.items())
        done = 0
        for key, pod in batch:
            if self._serve(pod):
                done += 1
                with self._lock:
                    if self._pending.get(key) is pod:
                        del self._pending[key]
        return done

    def _serve(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        namespace, name = meta.get("namespace", "default"), meta.get("name", "")
        try:
            group = podgroup_for(pod)
        except (ObjectError, ValueError) as error:
            message = f"cannot create a PodGroup for pod {namespace}/{name}: {error}"
            log.warning("pod left without a PodGroup", pod=f"{namespace}/{name}",
                        error=str(error))
            if self.report is not None:
                self.report(pod, message)
            return True  # not retried until the pod changes
        group_name = group["metadata"]["name"]
        try:
            self.retry.call(self.client.request_json, "POST",
                            object_path(VOLCANO, "podgroups", namespace=namespace), body=group)
            log.info("created a PodGroup for a plain pod", pod=f"{namespace}/{name}",
                     podgroup=group_name)
        except Exception as error:
            if status_of(error) != 409:  # 409: it exists already (a sibling or Volcano)
                log.warning("cannot create PodGroup", podgroup=f"{namespace}/{group_name}",
                            pod=f"{namespace}/{name}", error=str(error))
                return False
        patch = {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: group_name}}}
        try:
            self.retry.call(self.client.request_json, "PATCH",
                            object_path("/api/v1", "pods", name=name, namespace=namespace),
                            body=patch, content_type=MERGE_PATCH)
        except Exception as error:
            if status_of(error) == 404:
                return True  # the pod is gone
            log.warning("cannot annotate pod with its PodGroup", pod=f"{namespace}/{name}",
                        podgroup=group_name, error=str(error))
            return False
        return True
