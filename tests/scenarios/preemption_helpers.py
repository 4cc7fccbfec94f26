"""Builders shared by the preempt and reclaim scenarios: Volcano's e2e conf and its jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import make_pod, make_podgroup, make_priority_class, make_queue

Obj = dict[str, Any]

CONFS = Path(__file__).resolve().parents[1] / "data" / "confs"
PRIORITIES = {"low-priority": 10, "middle-priority": 50, "high-priority": 100}

# Plugins of Volcano's CI conf left out of these cases: ``sla`` (tested on its own); it takes no
# part in preemption or reclaim. ``network-topology-aware`` stays: without HyperNodes it scores
# nothing, as in Volcano's e2e runs.
_NOT_HERE = ("  - name: sla\n",)


def e2e_conf(*, actions: str | None = None, extra: str = "") -> str:
    """Volcano's CI conf (``volcano-scheduler-ci.conf``), the conf its e2e suites run with."""
    path = CONFS / "volcano-scheduler-ci.conf"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    text = path.read_text()
    for line in _NOT_HERE:
        text = text.replace(line, "")
    if actions is not None:
        first, rest = text.split("\n", 1)
        assert first.startswith("actions:")
        text = f'actions: "{actions}"\n{rest}'
    return text + extra


def priority_classes() -> list[Obj]:
    return [make_priority_class(name, value) for name, value in PRIORITIES.items()]


def vcjob(
    name: str,
    *,
    replicas: int,
    min_member: int,
    cpu: str = "1",
    queue: str = "default",
    priority: str | None = None,
    running_on: list[str] | None = None,
    preemptable: str | None = "true",
    **pod_kwargs: Any,
) -> list[Obj]:
    """A Volcano Job as the e2e helpers build it: a PodGroup and ``replicas`` pods, running
    round-robin on ``running_on`` when given (else pending)."""
    objs: list[Obj] = [
        make_podgroup(name, min_member=min_member, queue=queue, priority_class=priority,
                      phase="Running" if running_on else None)
    ]
    for i in range(replicas):
        pod = make_pod(
            f"{name}-task-{i}", cpu=cpu, group=name,
            priority=PRIORITIES[priority] if priority else None, priority_class=priority,
            node=running_on[i % len(running_on)] if running_on else None,
            phase="Running" if running_on else None, **pod_kwargs)
        if preemptable is not None:
            pod["metadata"].setdefault("labels", {})["volcano.sh/preemptable"] = preemptable
        objs.append(pod)
    return objs


def queues(*names: str, **kwargs: Any) -> list[Obj]:
    return [make_queue(name, **kwargs) for name in names]


def running(run: Any, job: str) -> int:
    """Pods of ``job`` bound to a node (the e2e ``WaitTasksReady`` count)."""
    return sum(1 for pod in run.binds() if pod.startswith(f"{job}-task-"))


def evicted(run: Any) -> list[str]:
    return sorted(
        e["involvedObject"]["name"] for e in run.events("Evict")
        if e["involvedObject"]["kind"] == "Pod"
    )
