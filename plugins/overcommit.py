"""overcommit: admit jobs while the cluster, inflated by a factor, has room for them.

``idle = cluster total × overcommit-factor − Σ node used``; a job is enqueued only if the
``minResources`` of every admitted-but-not-running job plus its own fit in that idle, on the
dimensions its ``minResources`` names. As in Volcano, an ``Inqueue`` job reserves its whole
``minResources`` here (proportion deducts its allocated part), and pods held by a scheduling
gate reserve nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.job import JobInfo
from scheduler.api.resource import Resource
from scheduler.api.types import Vote
from scheduler.framework.arguments import arg, note, notes_field
from scheduler.framework.plugin import PluginBase
from scheduler.framework.session import Session

__all__ = ["Overcommit"]

DEFAULT_FACTOR = 1.2

@dataclass(frozen=True, slots=True)
class OvercommitArgs:
    factor: float = arg("overcommit-factor", DEFAULT_FACTOR)
    notes: tuple[str, ...] = notes_field()

    def __post_init__(self) -> None:
        # Volcano's OnSessionOpen: a factor below 1 is logged and the default used.
        if self.factor < 1.0:
            note(self, f"argument 'overcommit-factor' is {self.factor!r}: it cannot be below 1; "
                       f"the default {DEFAULT_FACTOR} is used, as in Volcano")
            object.__setattr__(self, "factor", DEFAULT_FACTOR)


def _reserved(job: JobInfo) -> tuple[Resource]:
    return (job.inqueue_demand(deduct_allocated_inqueue=False) or Resource(),)


class Overcommit(PluginBase[OvercommitArgs]):
    NAME = "overcommit"
    Args = OvercommitArgs

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        factor = self.args.factor if self.args.factor >= 1.0 else DEFAULT_FACTOR
        used = Resource()
        for node in session.node_list:
            used.add(node.used)
        self.idle = session.total_resource.clone().multi(factor).sub(used)
        self.inqueue = Resource()
        kept, jobs = session.settled_totals("overcommit", _reserved, width=1)
        for (reserved,) in kept.values():
            self.inqueue.add(reserved)
        for job in jobs:
            demand = job.inqueue_demand(deduct_allocated_inqueue=False)
            if demand is not None:
                self.inqueue.add(demand)

    def job_enqueueable(self, job: JobInfo) -> Vote:
        minimum = job.podgroup.min_resources
        if minimum is None:
            return Vote.PERMIT
        short = self.inqueue.clone().add(minimum).exceeding_on(self.idle, minimum)
        if not short:
            return Vote.PERMIT
        job.enqueue_message = "resource in cluster is overused: " + ", ".join(
            f"overused {name}" for name in short
        )
        return Vote.REJECT

    def job_enqueued(self, job: JobInfo) -> None:
        if job.podgroup.min_resources is not None:
            self.inqueue.add(job.enqueue_reservation())
