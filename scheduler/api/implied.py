"""The PodGroup a plain pod implies: what Volcano's podgroup controller makes for a pod of
ours that names no PodGroup.

``podgroup-<UID of the pod's controller>`` (or of the pod itself), ``minMember: 1``, the pod's
requests as ``minResources``, the queue from the pod's ``scheduling.volcano.sh/queue-name``
annotation, the pod's priority class, and the PodGroup-level annotations Volcano copies. The
controller of ``lahar run`` creates it on the API server; the cache schedules the pod at once
under the same name, without waiting for that write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.pod import pod_requests

__all__ = ["COPIED_ANNOTATIONS", "QUEUE_NAME_ANNOTATION", "implied_podgroup",
           "implied_podgroup_name", "owner_of"]

QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
COPIED_ANNOTATIONS = (
    "volcano.sh/preemptable",
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
    "volcano.sh/jdb-min-available",
    "volcano.sh/jdb-max-unavailable",
)


def owner_of(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod's controller reference, or a reference to the pod itself."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid"):
            return {key: ref[key] for key in ("apiVersion", "kind", "name", "uid", "controller")
                    if key in ref}
    return {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name", ""),
            "uid": meta.get("uid", ""), "controller": True}


def implied_podgroup_name(pod: Mapping[str, Any]) -> str:
    return f"podgroup-{owner_of(pod)['uid']}"


def implied_podgroup(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The PodGroup object Volcano's controller would create for ``pod``.

    Raises :class:`~scheduler.api.errors.ObjectError` when the pod's resource requests cannot
    be read.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    owner = owner_of(pod)
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
