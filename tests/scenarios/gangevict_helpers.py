"""Builders shared by the gangpreempt and gangreclaim scenarios: Volcano's gangevict e2e conf,
its queues with a deserved share, its gangs, and a session whose only plugin permits every
victim (the ``test-preempt``/``test-reclaim`` plugin of Volcano's unit tests)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scheduler.api.task import TaskInfo
from scheduler.api.types import Vote
from scheduler.cluster.manifests import Manifest
from scheduler.cluster.simulation import build_simulation
from scheduler.conf import parse_conf
from scheduler.framework.gangvictims import EvictionContext
from scheduler.framework.session import PluginEntry, Session
from tests.builders import make_node, make_pod, make_podgroup, make_queue
from tests.scenarios.preemption_helpers import PRIORITIES, vcjob

Obj = dict[str, Any]

DATA = Path(__file__).resolve().parents[1] / "data"
GANG_EVICT_CONF = (DATA / "confs" / "gangevict.conf").read_text()
"""``gangEvictConfig`` of Volcano's ``test/e2e/gangevict/gangevict.go``: capacity in the first
tier, gangreclaim and gangpreempt after allocate and backfill."""

NODES = ("n0", "n1", "n2", "n3")


def nodes(count: int = 4, cpu: str = "1") -> list[Obj]:
    """``NodesNumLimit: 4, NodesResourceLimit: CPU1Mem1``."""
    return [make_node(f"n{i}", cpu=cpu, memory="1Gi") for i in range(count)]


def capacity_queue(name: str, deserved: int, *, guarantee: int | None = None,
                   reclaimable: bool | None = None) -> Obj:
    queue = make_queue(name)
    queue["spec"]["deserved"] = {"cpu": str(deserved)}
    if guarantee is not None:
        queue["spec"]["guarantee"] = {"resource": {"cpu": str(guarantee)}}
    if reclaimable is not None:
        queue["spec"]["reclaimable"] = reclaimable
    return queue


def gang_job(name: str, queue: str, priority: str, replicas: int, min_available: int, *,
             on: Sequence[str] | None = None) -> list[Obj]:
    """``createGangJob``: 1-cpu pods, preemptable when running (the e2e victims)."""
    return vcjob(name, replicas=replicas, min_member=min_available, queue=queue,
                 priority=priority, running_on=list(on) if on else None,
                 preemptable="true" if on else None)


def role_job(name: str, queue: str, priority: str, roles: Sequence[tuple[str, int, int]],
             min_available: int, *, on: Sequence[str]) -> list[Obj]:
    """``createMultiRoleGangJob`` running on ``on``: ``roles`` as (name, replicas, minimum)."""
    objs: list[Obj] = [make_podgroup(name, min_member=min_available, queue=queue,
                                     priority_class=priority, phase="Running",
                                     min_task_member={r: least for r, _, least in roles})]
    slot = 0
    for role, replicas, _ in roles:
        for i in range(replicas):
            pod = make_pod(f"{name}-{role}-{i}", group=name, priority=PRIORITIES[priority],
                           priority_class=priority, node=on[slot % len(on)], phase="Running",
                           annotations={"volcano.sh/task-spec": role})
            pod["metadata"]["labels"] = {"volcano.sh/preemptable": "true"}
            objs.append(pod)
            slot += 1
    return objs


def bound(run: Any, prefix: str) -> list[str]:
    """Pods whose names start with ``prefix`` that are on a node at the end of the run."""
    return sorted(name for name in run.binds() if name.startswith(prefix))


class PermitAll:
    """Volcano's unit-test plugin: every candidate may be evicted."""

    NAME = "test-permit"

    def on_session_open(self, session: Session) -> None:
        return None

    def on_session_close(self, session: Session) -> None:
        return None

    def unified_evictable(self, context: EvictionContext,
                          candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        return list(candidates), Vote.PERMIT


def open_session(objs: Sequence[Obj], conf: str = GANG_EVICT_CONF, *,
                 only: Any = None) -> Session:
    """A session over ``objs``; with ``only``, that plugin is the session's one tier."""
    manifests = [Manifest(f"gang#{i}", obj) for i, obj in enumerate(objs)]
    _, _, scheduler = build_simulation(manifests, conf=parse_conf(conf), seed=1)
    session = scheduler.open_session()
    if only is not None:
        session.tiers = [[PluginEntry(only)]]
    return session


def job_named(session: Session, name: str) -> Any:
    return session.jobs[next(uid for uid in session.jobs if uid.endswith(f"/{name}"))]
