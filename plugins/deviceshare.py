"""deviceshare: GPU share, GPU number and vGPU placement through the node table.

Volcano's ``deviceshare`` plugin, with its arguments (the older ``predicate.GPUSharingEnable``,
``predicate.GPUNumberEnable``, ``predicate.NodeLockEnable`` and ``predicate.VGPUEnable`` of the
``predicates`` plugin switch the same families on). Per pod the work is split so that Python
never loops over every node:

* pre-predicate: read the pod's device request once; a request that can never be honoured
  (a fraction of a card, a negative amount) makes the pod unschedulable with that reason;
* vector predicate: each family keeps summary columns in the node table (largest free card,
  idle cards, ...) and rejects nodes with one comparison per column;
* exact predicate: the family's fitting runs only on the candidates left, with Volcano-shaped
  reasons;
* scoring: the family's score of the chosen cards, rounded, times ``ScheduleWeight``;
* on allocate: with ``NodeLockEnable``, a node whose lock is held (in the cluster, or by a pod
  this session already placed there) or unreadable fails the allocation, as Volcano's
  ``Allocate`` does when ``LockNode`` fails: the lock is no predicate, so the pod is not steered
  to another node, it waits for a later cycle, and its condition says why. Otherwise cards are
  chosen and charged in the node's ledger and the annotations for the Binding are written into
  ``task.bind_annotations``; a Statement rollback takes them back. The lock itself is taken
  right before the bind (:mod:`scheduler.deviceconf`), so a discarded gang leaves no lock behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.api.node import NodeInfo
from scheduler.api.status import FitErrors, Status
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskID, TaskStatus
from scheduler.devices.base import (
    POLICIES,
    DeviceConfig,
    DeviceError,
    DeviceFamily,
    DeviceRequestError,
    config_from_args,
    lock_owner,
)
from scheduler.devices.exclusive import parse_exclusive_rules
from scheduler.devices.finegrained.placement import (
    LEARNING_POLICIES,
    PLACEMENT_POLICIES,
    TIE_BREAKS,
    parse_policy_arguments,
    parse_target_workload,
)
from scheduler.devices.names import PROFILES
from scheduler.devices.node.nodelock import LOCK_TTL, lock_problem
from scheduler.devices.registry import enabled_families
from scheduler.framework.arguments import ArgumentError, arg, note, notes_field
from scheduler.framework.hooks import BoolArray, FloatArray, IntArray
from scheduler.framework.nodetable import NodeTable
from scheduler.framework.plugin import PluginBase
from scheduler.framework.session import AllocateError, Session

__all__ = ["ConflictingSwitches", "DeviceShare", "DeviceShareArgs"]

_OWNER = "plugin deviceshare"
_LEGACY_PLUGIN = "predicates"
_SETTINGS = "deviceshare.ledger-settings"
"""Node-table ``derived`` key: the (policy, placement) this session wrote onto the ledgers."""

Requests = list[tuple[DeviceFamily, Any]]


class ConflictingSwitches(ArgumentError):
    """Two switches Volcano refuses to start with together (its message, plus the keys)."""

    def __init__(self, key: str, message: str) -> None:
        ValueError.__init__(self, f"{_OWNER}: {message}")
        self.owner = _OWNER
        self.key = key


@dataclass(frozen=True, slots=True)
class DeviceShareArgs:
    gpu_sharing: bool = arg("deviceshare.GPUSharingEnable", False)
    gpu_number: bool = arg("deviceshare.GPUNumberEnable", False)
    vgpu: bool = arg("deviceshare.VGPUEnable", False)
    node_lock: bool = arg("deviceshare.NodeLockEnable", False)
    policy: str = arg("deviceshare.SchedulePolicy", "")
    weight: int = arg("deviceshare.ScheduleWeight", 0)
    profile: str = arg("deviceshare.VGPUProfile", "volcano")
    vgpu_legacy_register: bool = arg("deviceshare.VGPURegisterLegacyFields", False)
    """Ours: also read register entries of five fields (older plugins, no mode)."""
    finegrained: bool = arg("deviceshare.FineGrainedDeviceEnable", False)
    finegrained_scoring: str = arg("deviceshare.FineGrainedScoring", "LeastAllocated")
    finegrained_weights: tuple[tuple[str, int], ...] = arg(
        "deviceshare.FineGrainedScoringResources", ())
    """Koordinator's ``ScoringStrategy.Resources``: a list of ``{name, weight}``."""
    finegrained_unsupported: tuple[tuple[str, str], ...] = arg(
        "deviceshare.FineGrainedShareUnsupportedModels", ())
    """Koordinator's ``GPUShareUnsupportedModels``: ``{vendor, model}`` of nodes whose GPUs
    must not be shared."""
    finegrained_policy: str = arg("deviceshare.FineGrainedPolicy", "")
    """Ours: a placement policy of the FGD paper for node score and card choice."""
    finegrained_tie_break: str = arg("deviceshare.FineGrainedTieBreak", "random")
    finegrained_target: tuple[Any, ...] = arg("deviceshare.FineGrainedTargetWorkload", ())
    finegrained_policy_args: Any = arg("deviceshare.FineGrainedPolicyArguments", None)
    """Ours: ``{name: value}`` arguments of a policy that takes some (``fgd-learned``)."""
    geometries_cm_name: str = arg("deviceshare.KnownGeometriesCMName",
                                  "volcano-vgpu-device-config")
    geometries_cm_namespace: str = arg("deviceshare.KnownGeometriesCMNamespace", "kube-system")
    """Where Volcano's device ConfigMap (MIG geometries, ``gpuMemoryFactor``) is read."""
    exclusive_rules: Any = arg("deviceshare.GPUExclusiveRules", None)
    """Volcano's vGPU exclusivity rules: a list of label maps (:mod:`.exclusive`)."""
    notes: tuple[str, ...] = notes_field()

    def __post_init__(self) -> None:
        _check_exclusive(self)
        if self.weight < 0:
            # Volcano adds the device score only while ScheduleWeight > 0.
            note(self, f"argument 'deviceshare.ScheduleWeight' is {self.weight}: device scores "
                       f"count only above 0, so it scores nothing, as 0 does in Volcano")
            object.__setattr__(self, "weight", 0)
        if self.policy not in POLICIES:
            raise ArgumentError(_OWNER, "deviceshare.SchedulePolicy",
                                "binpack, spread or empty (unset)", self.policy)
        if self.profile not in PROFILES:
            raise ArgumentError(_OWNER, "deviceshare.VGPUProfile",
                                " or ".join(sorted(PROFILES)), self.profile)
        _check_finegrained(self)
        # Volcano's deviceshare plugin exits on these combinations (enablePredicate).
        if self.gpu_sharing and self.gpu_number:
            raise ConflictingSwitches(
                "deviceshare.GPUNumberEnable",
                "can not define true in both gpu sharing and gpu number "
                "(deviceshare.GPUSharingEnable and deviceshare.GPUNumberEnable); "
                "enable one of them")
        if (self.gpu_sharing or self.gpu_number) and self.vgpu:
            raise ConflictingSwitches(
                "deviceshare.VGPUEnable",
                "gpu-share and vgpu can't be used together (deviceshare.GPUSharingEnable or "
                "deviceshare.GPUNumberEnable with deviceshare.VGPUEnable)")


