"""Fragmentation-aware placement for the fine-grained GPU family (``FineGrainedPolicy``).

With a policy named, the family scores nodes and picks a shared pod's card with the placement
policies of the FGD paper (Weng et al., USENIX ATC'23) instead of Koordinator's
LeastAllocated / MostAllocated: ``random``, ``dotprod``, ``clustering``, ``packing``,
``bestfit`` and ``fgd`` (:mod:`scheduler.devices.placement.policies`). The policies read a few
numbers per node — free milli of every card, free CPU and memory, card model, the kinds of GPU pods
it hosts — which come from the family's node-table columns and the node table's idle columns,
so a pod is scored over all candidates with array operations only.

``fgd`` needs the *target workload*, the pod shapes the cluster expects with their counts
(``deviceshare.FineGrainedTargetWorkload``); the most frequent shapes covering 95 % of the
count are kept, as in the paper. ``fgd-learned`` (ours, :mod:`scheduler.devices.placement.learned`)
learns it instead from the pods bound to nodes and the pending ones, counted by the
``deviceshare`` plugin when a session opens (``LearnedShapes``: only the nodes renewed since
the last session are counted again), and takes its arguments from
``deviceshare.FineGrainedPolicyArguments``.

Tie-break ``first`` (``deviceshare.FineGrainedTieBreak``) adds to every candidate's device
score less than one point, decreasing with the node's row in the node table, so that among
nodes with equal scores the first one wins instead of a uniform draw. This reproduces the
paper's simulator, which renames nodes with a seeded random prefix and takes the first best;
with uniform draws CPU-only pods spread over every node and FGD leaves about twice the
unallocated GPU (``docs/replay.md``). The default ``random`` leaves Volcano's tie-break.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.api.resource import CPU, MEMORY
from scheduler.devices.finegrained.allocator import fits
from scheduler.devices.finegrained.columns import GPU_SLOTS
from scheduler.devices.finegrained.ledger import Allocation, Ledger, Pick
from scheduler.devices.finegrained.names import (
    GPU_CORE,
    GPU_MEMORY_RATIO,
    LABEL_GPU_MODEL,
    TYPE_GPU,
)
from scheduler.devices.placement.fgd import FgdPolicy
from scheduler.devices.placement.frag import ShapeKey, TargetWorkload, TermsMemo
from scheduler.devices.placement.learned import (
    LearnedArgs,
    LearnedFgdPolicy,
    reserve_holds,
    reserved_cards,
)
from scheduler.devices.placement.policies import Policy, make_policy
from scheduler.devices.placement.state import MILLI, NodeStates, PodShape

__all__ = [
    "KIND_SLOTS",
    "LEARNING_POLICIES",
    "PLACEMENT_POLICIES",
    "TIE_BREAKS",
    "LearnedShapes",
    "Placement",
    "node_pod_shape",
    "parse_policy_arguments",
    "parse_target_workload",
    "placement_picks",
    "placement_scores",
    "shared_placement",
]

PLACEMENT_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd",
                      LearnedFgdPolicy.name)
LEARNING_POLICIES = (LearnedFgdPolicy.name,)
"""Policies whose target workload is counted from the cluster's pods each session."""
TIE_BREAKS = ("random", "first")
KIND_SLOTS = 9
"""Columns counting the GPU pods on a node by kind: 0 card-sharing pods, k pods of k cards."""
_MIB = 1 << 20
_P = "finegrained."
_CORE_TO_MILLI = MILLI // 100


