"""gangpreempt: Volcano's unit cases (``pkg/scheduler/actions/gangpreempt/gangpreempt_test.go``)
and its e2e cases (``test/e2e/gangevict/gangevict.go``, ``GangPreempt E2E Test``), one test
each, plus ``lahar simulate`` running the sample under ``tests/data/gangevict/``.

The e2e cases run Volcano's ``gangEvictConfig`` on four 1-cpu nodes; every gang has 1-cpu pods.
Matched against ``gangpreempt.go`` (``Execute``, ``preemptJobInDomains``,
``selectDomainBundles``) and ``actions/utils`` (``CreateJobBundles``, ``SortBundlesForPreempt``,
``ApplyAllowedTasks``, ``BuildNominationPlanInDomain``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from actions.gangpreempt import GangPreempt, victim_candidates
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import TaskID, Vote
from scheduler.commands.cli import main
from scheduler.conf import parse_conf
from scheduler.framework.action_args import action_args
from scheduler.framework.arguments import parse_args
from scheduler.framework.gangevict import (
    DEFAULT_MAX_DOMAINS,
    GangEvictArgs,
    flatten,
    select_bundles,
    victim_job_policy,
)
from scheduler.framework.gangvictims import EvictionContext, EvictionKind, unified_evictable
from scheduler.framework.session import PluginEntry, Session
from tests.builders import make_pod, make_podgroup, make_queue, simulate
from tests.scenarios.gangevict_helpers import (
    DATA,
    GANG_EVICT_CONF,
    NODES,
    PermitAll,
    bound,
    capacity_queue,
    gang_job,
    job_named,
    nodes,
    open_session,
    role_job,
)
from tests.scenarios.preemption_helpers import evicted, priority_classes, running


def _run(*objs: Any, conf: str = GANG_EVICT_CONF) -> Any:
    return simulate([*priority_classes(), *nodes(), *objs], conf=conf, max_cycles=8)


# -- unit cases of gangpreempt_test.go ---------------------------------------------------
def _with_arguments(arguments: str) -> str:
    return GANG_EVICT_CONF + f"configurations:\n- name: gangpreempt\n  arguments: {arguments}\n"


def test_max_domains_without_hypernodes_keeps_the_cluster() -> None:
    """gangpreempt_test.go:35 (``PickDomainsFromGradients`` keeps ``maxDomains`` domains).

    Without HyperNodes the cluster is the one domain, so ``maxDomains: 1`` changes nothing
    (and is read, without a warning): the two victims sit on different nodes and the preemptor
    takes both."""
    conf = parse_conf(_with_arguments("{maxDomains: 1}"))
    assert not [w for w in conf.warnings if "maxDomains" in w]
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("victim", "gp-q", "low-priority", 4, 4, on=NODES),
               *gang_job("pre", "gp-q", "high-priority", 2, 2),
               conf=_with_arguments("{maxDomains: 1}"))
    assert running(run, "pre") == 2


def test_without_hypernodes_the_domain_is_the_whole_cluster() -> None:
    """gangpreempt_test.go:51 (no gradient: the cluster-top HyperNode is the one domain).

    The victims of a two-node gang sit on n0 and n3; both nodes are searched and freed."""
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("victim", "gp-q", "low-priority", 2, 2, on=["n0", "n3"]),
               *gang_job("filler", "gp-q", "high-priority", 2, 2, on=["n1", "n2"]),
               *gang_job("pre", "gp-q", "high-priority", 2, 2))
    assert evicted(run) == ["victim-task-0", "victim-task-1"]
    assert sorted(run.node_of(f"pre-task-{i}") or "" for i in range(2)) == ["n0", "n3"]


def test_parse_arguments() -> None:
    """gangpreempt_test.go:56 (``parseArguments`` reads maxDomains and allowWholeBundle)."""
    args = action_args("gangpreempt", GangPreempt.Args,
                       {"gangpreempt": {"maxDomains": 3, "allowWholeBundle": False}})
    assert (args.max_domains, args.allow_whole_bundle) == (3, False)
    assert action_args("gangpreempt", GangPreempt.Args, {}) == GangEvictArgs()
    assert GangEvictArgs().allow_whole_bundle is True


@pytest.mark.parametrize("value", [0, -1], ids=["zero", "negative"])
def test_invalid_max_domains_falls_back_to_default(value: int) -> None:
    """gangpreempt_test.go:74 (a maxDomains of 0 or below is replaced by 8, with a warning)."""
    args, warnings = parse_args(GangEvictArgs, {"maxDomains": value})
    assert args.max_domains == DEFAULT_MAX_DOMAINS == 8
    assert warnings == [f"argument 'maxDomains' is {value}: it must be above 0; 8 is used, "
                        f"as in Volcano"]


def _select(session: Session, *, allow_whole: bool = True) -> list[str]:
    preemptor = job_named(session, "pre")
    pending = list(preemptor.tasks.values())
    candidates = victim_candidates(session, preemptor, list(session.jobs.values()))
    context = EvictionContext(EvictionKind.GANG_PREEMPT, preemptor, pending[0])
    bundles = select_bundles(session, context=context, candidates=candidates,
                             need=pending[0].init_resreq, policy=victim_job_policy(session),
                             allow_whole=allow_whole)
    return [task.name for task in flatten(bundles)]


def _one_victim(podgroup_annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    group = make_podgroup("victim", min_member=1, queue="q1", priority_class="low-priority",
                          phase="Running")
    if podgroup_annotations is not None:
        group["metadata"]["annotations"] = podgroup_annotations
    return [*priority_classes(), *nodes(1), make_queue("q1"), group,
            make_pod("victim-0", group="victim", node="n0", phase="Running", priority=10,
                     priority_class="low-priority"),
            make_podgroup("pre", min_member=1, queue="q1", priority_class="high-priority"),
            make_pod("pre-0", group="pre", priority=100, priority_class="high-priority")]


def test_select_respects_allow_whole_bundle() -> None:
    """gangpreempt_test.go:101: a victim job at its minAvailable offers only a whole bundle,
    which ``allowWholeBundle: false`` drops."""
    session = open_session(_one_victim(), only=PermitAll())
    assert _select(session, allow_whole=False) == []
    assert _select(session, allow_whole=True) == ["victim-0"]


def test_select_respects_victim_job_preemptable() -> None:
    """gangpreempt_test.go:157: a PodGroup annotated ``volcano.sh/preemptable: "false"``
    keeps its job out of gang eviction."""
    session = open_session(_one_victim({"volcano.sh/preemptable": "false"}), only=PermitAll())
    assert _select(session) == []


def test_select_allows_victim_job_when_preemptable_unset() -> None:
    """gangpreempt_test.go:215: a PodGroup that says nothing lets its job be taken, although
    the job's own flag (the legacy default) is false."""
    session = open_session(_one_victim({}), only=PermitAll())
    assert job_named(session, "victim").preemptable is False
    assert _select(session) == ["victim-0"]


