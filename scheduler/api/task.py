"""TaskInfo: one pod as the scheduler sees it.

A task is built once per pod version (:func:`task_from_pod`) and cloned cheaply for each
session snapshot: the parsed spec, requests and raw pod are shared, only mutable scheduling
state (status, node, binding annotations) is copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.api.errors import ObjectError
from scheduler.api.pod import PodParseMemo, PodSpecInfo, parse_pod_spec, pod_requests
from scheduler.api.resource import Resource
from scheduler.api.types import JobID, TaskID, TaskStatus

__all__ = [
    "GO_TRUE",
    "GROUP_NAME_ANNOTATION",
    "TASK_PRIORITY_ANNOTATION",
    "TASK_SPEC_KEY",
    "TaskInfo",
    "go_parse_int32",
    "group_of",
    "parse_time",
    "pod_key",
    "preemptable_flag",
    "task_from_pod",
    "task_status_of",
]

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_NAME_ANNOTATION = "scheduling.volcano.sh/group-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_PRIORITY_ANNOTATION = "volcano.sh/task-priority"
PREEMPTABLE_KEY = "volcano.sh/preemptable"


@dataclass(slots=True)
class TaskInfo:
    uid: TaskID
    name: str
    namespace: str
    job: JobID
    resreq: Resource
    init_resreq: Resource
    status: TaskStatus = TaskStatus.PENDING
    node_name: str = ""
    role: str = ""
    priority: int = 1
    preemptable: bool = True
    best_effort: bool = False
    creation: float = 0.0
    scheduler_name: str = ""
    nominated_node: str = ""
    sched_gated: bool = False
    spec: PodSpecInfo = field(default_factory=PodSpecInfo)
    pod: Mapping[str, Any] = field(default_factory=dict)
    """The pod object this task was built from (read-only)."""
    bind_annotations: dict[str, str] = field(default_factory=dict)
    """Annotations to send inside the Binding (device choices)."""
    last_node: str = ""
    """Node of the last in-session placement attempt, for close-time messages."""
    notes: tuple[str, ...] = ()
    """What was left out of the pod when it was read (``field <path>: <problem>``): set only
    for what Volcano ignores and for a bound pod, which is kept whatever cannot be read."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def annotations(self) -> Mapping[str, str]:
        return (self.pod.get("metadata") or {}).get("annotations") or {}

    def clone(self) -> TaskInfo:
        return TaskInfo(
            self.uid,
            self.name,
            self.namespace,
            self.job,
            self.resreq,
            self.init_resreq,
            self.status,
            self.node_name,
            self.role,
            self.priority,
            self.preemptable,
            self.best_effort,
            self.creation,
            self.scheduler_name,
            self.nominated_node,
            self.sched_gated,
            self.spec,
            self.pod,
            self.bind_annotations.copy() if self.bind_annotations else {},
            self.last_node,
            self.notes,
        )


_INT32 = (-(2**31), 2**31 - 1)


def go_parse_int32(value: object) -> int | None:
    """``strconv.ParseInt(value, 10, 32)``: an optional sign and decimal digits only (no
    spaces, no underscores) within int32; None where Go returns an error."""
    text = value if isinstance(value, str) else None
    if not text:
        return None
    digits = text[1:] if text[0] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    number = int(text)
    return number if _INT32[0] <= number <= _INT32[1] else None


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


_TIMES: dict[str, float] = {}
"""Timestamps parsed before: the pods of a job, and of any burst, share their second."""
_TIMES_LIMIT = 4096


def parse_time(value: object) -> float:
    """An RFC 3339 timestamp as epoch seconds (0 when absent or unparsable)."""
    if type(value) is str:
        seconds = _TIMES.get(value)
        if seconds is not None:
            return seconds
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        seconds = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        seconds = 0.0
    if len(_TIMES) >= _TIMES_LIMIT:
        _TIMES.clear()
    _TIMES[value] = seconds
    return seconds


def task_status_of(pod: Mapping[str, Any]) -> TaskStatus:
    """Volcano's mapping from pod phase (and deletion, node) to task status."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    deleting = bool(meta.get("deletionTimestamp"))
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if (pod.get("spec") or {}).get("nodeName") else TaskStatus.PENDING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


def group_of(meta: Mapping[str, Any]) -> str:
    """The PodGroup an object's metadata names (either annotation), or ""."""
    annotations = meta.get("annotations") or {}
    return str(
        annotations.get(GROUP_NAME_ANNOTATION)
        or annotations.get(VOLCANO_GROUP_NAME_ANNOTATION)
        or ""
    )


GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
"""What Go's ``strconv.ParseBool`` reads as true; its false set is the same shapes of 0/f/false,
and anything else is an error, which Volcano's readers of ``volcano.sh/preemptable`` take as
false (``GetPodPreemptable``, ``JobInfo.extractPreemptable``)."""


def preemptable_flag(annotations: Mapping[str, Any], labels: Mapping[str, Any],
                     default: bool) -> bool:
    """``volcano.sh/preemptable`` as Volcano reads it: the annotation, else the label, each
    with ``strconv.ParseBool`` (an unreadable value is false); ``default`` when neither."""
    value = annotations.get(PREEMPTABLE_KEY, labels.get(PREEMPTABLE_KEY))
    if value is None:
        return default
    return str(value) in GO_TRUE


def task_from_pod(
    pod: Mapping[str, Any],
    *,
    ignored: frozenset[str] = frozenset(),
    memo: PodParseMemo | None = None,
) -> TaskInfo:
    """Build a task from a pod object; raises :class:`ObjectError` naming the broken field.

    With ``memo``, the requests and constraints of a spec parsed before are reused (a pod's
    updates and a job's pods mostly repeat them); errors come in the same order either way.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    # A bound pod holds its node's resources whatever else is wrong with it: what cannot be
    # read is left out and named in ``notes``, never the whole pod.
    notes: list[str] | None = [] if spec.get("nodeName") else None
    if not isinstance(annotations, Mapping):
        if notes is None:
            raise ObjectError(
                kind="Pod",
                name=name,
                namespace=namespace,
                field="metadata.annotations",
                problem="must be a map of strings",
            )
        notes.append("field metadata.annotations: must be a map of strings; ignored")
        annotations = {}
    if notes is not None and not isinstance(labels, Mapping):
        notes.append("field metadata.labels: must be a map of strings; ignored")
        labels = {}
    memo_key = memo.key(pod, ignored) if memo is not None else None
    parsed = memo.get(memo_key) if memo is not None and memo_key is not None else None
    if parsed is None:
        resreq, init_resreq = pod_requests(pod, ignored=ignored, notes=notes)
    else:
        resreq, init_resreq, spec_info = parsed
    group = group_of(meta)
    priority = spec.get("priority")
    if priority is None or isinstance(priority, bool) or not isinstance(priority, int):
        priority = 1
    override = annotations.get(TASK_PRIORITY_ANNOTATION)
    if override is not None:
        value = go_parse_int32(override)
        if value is None:
            # Volcano's NewTaskInfo ignores what strconv.ParseInt(.., 10, 32) refuses.
            note = (f"field metadata.annotations[{TASK_PRIORITY_ANNOTATION}]: {override!r} is "
                    "not a 32-bit integer; ignored, as in Volcano")
            (notes if notes is not None else (notes := [])).append(note)
        else:
            priority = value
    if parsed is None:
        try:
            spec_info = parse_pod_spec(pod)
        except ObjectError as exc:
            if notes is None:
                raise
            notes.append(f"field {exc.field}: {exc.problem}; the pod's constraints are ignored")
            spec_info = PodSpecInfo()
        except (AttributeError, TypeError, ValueError) as exc:
            if notes is None:
                raise
            notes.append(f"field spec: cannot be read ({exc}); the pod's constraints are "
                         "ignored")
            spec_info = PodSpecInfo()
        else:
            if memo is not None and memo_key is not None and not notes:
                memo.put(memo_key, (resreq, init_resreq, spec_info))
    gates = spec.get("schedulingGates") or []
    return TaskInfo(
        uid=TaskID(str(meta.get("uid") or f"{namespace}/{name}")),
        name=name,
        namespace=namespace,
        job=JobID(f"{namespace}/{group}" if group else ""),
        resreq=resreq,
        init_resreq=init_resreq,
        status=task_status_of(pod),
        node_name=str(spec.get("nodeName") or ""),
        role=str(annotations.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or ""),
        priority=priority,
        preemptable=preemptable_flag(annotations, labels, True),
        best_effort=init_resreq.is_empty(),
        creation=parse_time(meta.get("creationTimestamp")),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        nominated_node=str((pod.get("status") or {}).get("nominatedNodeName") or ""),
        sched_gated=bool(gates),
        spec=spec_info,
        pod=pod,
        notes=tuple(notes or ()),
    )