def parse_target_workload(entries: Sequence[Any]) -> TargetWorkload | None:
    """``[{cpu: <milli>, gpuMilli: <per card>, gpus: <cards>, models: "A|B", count: <n>}]``.

    Raises ``ValueError`` naming the entry when one is malformed; None for an empty list.
    """
    counts: dict[ShapeKey, float] = {}
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise ValueError(f"entry {entry!r} is not a mapping")
        try:
            cpu = int(entry.get("cpu", 0))
            milli = int(entry.get("gpuMilli", 0))
            gpus = int(entry.get("gpus", 0))
            count = float(entry.get("count", 1))
        except (TypeError, ValueError):
            raise ValueError(f"entry {dict(entry)!r} has a non-numeric field") from None
        models = entry.get("models", "")
        if not isinstance(models, str):
            raise ValueError(f"entry {dict(entry)!r}: models must be a string like 'A|B'")
        if cpu < 0 or not 0 <= milli <= MILLI or gpus < 0 or count <= 0 or (
                gpus > 1 and milli != MILLI) or (gpus == 0) != (milli == 0):
            raise ValueError(f"entry {dict(entry)!r} is not a valid pod shape")
        key = ShapeKey(cpu, milli, gpus, models)
        counts[key] = counts.get(key, 0.0) + count
    return TargetWorkload.from_counts(counts) if counts else None


def parse_policy_arguments(policy: str, arguments: Mapping[str, Any]) -> LearnedArgs | None:
    """``deviceshare.FineGrainedPolicyArguments`` of ``policy``: None when it takes none.

    Raises ``ValueError`` naming the argument when one is unknown or has a bad value.
    """
    if not isinstance(arguments, Mapping):
        raise ValueError(f"expected a mapping of argument to value, got {arguments!r}")
    if policy not in LEARNING_POLICIES:
        if arguments:
            raise ValueError(f"policy {policy or '(unset)'!r} takes no arguments, got "
                             f"{', '.join(sorted(map(str, arguments)))}")
        return None
    known = LearnedArgs.__dataclass_fields__
    unknown = sorted(str(k) for k in arguments if k not in known)
    if unknown:
        raise ValueError(f"unknown argument {', '.join(unknown)} of policy {policy!r} "
                         f"(known: {', '.join(known)})")
    return LearnedArgs(**{str(k): v for k, v in arguments.items()})


@dataclass(slots=True)
class LearnedShapes:
    """Pod shapes with their counts, as a learning policy's target workload; refilled from
    the session's pods when a session opens.

    The pods bound to nodes are counted per node row (``rows``) and summed (``bound``); a
    session that keeps the last session's placement (same settings, same node rows) counts
    again only the rows renewed since (:meth:`recount_rows`), so a cycle pays for the nodes
    that changed and the pending pods, not for every pod in the cluster. The counts are the
    same as a full count.
    """

    counts: dict[ShapeKey, float] = field(default_factory=dict)
    rows: list[dict[ShapeKey, float]] = field(default_factory=list)
    """Per node row: the shapes of the pods on that node."""
    bound: dict[ShapeKey, float] = field(default_factory=dict)
    """The sum of ``rows``."""

    def recount_rows(self, nodes: Sequence[Any], pending: Iterable[Any], *,
                     renewed: Iterable[int] | None = None) -> None:
        """Count the pods on ``nodes`` (row by row) and the ``pending`` ones.

        With ``renewed`` (the rows renewed since the last count, over the same node rows),
        only those rows are counted again; without it, every row is.
        """
        if renewed is not None and len(self.rows) == len(nodes):
            rows, bound = self.rows, self.bound
            for row in renewed:
                for key, weight in rows[row].items():
                    left = bound[key] - weight
                    if left:
                        bound[key] = left
                    else:
                        del bound[key]
                rows[row] = _count(nodes[row].tasks.values(), {})
                _count_into(bound, rows[row])
        else:
            self.rows = [_count(node.tasks.values(), {}) for node in nodes]
            self.bound = {}
            for counted in self.rows:
                _count_into(self.bound, counted)
        self.counts = _count(pending, dict(self.bound))


def _count(tasks: Iterable[Any], counts: dict[ShapeKey, float]) -> dict[ShapeKey, float]:
    for task in tasks:
        key = task_shape_key(task)
        counts[key] = counts.get(key, 0.0) + 1.0
    return counts