# -- e2e cases of test/e2e/gangevict/gangevict.go ----------------------------------------
def test_gp1_safe_bundle_evicts_surplus_and_victim_gang_survives() -> None:
    """gangevict.go:422 GP-1: a 4-pod gang with minAvailable 2 gives up its two surplus pods."""
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("victim", "gp-q", "low-priority", 4, 2, on=NODES),
               *gang_job("pre", "gp-q", "high-priority", 2, 2))
    assert (running(run, "pre"), running(run, "victim")) == (2, 2)
    assert len(evicted(run)) == 2


def test_gp2_safe_bundles_across_gangs_break_none() -> None:
    """gangevict.go:454 GP-2: two gangs of 2 with minAvailable 1 each give one pod."""
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("va", "gp-q", "low-priority", 2, 1, on=["n0", "n1"]),
               *gang_job("vb", "gp-q", "low-priority", 2, 1, on=["n2", "n3"]),
               *gang_job("pre", "gp-q", "high-priority", 2, 2))
    assert (running(run, "pre"), running(run, "va"), running(run, "vb")) == (2, 1, 1)


def test_gp3_whole_bundle_breaks_exactly_one_gang() -> None:
    """gangevict.go:492 GP-3: two tight gangs; the one later in job order (``vb``: equal
    shares and creation, so UID order) goes whole, the other is untouched."""
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("va", "gp-q", "low-priority", 2, 2, on=["n0", "n1"]),
               *gang_job("vb", "gp-q", "low-priority", 2, 2, on=["n2", "n3"]),
               *gang_job("pre", "gp-q", "high-priority", 2, 2))
    assert (running(run, "pre"), running(run, "va"), running(run, "vb")) == (2, 2, 0)
    assert evicted(run) == ["vb-task-0", "vb-task-1"]