def _check_exclusive(args: DeviceShareArgs) -> None:
    rules, warnings = parse_exclusive_rules(args.exclusive_rules)
    for warning in warnings:
        note(args, warning)
    if rules and not args.vgpu:
        note(args, "argument 'deviceshare.GPUExclusiveRules' acts on vGPU cards only, and "
                   "deviceshare.VGPUEnable is not true here; the rules apply only if "
                   "predicate.VGPUEnable turns vGPU on")
    object.__setattr__(args, "exclusive_rules", rules)


def _check_placement(args: DeviceShareArgs) -> None:
    if args.finegrained_policy and args.finegrained_policy not in PLACEMENT_POLICIES:
        raise ArgumentError(_OWNER, "deviceshare.FineGrainedPolicy",
                            ", ".join(PLACEMENT_POLICIES) + " or empty (unset)",
                            args.finegrained_policy)
    if args.finegrained_tie_break not in TIE_BREAKS:
        raise ArgumentError(_OWNER, "deviceshare.FineGrainedTieBreak",
                            " or ".join(TIE_BREAKS), args.finegrained_tie_break)
    try:
        target = parse_target_workload(args.finegrained_target)
    except ValueError as exc:
        raise ArgumentError(_OWNER, "deviceshare.FineGrainedTargetWorkload",
                            "a list of {cpu, gpuMilli, gpus, models, count}", str(exc)) from None
    if args.finegrained_policy == "fgd" and target is None:
        raise ArgumentError(_OWNER, "deviceshare.FineGrainedTargetWorkload",
                            "a non-empty target workload with FineGrainedPolicy fgd", "[]")
    # Our keys only act together; a key that would change nothing is refused, not ignored.
    if args.finegrained_policy and not args.finegrained:
        raise ArgumentError(_OWNER, "deviceshare.FineGrainedPolicy",
                            "used with deviceshare.FineGrainedDeviceEnable: true",
                            args.finegrained_policy)
    if args.finegrained_policy and args.weight == 0:
        raise ArgumentError(_OWNER, "deviceshare.ScheduleWeight",
                            "above 0 with deviceshare.FineGrainedPolicy (0 scores nothing)", 0)
    if target is not None and args.finegrained_policy != "fgd":
        raise ArgumentError(_OWNER, "deviceshare.FineGrainedTargetWorkload",
                            "used with deviceshare.FineGrainedPolicy: fgd",
                            f"{len(args.finegrained_target)} entries")
    try:
        parse_policy_arguments(args.finegrained_policy, args.finegrained_policy_args or {})
    except ValueError as exc:
        raise ArgumentError(_OWNER, "deviceshare.FineGrainedPolicyArguments",
                            "arguments of deviceshare.FineGrainedPolicy (see docs/replay.md)",
                            str(exc)) from None
    if args.finegrained_tie_break != "random" and not args.finegrained_policy:
        raise ArgumentError(_OWNER, "deviceshare.FineGrainedTieBreak",
                            "used with deviceshare.FineGrainedPolicy",
                            args.finegrained_tie_break)


