"""gangreclaim: Volcano's unit cases (``pkg/scheduler/actions/gangreclaim/gangreclaim_test.go``)
and its e2e cases (``test/e2e/gangevict/gangevict.go``, ``GangReclaim E2E Test``), one test
each.

The e2e cases run Volcano's ``gangEvictConfig`` (capacity, whose ``spec.deserved`` is each
queue's share) on four 1-cpu nodes; every gang has 1-cpu pods of the same low priority.
Matched against ``gangreclaim.go`` (``Execute``, ``reclaimJobInDomains``,
``selectDomainBundles``, ``queueLessFn``), ``actions/utils`` (``SortBundlesForReclaim``) and
capacity's ``UnifiedEvictableFn`` and ``PreemptiveFn``.
"""

from __future__ import annotations

from typing import Any

import pytest

from actions.gangreclaim import GangReclaim, reclaimees
from scheduler.conf import parse_conf
from scheduler.framework.action_args import action_args
from scheduler.framework.arguments import parse_args
from scheduler.framework.gangevict import (
    DEFAULT_MAX_DOMAINS,
    GangEvictArgs,
    flatten,
    select_bundles,
    victim_queue_policy,
)
from scheduler.framework.gangvictims import EvictionContext, EvictionKind
from scheduler.framework.session import Session
from tests.builders import make_pod, make_podgroup, make_queue, simulate
from tests.scenarios.gangevict_helpers import (
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

LOW = "low-priority"


def _run(*objs: Any, conf: str = GANG_EVICT_CONF) -> Any:
    return simulate([*priority_classes(), *nodes(), *objs], conf=conf, max_cycles=8)


def _with_arguments(arguments: str) -> str:
    return GANG_EVICT_CONF + f"configurations:\n- name: gangreclaim\n  arguments: {arguments}\n"


# -- unit cases of gangreclaim_test.go ---------------------------------------------------
def test_max_domains_without_hypernodes_keeps_the_cluster() -> None:
    """gangreclaim_test.go:35 (``PickDomainsFromGradients`` keeps ``maxDomains`` domains).

    Without HyperNodes the cluster is the one domain: ``maxDomains: 1`` (read, without a
    warning) changes nothing and the reclaimer still frees room on four different nodes."""
    conf = parse_conf(_with_arguments("{maxDomains: 1}"))
    assert not [w for w in conf.warnings if "maxDomains" in w]
    run = _run(capacity_queue("q1", 2), capacity_queue("q2", 2),
               *gang_job("victim", "q2", LOW, 4, 2, on=NODES),
               *gang_job("rec", "q1", LOW, 2, 2), conf=_with_arguments("{maxDomains: 1}"))
    assert running(run, "rec") == 2


def test_without_hypernodes_the_domain_is_the_whole_cluster() -> None:
    """gangreclaim_test.go:51 (no gradient: the cluster-top HyperNode is the one domain).

    The victim gang's pods sit one per node (``victim-task-<i>`` on ``n<i>``); the reclaimer
    lands on exactly the nodes its evicted surplus pods freed."""
    run = _run(capacity_queue("q1", 2), capacity_queue("q2", 2),
               *gang_job("victim", "q2", LOW, 4, 2, on=NODES),
               *gang_job("rec", "q1", LOW, 2, 2))
    freed = sorted(f"n{name.rsplit('-', 1)[1]}" for name in evicted(run))
    assert sorted(run.node_of(f"rec-task-{i}") or "" for i in range(2)) == freed
    assert len(freed) == 2


def test_parse_arguments() -> None:
    """gangreclaim_test.go:56 (``parseArguments`` reads maxDomains and allowWholeBundle)."""
    args = action_args("gangreclaim", GangReclaim.Args,
                       {"gangreclaim": {"maxDomains": 5, "allowWholeBundle": False}})
    assert (args.max_domains, args.allow_whole_bundle) == (5, False)


@pytest.mark.parametrize("value", [0, -1], ids=["zero", "negative"])
def test_invalid_max_domains_falls_back_to_default(value: int) -> None:
    """gangreclaim_test.go:74 (a maxDomains of 0 or below is replaced by 8, with a warning)."""
    args, warnings = parse_args(GangReclaim.Args, {"maxDomains": value})
    assert args.max_domains == DEFAULT_MAX_DOMAINS
    assert len(warnings) == 1 and "'maxDomains'" in warnings[0]
    assert GangEvictArgs(max_domains=value).max_domains == 8


def _select(session: Session) -> list[str]:
    reclaimer = job_named(session, "rec")
    pending = list(reclaimer.tasks.values())
    context = EvictionContext(EvictionKind.GANG_RECLAIM, reclaimer, pending[0])
    bundles = select_bundles(
        session, context=context, candidates=reclaimees(session, reclaimer),
        need=pending[0].init_resreq,
        policy=victim_queue_policy(session, session.queues[reclaimer.queue]), allow_whole=True)
    return [task.name for task in flatten(bundles)]


def _running_job(name: str, queue: str, node: str,
                 annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    group = make_podgroup(name, min_member=1, queue=queue, phase="Running")
    if annotations is not None:
        group["metadata"]["annotations"] = annotations
    return [group, make_pod(f"{name}-0", group=name, node=node, phase="Running")]


def _reclaimer() -> list[dict[str, Any]]:
    return [make_podgroup("rec", min_member=1, queue="q1"), make_pod("rec-0", group="rec")]


def _queues(*names: str, not_reclaimable: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    out = []
    for name in names:
        queue = make_queue(name)
        queue["spec"]["reclaimable"] = name not in not_reclaimable
        out.append(queue)
    return out


def test_select_takes_only_reclaimable_queues_of_others() -> None:
    """gangreclaim_test.go:101: of a victim in reclaimable q2 and one in non-reclaimable q3,
    only the first is a candidate (and nothing of the reclaimer's own queue)."""
    objs = [*nodes(1, cpu="4"), *_queues("q1", "q2", "q3", not_reclaimable=("q3",)),
            *_running_job("victim", "q2", "n0"), *_running_job("other", "q3", "n0"),
            *_running_job("own", "q1", "n0"), *_reclaimer()]
    assert _select(open_session(objs, only=PermitAll())) == ["victim-0"]


def test_select_respects_victim_job_preemptable() -> None:
    """gangreclaim_test.go:166: a PodGroup annotated ``volcano.sh/preemptable: "false"``
    keeps its job out of gang reclaim."""
    objs = [*nodes(1), *_queues("q1", "q2"), *_reclaimer(),
            *_running_job("victim", "q2", "n0", {"volcano.sh/preemptable": "false"})]
    assert _select(open_session(objs, only=PermitAll())) == []


def test_select_allows_victim_job_when_preemptable_unset() -> None:
    """gangreclaim_test.go:229: a PodGroup that says nothing lets its job be reclaimed."""
    objs = [*nodes(1), *_queues("q1", "q2"), *_reclaimer(), *_running_job("victim", "q2", "n0", {})]
    session = open_session(objs, only=PermitAll())
    assert job_named(session, "victim").preemptable is False
    assert _select(session) == ["victim-0"]


# -- e2e cases of test/e2e/gangevict/gangevict.go ----------------------------------------
def test_gr1_safe_bundle_reclaim_keeps_the_victim_gang() -> None:
    """gangevict.go:971 GR-1: q2 runs 4 pods (minAvailable 2) on a deserved 2; q1 takes 2."""
    run = _run(capacity_queue("q1", 2), capacity_queue("q2", 2),
               *gang_job("victim", "q2", LOW, 4, 2, on=NODES),
               *gang_job("rec", "q1", LOW, 2, 2))
    assert (running(run, "rec"), running(run, "victim")) == (2, 2)


def test_gr2_whole_bundle_reclaim_breaks_exactly_one_gang() -> None:
    """gangevict.go:1005 GR-2: two tight gangs in q2; capacity lets q2 lose 2 (down to its
    deserved), so only the first whole bundle (``va``, by UID) survives its filter."""
    run = _run(capacity_queue("q1", 2), capacity_queue("q2", 2),
               *gang_job("va", "q2", LOW, 2, 2, on=["n0", "n1"]),
               *gang_job("vb", "q2", LOW, 2, 2, on=["n2", "n3"]),
               *gang_job("rec", "q1", LOW, 2, 2))
    assert (running(run, "rec"), running(run, "va"), running(run, "vb")) == (2, 0, 2)


def test_gr3_basic_reclaim_from_an_overusing_queue() -> None:
    """gangevict.go:1046 GR-3."""
    run = _run(capacity_queue("q1", 2), capacity_queue("q2", 2),
               *gang_job("victim", "q2", LOW, 4, 2, on=NODES),
               *gang_job("rec", "q1", LOW, 2, 2))
    assert running(run, "rec") == 2 and len(evicted(run)) == 2


def test_gr4_no_reclaim_from_queues_within_deserved() -> None:
    """gangevict.go:1076 GR-4: q2 and q3 each run their deserved 2; q1 gets nothing."""
    run = _run(capacity_queue("q1", 2), capacity_queue("q2", 2), capacity_queue("q3", 2),
               *gang_job("j2", "q2", LOW, 2, 2, on=["n0", "n1"]),
               *gang_job("j3", "q3", LOW, 2, 2, on=["n2", "n3"]),
               *gang_job("rec", "q1", LOW, 2, 2))
    assert (running(run, "rec"), running(run, "j2"), running(run, "j3")) == (0, 2, 2)
    assert evicted(run) == []


def test_gr5_non_reclaimable_victim_queue_blocks_reclaim() -> None:
    """gangevict.go:1117 GR-5."""
    run = _run(capacity_queue("q1", 2), capacity_queue("q2", 2, reclaimable=False),
               *gang_job("victim", "q2", LOW, 4, 2, on=NODES),
               *gang_job("rec", "q1", LOW, 2, 2))
    assert (running(run, "rec"), running(run, "victim"), evicted(run)) == (0, 4, [])


def test_gr6_reclaim_stops_at_the_guarantee() -> None:
    """gangevict.go:1154 GR-6: q2 (guarantee and deserved 2) runs 4; q1 needs 4 but only 2 are
    above q2's guarantee, so the dry run never has room and nothing is evicted."""
    run = _run(capacity_queue("q1", 4), capacity_queue("q2", 2, guarantee=2),
               *gang_job("victim", "q2", LOW, 4, 2, on=NODES),
               *gang_job("rec", "q1", LOW, 4, 4))
    assert (running(run, "rec"), running(run, "victim"), evicted(run)) == (0, 4, [])


def test_gr7_an_overused_queue_does_not_reclaim() -> None:
    """gangevict.go:1193 GR-7: q1 (deserved 1) already runs 2; its next gang reclaims nothing
    from q2 (deserved 3, running 2)."""
    run = _run(capacity_queue("q1", 1), capacity_queue("q2", 3),
               *gang_job("j1", "q1", LOW, 2, 2, on=["n0", "n1"]),
               *gang_job("j2", "q2", LOW, 2, 2, on=["n2", "n3"]),
               *gang_job("rec", "q1", LOW, 2, 2))
    assert (running(run, "rec"), evicted(run)) == (0, [])


def test_gr_r1_role_minimums_keep_role_tight_tasks() -> None:
    """gangevict.go:1228 GR-R1: ps (1, min 1) and worker (3, min 2), minAvailable 3, in q2
    (deserved 3); a 1-pod reclaimer of q1 takes the one surplus worker."""
    run = _run(capacity_queue("q1", 1), capacity_queue("q2", 3),
               *role_job("victim", "q2", LOW, [("ps", 1, 1), ("worker", 3, 2)], 3, on=NODES),
               *gang_job("rec", "q1", LOW, 1, 1))
    assert running(run, "rec") == 1
    assert bound(run, "victim-ps-") == ["victim-ps-0"]
    assert len(bound(run, "victim-worker-")) == 2