def test_gp4_whole_bundles_break_both_gangs_for_a_large_preemptor() -> None:
    """gangevict.go:532 GP-4: a preemptor of 4 takes both tight gangs."""
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("va", "gp-q", "low-priority", 2, 2, on=["n0", "n1"]),
               *gang_job("vb", "gp-q", "low-priority", 2, 2, on=["n2", "n3"]),
               *gang_job("pre", "gp-q", "high-priority", 4, 4))
    assert running(run, "pre") == 4 and len(evicted(run)) == 4


def test_gp5_basic_preemption_of_a_lower_priority_gang() -> None:
    """gangevict.go:564 GP-5: a tight gang of 4 goes whole for a preemptor of 2."""
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("victim", "gp-q", "low-priority", 4, 4, on=NODES),
               *gang_job("pre", "gp-q", "high-priority", 2, 2))
    assert (running(run, "pre"), running(run, "victim")) == (2, 0)


def test_gp5_without_whole_bundles_nothing_is_evicted() -> None:
    """GP-5 with ``allowWholeBundle: false`` (gangpreempt.go:253): no safe bundle, no eviction."""
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("victim", "gp-q", "low-priority", 4, 4, on=NODES),
               *gang_job("pre", "gp-q", "high-priority", 2, 2),
               conf=_with_arguments("{allowWholeBundle: false}"))
    assert (running(run, "pre"), running(run, "victim"), evicted(run)) == (0, 4, [])


def test_gp6_no_preemption_across_queues() -> None:
    """gangevict.go:592 GP-6: the only victims are in another, non-reclaimable queue."""
    run = _run(capacity_queue("q1", 2), capacity_queue("q2", 2, reclaimable=False),
               *gang_job("victim", "q2", "low-priority", 4, 4, on=NODES),
               *gang_job("pre", "q1", "high-priority", 2, 2))
    assert (running(run, "pre"), running(run, "victim"), evicted(run)) == (0, 4, [])


def test_gp7_equal_priority_is_not_preempted() -> None:
    """gangevict.go:629 GP-7."""
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("victim", "gp-q", "middle-priority", 4, 4, on=NODES),
               *gang_job("pre", "gp-q", "middle-priority", 2, 2))
    assert (running(run, "pre"), running(run, "victim"), evicted(run)) == (0, 4, [])


def test_gp8_higher_priority_gang_is_never_a_victim() -> None:
    """gangevict.go:659 GP-8: a middle preemptor of 4 could free only the low gang's 2."""
    run = _run(capacity_queue("gp-q", 4),
               *gang_job("a", "gp-q", "high-priority", 2, 2, on=["n0", "n1"]),
               *gang_job("b", "gp-q", "low-priority", 2, 2, on=["n2", "n3"]),
               *gang_job("pre", "gp-q", "middle-priority", 4, 4))
    assert (running(run, "pre"), running(run, "a"), running(run, "b")) == (0, 2, 2)
    assert evicted(run) == []


def test_gp_r1_role_minimums_keep_role_tight_tasks() -> None:
    """gangevict.go:697 GP-R1: ps (1, min 1) and worker (3, min 2), minAvailable 3; the one
    safe task is a worker, so ps survives and two workers stay."""
    run = _run(capacity_queue("gp-q", 4),
               *role_job("victim", "gp-q", "low-priority", [("ps", 1, 1), ("worker", 3, 2)],
                         3, on=NODES),
               *gang_job("pre", "gp-q", "high-priority", 1, 1))
    assert running(run, "pre") == 1
    assert bound(run, "victim-ps-") == ["victim-ps-0"]
    assert len(bound(run, "victim-worker-")) == 2