def _check_finegrained(args: DeviceShareArgs) -> None:
    _check_placement(args)
    if args.finegrained_scoring not in ("LeastAllocated", "MostAllocated"):
        raise ArgumentError(_OWNER, "deviceshare.FineGrainedScoring",
                            "LeastAllocated or MostAllocated", args.finegrained_scoring)
    weights: list[tuple[str, int]] = []
    for item in args.finegrained_weights:
        if isinstance(item, tuple) and len(item) == 2:
            weights.append(item)
            continue
        name = item.get("name") if isinstance(item, dict) else None
        weight = item.get("weight", 1) if isinstance(item, dict) else None
        if not isinstance(name, str) or isinstance(weight, bool) or not isinstance(weight, int) \
                or weight < 0:
            raise ArgumentError(_OWNER, "deviceshare.FineGrainedScoringResources",
                                "a list of {name: <resource>, weight: <integer >= 0>}", item)
        weights.append((name, weight))
    object.__setattr__(args, "finegrained_weights", tuple(weights))
    models: list[tuple[str, str]] = []
    for entry in args.finegrained_unsupported:
        if isinstance(entry, tuple) and len(entry) == 2:
            models.append(entry)
            continue
        vendor = entry.get("vendor", "") if isinstance(entry, dict) else None
        model = entry.get("model") if isinstance(entry, dict) else None
        if not isinstance(vendor, str) or not isinstance(model, str) or not model:
            raise ArgumentError(_OWNER, "deviceshare.FineGrainedShareUnsupportedModels",
                                "a list of {vendor: <label value>, model: <label value>}", entry)
        models.append((vendor, model))
    object.__setattr__(args, "finegrained_unsupported", tuple(models))


