"""overcommit: admit jobs while the cluster, inflated by a factor, has room for them.

``idle = cluster total × overcommit-factor − Σ node used``; a job is enqueued only if the
``minResources`` of every admitted-but-not-running job plus its own fit in that idle.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.job import JobInfo
from scheduler.api.resource import PODS, Resource
from scheduler.api.types import Vote
from scheduler.framework.arguments import arg
from scheduler.framework.plugin import PluginBase
from scheduler.framework.session import Session

__all__ = ["Overcommit"]

DEFAULT_FACTOR = 1.2


@dataclass(frozen=True, slots=True)
class OvercommitArgs:
    factor: float = arg("overcommit-factor", DEFAULT_FACTOR)


class Overcommit(PluginBase[OvercommitArgs]):
    NAME = "overcommit"
    Args = OvercommitArgs

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        factor = self.args.factor if self.args.factor >= 1.0 else DEFAULT_FACTOR
        used = Resource()
        for node in session.node_list:
            used.add(node.used)
        self.idle = session.total_resource.without(PODS).multi(factor).sub(used.without(PODS))
        self.inqueue = Resource()
        for job in session.jobs.values():
            demand = job.inqueue_demand()
            if demand is not None:
                self.inqueue.add(demand)

    def job_enqueueable(self, job: JobInfo) -> Vote:
        minimum = job.podgroup.min_resources
        if minimum is None:
            return Vote.PERMIT
        dims = [n for n in minimum.names() if n != PODS and minimum.get(n) >= 0.1]
        if self.inqueue.clone().add(minimum).less_equal_with_dimension(self.idle, dims):
            return Vote.PERMIT
        job.enqueue_message = "resource in cluster is overused"
        return Vote.REJECT

    def job_enqueued(self, job: JobInfo) -> None:
        if job.podgroup.min_resources is not None:
            self.inqueue.add(job.podgroup.min_resources)
