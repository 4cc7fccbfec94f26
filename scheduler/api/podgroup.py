"""PodGroup (``scheduling.volcano.sh/v1beta1``): the gang a job's pods belong to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.errors import ObjectError
from scheduler.api.resource import QuantityError, Resource, resource_from_list
from scheduler.api.selectors import LabelSelector, parse_label_selector
from scheduler.api.task import parse_time

__all__ = [
    "PHASE_COMPLETED",
    "PHASE_INQUEUE",
    "PHASE_PENDING",
    "PHASE_RUNNING",
    "PHASE_UNKNOWN",
    "NetworkTopology",
    "PodGroup",
    "SubGroupPolicy",
    "podgroup_from_object",
]

PHASE_PENDING = "Pending"
PHASE_INQUEUE = "Inqueue"
PHASE_RUNNING = "Running"
PHASE_UNKNOWN = "Unknown"
PHASE_COMPLETED = "Completed"


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    """``spec.networkTopology``: how widely a job's (or a sub-group's) pods may spread."""

    mode: str = "hard"
    """``hard``: every pod within one HyperNode of tier ``highest_tier_allowed`` or lower;
    ``soft``: as low a tier as the cluster allows."""
    highest_tier_allowed: int | None = None
    highest_tier_name: str = ""
    """A tier named by the HyperNodes' ``spec.tierName``; exclusive with the number."""

    @property
    def hard(self) -> bool:
        return self.mode == "hard"


@dataclass(frozen=True, slots=True)
class SubGroupPolicy:
    """One ``spec.subGroupPolicy`` entry: the pods it selects, partitioned by the values of
    ``match_label_keys``, each partition placed under its own network-topology constraint."""

    name: str
    sub_group_size: int = 1
    min_sub_groups: int = 0
    label_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    network_topology: NetworkTopology | None = None


@dataclass(slots=True)
class PodGroup:
    name: str
    namespace: str
    uid: str = ""
    min_member: int = 1
    min_task_member: dict[str, int] = field(default_factory=dict)
    min_resources: Resource | None = None
    queue: str = "default"
    priority_class_name: str = ""
    creation: float = 0.0
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    phase: str = PHASE_PENDING
    conditions: list[dict[str, Any]] = field(default_factory=list)
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    network_topology: NetworkTopology | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()

    def clone(self) -> PodGroup:
        return PodGroup(
            self.name,
            self.namespace,
            self.uid,
            self.min_member,
            self.min_task_member,
            self.min_resources,
            self.queue,
            self.priority_class_name,
            self.creation,
            self.annotations,
            self.labels,
            self.phase,
            [dict(c) for c in self.conditions],
            self.running,
            self.succeeded,
            self.failed,
            self.network_topology,
            self.sub_groups,
        )

    def status_dict(self) -> dict[str, Any]:
        """The ``status`` object as written to the API."""
        status: dict[str, Any] = {"phase": self.phase}
        if self.conditions:
            status["conditions"] = [dict(c) for c in self.conditions]
        for key in ("running", "succeeded", "failed"):
            value = getattr(self, key)
            if value:
                status[key] = value
        return status