def _always(request: Any, columns: Any) -> bool:
    return True


@dataclass(slots=True)
class _Held:
    """What one in-session allocation wrote, so a rollback can take it back."""

    node: str
    keys: tuple[str, ...]
    locks: tuple[str, ...]


def _pending_pods(session: Session) -> Iterator[TaskInfo]:
    # A settled job has no pod waiting for a node, so the active jobs hold every pending one.
    for job in session.active_jobs.values():
        for task in job.tasks.values():
            if task.status == TaskStatus.PENDING and not task.node_name:
                yield task


class DeviceShare(PluginBase[DeviceShareArgs]):
    NAME = "deviceshare"
    Args = DeviceShareArgs

    def __init__(self, args: DeviceShareArgs) -> None:
        super().__init__(args)
        self.config = DeviceConfig()
        self.families: list[DeviceFamily] = []
        self._requests: dict[TaskID, Requests | DeviceRequestError] = {}
        self._scores: dict[str, float] = {}
        self._scored_task: TaskID | None = None
        self._held: dict[TaskID, _Held] = {}
        self._session_locks: dict[tuple[str, str], TaskID] = {}
        """(node, lock key) → the task this session placed there under that lock."""

    # -- session --------------------------------------------------------------------------
    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        legacy = [entry.plugin.args for entry in session.plugin_entries()
                  if getattr(entry.plugin, "NAME", "") == _LEGACY_PLUGIN]
        self.config = config_from_args(self.args, *legacy)
        self.families = enabled_families(self.config) if self.config.any_enabled else []
        if not self.families:
            return
        placement = next((getattr(f, "placement", None) for f in self.families
                          if getattr(f, "placement", None) is not None), None)
        table = session.table
        # The conf may have changed since the ledgers were built. Nodes carried over from
        # the previous table got these settings then, unless the settings changed since.
        carried = table.carried(_SETTINGS)
        learned_renewed: list[int] | None = None
        if carried is not None and placement is not None \
                and placement.same_learning(carried[0][1]):
            # A learning policy's placement is rebuilt with the families each session; the
            # last session's, of the same settings, is kept instead, so that the ledgers
            # carried over still point at the session's placement and its shape counts
            # need counting again only on the renewed rows.
            placement, learned_renewed = carried[0][1], carried[1]
            for family in self.families:
                if getattr(family, "placement", None) is not None:
                    family.adopt_placement(placement)  # type: ignore[attr-defined]
        rows: Sequence[int] = range(len(table))
        if carried is not None and carried[0][0] == self.config.policy \
                and carried[0][1] is placement:
            rows = carried[1]
        nodes = table.nodes
        for row in rows:
            for devices in nodes[row].others.values():
                if hasattr(devices, "policy"):
                    devices.policy = self.config.policy
                if hasattr(devices, "placement"):
                    devices.placement = placement
        table.derived[_SETTINGS] = (self.config.policy, placement)
        if placement is not None:
            placement.held.clear()  # the reserve's verdicts hold for one session
        if placement is not None and placement.policy in LEARNING_POLICIES:
            # The policy's target workload: the pods on nodes and the pending ones now,
            # counted again only on the rows renewed since the last session.
            placement.learned.recount_rows(table.nodes, _pending_pods(session),
                                           renewed=learned_renewed)
        columns = [column for family in self.families for column in family.COLUMNS]
        table.add_row_hook(self._sync_row, columns=columns)  # carried over, or zeros filled

    def _sync_row(self, row: int, node: NodeInfo) -> None:
        columns = self.ssn.table.columns
        for family in self.families:
            devices = node.others.get(family.NAME)
            values = devices.summary() if devices is not None else (0.0,) * len(family.COLUMNS)
            for column, value in zip(family.COLUMNS, values, strict=True):
                columns[column][row] = value

    def requests(self, task: TaskInfo) -> Requests:
        """The task's request per enabled family; raises :class:`DeviceRequestError`."""
        cached = self._requests.get(task.uid)
        if cached is None:
            try:
                cached = [(family, request) for family in self.families
                          if (request := family.parse_request(task)) is not None]
            except DeviceRequestError as exc:
                cached = exc
            self._requests[task.uid] = cached
        if isinstance(cached, DeviceRequestError):
            raise cached
        return cached

    def _safe_requests(self, task: TaskInfo) -> Requests:
        try:
            return self.requests(task)
        except DeviceRequestError:
            return []

    # -- filtering ------------------------------------------------------------------------
    def pre_predicate(self, task: TaskInfo) -> Status | None:
        if not self.families:
            return None
        try:
            self.requests(task)
        except DeviceRequestError as exc:
            return Status.unresolvable(str(exc), plugin=self.NAME)
        return None

    def predicate_mask(
        self, task: TaskInfo, table: NodeTable, rows: slice | None = None
    ) -> BoolArray:
        window = slice(None) if rows is None else rows
        mask = np.ones(len(table.span(window)), dtype=bool)
        for family, request in self._safe_requests(task):  # the families answer every node
            mask &= family.vector_fit(request, table.columns)[window]
            for failed, _ in self._reserve(task, family, request, table):
                mask &= ~failed[window]
        return mask

    @staticmethod
    def _reserve(task: TaskInfo, family: DeviceFamily, request: Any, table: NodeTable
                 ) -> list[tuple[BoolArray, str]]:
        """What a placement policy's whole-card reserve keeps from ``task`` (fgd-learned)."""
        conditions = getattr(family, "reserve_conditions", None)
        return conditions(task, request, table.columns) if conditions is not None else []

    def predicate_reasons(
        self, task: TaskInfo, table: NodeTable, alive: BoolArray
    ) -> list[tuple[BoolArray, str]]:
        out: list[tuple[BoolArray, str]] = []
        for family, request in self._safe_requests(task):
            out.extend(family.vector_reasons(request, table.columns))
            out.extend(self._reserve(task, family, request, table))
        return out

    def wants_exact(self, task: TaskInfo) -> bool:
        # A family whose columns decide a request exactly (``needs_exact`` False) spares the
        # per-node loop; a node lock always needs it.
        columns = self.ssn.table.columns
        return any(family.lock_name(request) is not None
                   or getattr(family, "needs_exact", _always)(request, columns)
                   for family, request in self._safe_requests(task))

    def check_node(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        requests = self._safe_requests(task)
        if not requests:
            return None
        if self._scored_task != task.uid:
            self._scored_task = task.uid
            self._scores.clear()
        score = 0.0
        for family, request in requests:
            devices = node.others.get(family.NAME)
            if devices is None:
                return Status.unschedulable(f"node {node.name} has no {family.NAME} devices",
                                            plugin=self.NAME)
            fit = devices.filter_node(task, request)
            if fit.status is not None:
                return fit.status
            score += fit.score
        self._scores[node.name] = score
        return None

    # -- scoring --------------------------------------------------------------------------
    def score_nodes(self, task: TaskInfo, table: NodeTable, candidates: IntArray) -> FloatArray:
        scores = np.zeros(len(candidates))
        if self.config.weight == 0:
            return scores
        requests = self._safe_requests(task)
        placed = self._placement_scores(task, requests, table, candidates)
        if placed is not None:
            return placed * self.config.weight
        if not requests:
            return scores
        if all(hasattr(family, "vector_score") for family, _ in requests):
            for family, request in requests:  # one pass over all candidates
                scores += family.vector_score(request, table.columns,  # type: ignore[attr-defined]
                                              candidates)
            return scores * self.config.weight
        for i, row in enumerate(candidates):
            node = table.nodes[int(row)]
            cached = self._scores.get(node.name) if self._scored_task == task.uid else None
            if cached is None:
                cached = 0.0
                for family, request in requests:
                    devices = node.others.get(family.NAME)
                    if devices is not None:
                        cached += devices.filter_node(task, request).score
            scores[i] = cached
        # Volcano rounds the device score to a whole number before weighting it
        # (getDeviceScore), which decides ties between nearly equal nodes.
        return np.floor(scores + 0.5) * self.config.weight

    def _placement_scores(self, task: TaskInfo, requests: Requests, table: NodeTable,
                          candidates: IntArray) -> FloatArray | None:
        """The placement policy's scores when a family has one (``FineGrainedPolicy``) and
        the pod asks no other family for devices; CPU-only pods are scored too, since where
        they go decides which cards starve of CPU."""
        for family in self.families:
            if getattr(family, "placement", None) is None:
                continue
            if any(other is not family for other, _ in requests):
                return None
            request = next((r for f, r in requests if f is family), None)
            return family.placement_scores(task, request, table,  # type: ignore[attr-defined]
                                           candidates)
        return None

    # -- allocation -----------------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        if task.status not in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED) or not self.families:
            return
        try:
            requests = self.requests(task)
        except DeviceRequestError as exc:
            raise AllocateError(str(exc)) from None
        if not requests:
            return
        node = self.ssn.nodes[task.node_name]
        keys: list[str] = []
        locks: list[str] = []
        now = self.ssn.clock()
        self._check_locks(task, requests, node, now)
        try:
            for family, request in requests:
                devices = node.others.get(family.NAME)
                if devices is None:
                    raise DeviceError(f"node {node.name} has no {family.NAME} devices")
                if getattr(devices, "placement", None) is not None:
                    annotations = devices.allocate(task, request, now=now, node=node)
                else:
                    annotations = devices.allocate(task, request, now=now)
                task.bind_annotations.update(annotations)
                keys.extend(annotations)
                lock = family.lock_name(request)
                if lock is not None:
                    locks.append(lock)
        except DeviceError as exc:
            for key in keys:
                task.bind_annotations.pop(key, None)
            raise AllocateError(str(exc)) from None
        self._held[task.uid] = _Held(node.name, tuple(keys), tuple(locks))
        for lock in locks:
            self._session_locks[(node.name, lock)] = task.uid
        self.ssn.table.sync(node.index)  # the ledger changed after the row was synced

    def _check_locks(self, task: TaskInfo, requests: Requests, node: NodeInfo,
                     now: float) -> None:
        """Fail the allocation when a lock this pod needs is held or unreadable."""
        for family, request in requests:
            key = family.lock_name(request)
            if key is None:
                continue
            holder = self._session_locks.get((node.name, key))
            if holder is not None and holder != task.uid:
                problem: str | None = (
                    f"node {node.name} has been locked within {int(LOCK_TTL // 60)} minutes (lock "
                    f"{key} taken in "
                    f"this cycle for pod {self._placed_name(holder)})")
            else:
                problem = lock_problem(node.name, key, node.annotations.get(key), now,
                                       owner=lock_owner(self.config, key, task))
            if problem is not None:
                job = self.ssn.jobs.get(task.job)
                if job is not None:  # the reason the pod's condition shows after this cycle
                    job.nodes_fit_errors[task.uid] = FitErrors(nodes=1, error=problem)
                raise AllocateError(problem)

    def _placed_name(self, uid: TaskID) -> str:
        for job in self.ssn.jobs.values():
            task = job.tasks.get(uid)
            if task is not None:
                return task.key
        return str(uid)

    def on_deallocate(self, task: TaskInfo) -> None:
        if task.status is not TaskStatus.PENDING:
            return  # an eviction: the pod keeps its devices until it is gone
        held = self._held.pop(task.uid, None)
        if held is None:
            return
        for key in held.keys:
            task.bind_annotations.pop(key, None)
        for lock in held.locks:
            if self._session_locks.get((held.node, lock)) == task.uid:
                del self._session_locks[(held.node, lock)]