def _count_into(total: dict[ShapeKey, float], part: Mapping[ShapeKey, float]) -> None:
    for key, weight in part.items():
        total[key] = total.get(key, 0.0) + weight


def task_shape_key(task: Any) -> ShapeKey:
    """A pod's learned shape from its requests alone (no device parsing): CPU, and the
    ``koordinator.sh/gpu-core`` percent (the memory ratio when no core is asked) read as
    one shared card below 100, else whole cards."""
    cpu = int(task.resreq.milli_cpu)
    # Extended resources are kept in milli-units.
    percent = round((task.resreq.get(GPU_CORE) or task.resreq.get(GPU_MEMORY_RATIO)) / 1000)
    if percent <= 0:
        return ShapeKey(cpu, 0, 0)
    if percent < 100:
        return ShapeKey(cpu, percent * _CORE_TO_MILLI, 1)
    return ShapeKey(cpu, MILLI, percent // 100)


@dataclass(frozen=True, slots=True)
class Placement:
    """A named policy and how it breaks ties, for one scheduling session."""

    policy: str
    tie_break: str = "random"
    target: TargetWorkload | None = None
    seed: int = 0
    args: LearnedArgs | None = None
    """The arguments of a learning policy (``deviceshare.FineGrainedPolicyArguments``)."""
    learned: LearnedShapes = field(default_factory=LearnedShapes, compare=False)
    terms: TermsMemo | None = field(default=None, compare=False)
    """``fgd``'s per-row fragment terms, kept from one session to the next (see
    :func:`shared_placement`); rows whose cards changed are recomputed."""
    held: set[str] = field(default_factory=set, compare=False)
    """Pods (by key) the whole-card reserve of ``fgd-learned`` holds off whole cards, so
    that their card is picked among the cards in use."""

    def __post_init__(self) -> None:
        if self.terms is None and self.target is not None:
            object.__setattr__(self, "terms", TermsMemo(self.target))

    def same_learning(self, other: object) -> bool:
        """Whether ``other`` is another learning placement of the same settings (no target
        workload, which a learning policy does not read), so it can stand in for this one."""
        return (isinstance(other, Placement) and other is not self
                and self.policy in LEARNING_POLICIES and other.policy == self.policy
                and other.tie_break == self.tie_break and other.seed == self.seed
                and other.args == self.args and self.target is None and other.target is None)

    def _policy(self, states: NodeStates, rng: random.Random) -> Policy:
        if self.policy == LearnedFgdPolicy.name:
            return LearnedFgdPolicy(states, learned=self.learned.counts, args=self.args)
        return make_policy(self.policy, states, rng=rng, target=self.target)

    def hold(self, pod: PodShape, key: str, *, whole_free: int, cards: int) -> int | None:
        """The whole cards the reserve keeps when it holds ``pod`` (see
        :func:`scheduler.devices.placement.learned.reserve_holds`), else None; remembers the verdict
        for the card choice."""
        reserve = float(self.args.reserve) if self.args is not None else 0.0
        counts = self.learned.counts
        if not reserve_holds(pod, counts, whole_free=whole_free, cards=cards, reserve=reserve):
            self.held.discard(key)
            return None
        self.held.add(key)
        return math.ceil(reserved_cards(counts, cards=cards, reserve=reserve))

    def node_scores(self, *, pod: PodShape, gpu_free: np.ndarray, gpu_count: np.ndarray,
                    cpu_free: np.ndarray,
                    mem_bytes: np.ndarray, model: np.ndarray, models: tuple[str, ...],
                    kinds: np.ndarray, rows: np.ndarray, key: str = "") -> np.ndarray:
        """(C,) scores 0–100 (plus the tie-break fraction) of candidate ``rows``; ``key``
        names the pod, so that each pod draws anew (``random``).

        The arrays are per candidate: free core percent per card slot (C, G), cards, free
        milli-CPU,
        free memory bytes, card-model code (index into ``models``, -1 none), pod kinds (C, 9).
        """
        states = _states(gpu_free=gpu_free, gpu_count=gpu_count, cpu_free=cpu_free,
                         mem_bytes=mem_bytes,
                         model=model, models=models, kinds=kinds)
        if self.policy == FgdPolicy.name and self.target is not None and self.terms is not None:
            small, fits, fragment = self.terms.fragments(rows, states)
            policy: Any = FgdPolicy(states, target=self.target, terms=(small, fits),
                                    fragment=fragment)
        else:
            policy = self._policy(states, self._rng(pod, rows, key))
        scores = policy.score(pod, np.arange(len(rows))).astype(float)
        if self.tie_break == "first" and len(rows):
            scores += 0.5 * (1.0 - rows / (rows.max() + 1.0))
        return scores

    def card(self, *, pod: PodShape, gpu_free: np.ndarray, cpu_free: int, mem_bytes: int,
             model: int, models: tuple[str, ...], kinds: np.ndarray,
             key: str = "") -> tuple[int, ...]:
        """The card slots the policy gives ``pod`` on one node; ``gpu_free`` holds the free
        core percent of each of its cards."""
        states = _states(gpu_free=gpu_free[None, :], gpu_count=np.array([len(gpu_free)]),
                         cpu_free=np.array([cpu_free]),
                         mem_bytes=np.array([mem_bytes]), model=np.array([model]),
                         models=models, kinds=kinds[None, :])
        policy = self._policy(states, self._rng(pod, np.array([model]), key))
        if key in self.held and isinstance(policy, LearnedFgdPolicy):
            policy.partial_only = True
        return policy.choose_cards(pod, 0)

    def _rng(self, pod: PodShape, rows: np.ndarray, key: str) -> random.Random:
        # Deterministic per (seed, pod, candidates), also across processes: a session keeps
        # no random state from one cycle to the next. The pod's own key makes the draws of
        # pods of one shape independent: without it each drew the same candidate index (and
        # the same card) as the last one of its shape, piling them up instead of spreading.
        total = int(rows.sum()) if len(rows) else 0
        return random.Random(f"{self.seed}:{key}:{pod.cpu_milli}:{pod.gpu_milli}:"
                             f"{pod.num_gpu}:{len(rows)}:{total}")


_SHARED_LIMIT = 16
_shared: dict[tuple[str, str, int], tuple[Sequence[Any], Placement]] = {}


def shared_placement(policy: str, *, tie_break: str, entries: Sequence[Any]) -> Placement:
    """The :class:`Placement` for these conf values, the same object for the same conf.

    Plugins are rebuilt for every session, but the conf's argument values are not: keyed by
    the identity of the target-workload entries (kept alive in the memo, so an id cannot be
    reused while its entry lives), a session gets the previous session's placement and with
    it the parsed target and the fragment terms already computed.
    """
    key = (policy, tie_break, id(entries))
    cached = _shared.get(key)
    if cached is not None and cached[0] is entries:
        return cached[1]
    placement = Placement(policy, tie_break=tie_break, target=parse_target_workload(entries))
    if len(_shared) >= _SHARED_LIMIT:
        _shared.pop(next(iter(_shared)))
    _shared[key] = (entries, placement)
    return placement


def _states(*, gpu_free: np.ndarray, gpu_count: np.ndarray, cpu_free: np.ndarray,
            mem_bytes: np.ndarray, model: np.ndarray, models: tuple[str, ...],
            kinds: np.ndarray) -> NodeStates:
    return NodeStates(
        gpu_free=np.asarray(gpu_free, dtype=np.int64) * _CORE_TO_MILLI,
        gpu_count=np.asarray(gpu_count, dtype=np.int64),
        cpu_free=np.asarray(cpu_free, dtype=np.int64),
        mem_free=np.asarray(mem_bytes, dtype=np.int64) // _MIB,
        model=np.asarray(model, dtype=np.int64),
        models=models,
        tags=np.asarray(kinds, dtype=np.int64),
    )


def node_pod_shape(task: Any, request: Any) -> PodShape:
    """What a placement policy sees of a pod: CPU, memory, and its GPU request as milli per
    card (``koordinator.sh/gpu-core`` percent × 10, the memory ratio when no core is asked)."""
    cpu = int(task.resreq.milli_cpu)
    memory = int(task.resreq.memory) // _MIB
    gpu = request.types.get(TYPE_GPU) if request is not None else None
    if gpu is None:
        return PodShape(cpu_milli=cpu, memory_mib=memory)
    percent = gpu.per_device.get(GPU_CORE, gpu.per_device.get(GPU_MEMORY_RATIO, 100))
    milli = min(int(percent) * _CORE_TO_MILLI, MILLI) if gpu.shared else MILLI
    return PodShape(cpu_milli=cpu, memory_mib=memory, num_gpu=int(gpu.count), gpu_milli=milli)


def placement_scores(placement: Placement, pod: PodShape, table: Any,
                     rows: np.ndarray, key: str = "") -> np.ndarray:
    """Scores of candidate ``rows`` of the session's node table, from its columns."""
    columns = table.columns
    gpu_free = np.stack([columns[f"{_P}gpu{i}.core"][rows] for i in range(GPU_SLOTS)], axis=1)
    gpu_count = columns[f"{_P}total.{GPU_CORE}"][rows] // 100
    kinds = np.stack([columns[f"{_P}kind{k}"][rows] for k in range(KIND_SLOTS)], axis=1)
    codes, mapping = table.label_codes(LABEL_GPU_MODEL)
    models = tuple(sorted(mapping, key=mapping.__getitem__))
    return placement.node_scores(
        pod=pod, gpu_free=gpu_free, gpu_count=gpu_count,
        cpu_free=table.idle[rows, table.dim_index[CPU]],
        mem_bytes=table.idle[rows, table.dim_index[MEMORY]],
        model=codes[rows], models=models, kinds=kinds, rows=np.asarray(rows), key=key)


def placement_picks(placement: Placement, *, ledger: Ledger, request: Any, task: Any,
                    node: Any, gpu_model: str) -> Allocation | None:
    """The GPUs the policy gives a plain GPU request on ``node`` (the policy's card choice:
    best fit, random or FGD for a shared card, the lowest fully free cards for whole ones);
    None when the request is not a plain GPU request (hints, joint, other types), which
    keeps Koordinator's allocator."""
    gpu = request.types.get(TYPE_GPU)
    if gpu is None or len(request.types) != 1 or request.hints or request.joint is not None \
            or request.partition_spec is not None or gpu.apply_for_all:
        return None
    cards = [d for d in ledger.by_type.get(TYPE_GPU, ()) if d.total]
    free = np.array([ledger.free(TYPE_GPU, d.minor).get(GPU_CORE, 0) for d in cards],
                    dtype=np.int64)
    pod = node_pod_shape(task, request)
    # The session has already taken the pod's CPU and memory from the node's idle.
    cpu = int(node.idle.milli_cpu) + pod.cpu_milli
    memory = int(node.idle.memory) + pod.memory_mib * _MIB
    try:
        slots = placement.card(pod=pod, gpu_free=free, cpu_free=cpu, mem_bytes=memory,
                               model=0 if gpu_model else -1,
                               models=(gpu_model,) if gpu_model else (),
                               kinds=np.zeros(KIND_SLOTS, dtype=np.int64),
                               key=str(task.uid))
    except ValueError:
        return None  # the columns and the ledger disagree: let the exact allocator decide
    picks = []
    for slot in slots:
        charge = fits(ledger, cards[slot], gpu.per_device)
        if charge is None:
            return None
        picks.append(Pick(cards[slot].minor, charge))
    return {TYPE_GPU: tuple(picks)}