def _int(value: object, *, err: Any, field_name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise err(field_name, f"must be an integer >= {minimum}, got {value!r}")
    return value


def podgroup_from_object(obj: Mapping[str, Any], *, default_queue: str = "default",
                         ignored: frozenset[str] = frozenset()) -> PodGroup:
    """Build a PodGroup from its object; raises :class:`ObjectError` naming the field.

    ``ignored`` are the resource names device families account (Volcano's
    ``IgnoredDevicesList``): they are left out of ``minResources``, as Volcano's
    ``JobInfo.GetMinResources`` reads it through ``NewResource``, so a per-device amount that
    no node total carries never holds a job back at admission."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")

    def err(field_name: str, problem: str) -> ObjectError:
        return ObjectError(
            kind="PodGroup", name=name, namespace=namespace, field=field_name, problem=problem
        )

    min_member = _int(spec.get("minMember", 1), err=err, field_name="spec.minMember")
    min_task_member = {}
    raw_task_member = spec.get("minTaskMember") or {}
    if not isinstance(raw_task_member, Mapping):
        raise err("spec.minTaskMember", "must be a map of role to integer")
    for role, value in raw_task_member.items():
        min_task_member[str(role)] = _int(value, err=err, field_name=f"spec.minTaskMember[{role}]")
    min_resources = None
    if spec.get("minResources") is not None:
        if not isinstance(spec["minResources"], Mapping):
            raise err("spec.minResources", "must be a resource list")
        try:
            min_resources = resource_from_list(spec["minResources"], ignored=ignored)
        except QuantityError as exc:
            raise err("spec.minResources", str(exc)) from None
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    topology = _network_topology(spec.get("networkTopology"), "spec.networkTopology", err)
    sub_groups = _sub_groups(spec.get("subGroupPolicy"), err)
    return PodGroup(
        name=name,
        namespace=namespace,
        uid=str(meta.get("uid") or ""),
        min_member=min_member,
        min_task_member=min_task_member,
        min_resources=min_resources,
        queue=str(spec.get("queue") or default_queue),
        priority_class_name=str(spec.get("priorityClassName") or ""),
        creation=parse_time(meta.get("creationTimestamp")),
        annotations=dict(meta.get("annotations") or {}),
        labels=dict(meta.get("labels") or {}),
        phase=str(status.get("phase") or PHASE_PENDING),
        conditions=conditions,
        running=int(status.get("running") or 0),
        succeeded=int(status.get("succeeded") or 0),
        failed=int(status.get("failed") or 0),
        network_topology=topology,
        sub_groups=sub_groups,
    )


def _network_topology(raw: Any, where: str, err: Any) -> NetworkTopology | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise err(where, "must be an object")
    mode = raw.get("mode") or "hard"
    if mode not in ("hard", "soft"):
        raise err(where + ".mode", f"must be hard or soft, got {mode!r}")
    tier = raw.get("highestTierAllowed")
    if tier is not None:
        tier = _int(tier, err=err, field_name=where + ".highestTierAllowed")
    name = raw.get("highestTierName") or ""
    if not isinstance(name, str):
        raise err(where + ".highestTierName", "must be a string")
    if tier is not None and name:
        raise err(
            where + ".highestTierName",
            "highestTierAllowed and highestTierName cannot be set together",
        )
    return NetworkTopology(mode=mode, highest_tier_allowed=tier, highest_tier_name=name)


def _sub_groups(raw: Any, err: Any) -> tuple[SubGroupPolicy, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise err("spec.subGroupPolicy", "must be a list")
    policies: list[SubGroupPolicy] = []
    names: set[str] = set()
    for i, entry in enumerate(raw):
        where = f"spec.subGroupPolicy[{i}]"
        if not isinstance(entry, Mapping):
            raise err(where, "must be an object")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise err(where + ".name", "must be a non-empty string")
        if name in names:
            raise err(where + ".name", f"{name!r} is given twice")
        names.add(name)
        keys = entry.get("matchLabelKeys") or []
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise err(where + ".matchLabelKeys", "must be a list of strings")
        selector = entry.get("labelSelector")
        policies.append(
            SubGroupPolicy(
                name=name,
                sub_group_size=_int(
                    entry.get("subGroupSize", 1),
                    err=err,
                    field_name=where + ".subGroupSize",
                    minimum=1,
                ),
                min_sub_groups=_int(
                    entry.get("minSubGroups", 0), err=err, field_name=where + ".minSubGroups"
                ),
                label_selector=None
                if selector is None
                else parse_label_selector(selector, where + ".labelSelector", err),
                match_label_keys=tuple(keys),
                network_topology=_network_topology(
                    entry.get("networkTopology"), where + ".networkTopology", err
                ),
            )
        )
    return tuple(policies)