# -- lahar simulate ----------------------------------------------------------------------
@pytest.fixture
def logging_restored() -> Iterator[None]:
    """``main`` points structlog at this test's captured stderr; put the old setup back."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


SAMPLE = DATA / "gangevict" / "cluster.yaml"


SAMPLE_CONF = DATA / "gangevict" / "conf.yaml"


@pytest.mark.usefixtures("logging_restored")
@pytest.mark.parametrize("actions", [
    None,  # the sample conf: enqueue, allocate, gangpreempt, gangreclaim
    "allocate, backfill, gangpreempt, gangreclaim",  # Volcano's design document
    "allocate, backfill, gangreclaim, gangpreempt",  # Volcano's gangevict e2e conf
], ids=["sample", "design-doc-order", "e2e-order"])
def test_lahar_simulate_runs_both_actions(actions: str | None, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The sample: two research sweeps fill the cluster (sweep-a can spare two pods, sweep-b
    none); production's gang reclaims, research's urgent hotfix preempts. Both get placed,
    each action evicts, and every sweep ends at its minAvailable or with no pod at all."""
    conf = SAMPLE_CONF
    if actions is not None:
        conf = tmp_path / "conf.yaml"
        conf.write_text(SAMPLE_CONF.read_text().replace(
            '"enqueue, allocate, gangpreempt, gangreclaim"', f'"{actions}"'))
        assert f'"{actions}"' in conf.read_text()
    assert main(["simulate", str(SAMPLE), "--conf", str(conf), "--max-cycles", "8",
                 "-o", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    pods = {o["metadata"]["name"]: o for o in items if o["kind"] == "Pod"}
    placed = {name for name, pod in pods.items() if pod["spec"].get("nodeName")}
    assert {"train-0", "train-1", "hotfix-0"} <= placed
    for sweep, least in (("sweep-a", 2), ("sweep-b", 4)):
        left = len([name for name in placed if name.startswith(f"{sweep}-")])
        assert left == 0 or left >= least, (sweep, left)
    reasons = {e["message"] for e in items if e["kind"] == "Event" and e["reason"] == "Evict"}
    assert reasons >= {"Pod is evicted, because of gangpreempt",
                       "Pod is evicted, because of gangreclaim"}


# -- the unified victim filter (pkg/scheduler/framework/session_plugins_test.go) ---------
class _Answers:
    """A plugin answering the unified filter with fixed task names and vote."""

    def __init__(self, name: str, names: list[str] | None, vote: Vote = Vote.PERMIT) -> None:
        self.NAME = name
        self.names = names
        self.vote = vote
        self.seen: list[EvictionContext] = []

    def on_session_open(self, session: Session) -> None:
        return None

    def on_session_close(self, session: Session) -> None:
        return None

    def unified_evictable(self, context: EvictionContext,
                          candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        self.seen.append(context)
        if self.names is None:
            return list(candidates), self.vote
        return [t for t in candidates if t.name in self.names], self.vote


def _filter(*tiers: list[Any], kind: EvictionKind = EvictionKind.GANG_PREEMPT) -> list[str]:
    session = open_session(_one_victim())
    session.tiers = [[PluginEntry(plugin) for plugin in tier] for tier in tiers]
    job = job_named(session, "pre")
    tasks = [TaskInfo(uid=TaskID(n), name=n, namespace="default", job=job.uid,
                      resreq=Resource(), init_resreq=Resource()) for n in ("a", "b", "c")]
    context = EvictionContext(kind, job, tasks[0])
    return [t.name for t in unified_evictable(session, context, tasks)]


def test_unified_filter_intersects_a_tier() -> None:
    """session_plugins_test.go:140 (TierWalkAndIntersection)."""
    assert _filter([_Answers("p1", ["a", "b"]), _Answers("p2", ["b", "c"])]) == ["b"]


def test_unified_filter_skips_an_abstaining_plugin() -> None:
    """session_plugins_test.go:171 (AbstainSkipped)."""
    assert _filter([_Answers("abstainer", [], Vote.ABSTAIN), _Answers("permitter", ["a"])]) == ["a"]


def test_unified_filter_empty_answer_ends_the_tier() -> None:
    """session_plugins_test.go:199 (EmptyCandidatesBlocksTier): the next tier decides."""
    assert _filter([_Answers("blocker", []), _Answers("permitter", ["a"])],
                   [_Answers("fallback", ["a"])]) == ["a"]


def test_unified_filter_without_answers_gives_no_victims() -> None:
    """session_plugins_test.go:238 (NoPluginsReturnsNil): a plugin with no unified answer
    (here ``drf``, as in Volcano) takes no part."""
    session = open_session(_one_victim())
    drf = next(e for tier in session.tiers for e in tier if e.plugin.NAME == "drf")
    assert _filter([drf.plugin]) == []


def test_unified_filter_passes_the_context_through() -> None:
    """session_plugins_test.go:250 (ContextPassedThrough)."""
    spy = _Answers("spy", None)
    assert _filter([spy], kind=EvictionKind.GANG_RECLAIM) == ["a", "b", "c"]
    assert [(c.kind, c.job.name) for c in spy.seen] == [(EvictionKind.GANG_RECLAIM, "pre")]
