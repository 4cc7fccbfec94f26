"""drf: dominant resource fairness between jobs.

A job's share is its largest ``allocated / cluster total`` over the dimensions the cluster
has (at least the tolerance of each, ``pods`` included, as Volcano's ``calculateShare``); jobs
with the lower share go first (compared exactly), and shares move with every in-session
allocate and evict. Preemption compares shares within 1e-6.
"""

from __future__ import annotations

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resource import Resource
from scheduler.api.task import TaskInfo
from scheduler.api.types import JobID, Vote
from scheduler.framework.hdrf import Hdrf
from scheduler.framework.plugin import NoArgs, PluginBase
from scheduler.framework.session import Session

__all__ = ["Drf", "dominant_share"]

_SHARE_EPSILON = 1e-6


def dominant_share(allocated: Resource, total: Resource,
                   names: list[str] | None = None) -> float:
    """``names``: ``total.resource_names()`` when the caller already has them."""
    share = 0.0
    for name in total.resource_names() if names is None else names:
        share = max(share, allocated.get(name) / total.get(name))
    return share


class Drf(PluginBase[NoArgs]):
    NAME = "drf"
    FLAGS = ("enableHierarchy",)
    _jobs_of: Session | None = None
    """The session whose jobs' allocations are copied on first use (set at open)."""

    def on_session_open(self, session: Session) -> None:
        super().on_session_open(session)
        self.allocated: dict[JobID, Resource] = {}
        """Each job's allocation from open on, moved by allocate and evict; copied from the
        session's record of it at open when the job is first needed (most never are)."""
        self._jobs_of = session
        self.shares: dict[JobID, float] = {}
        """Shares computed so far: a share is a function of the job's allocation, so it is
        derived when a job is first ordered and again on every change of its allocation."""
        self.total_names = session.total_resource.resource_names()
        """The cluster total's dimensions, fixed for the session (sorted once, not per share)."""

    def allocation(self, uid: JobID) -> Resource | None:
        allocated = self.allocated.get(uid)
        if allocated is None:
            session = self._jobs_of
            job = None if session is None else session.jobs.get(uid)
            if session is None or job is None:
                return None
            allocated = self.allocated[uid] = session.allocated_at_open(job).clone()
        return allocated

    def share(self, uid: JobID) -> float:
        share = self.shares.get(uid)
        if share is None:
            allocated = self.allocation(uid)
            if allocated is None:
                return 0.0
            share = self.shares[uid] = dominant_share(allocated, self.ssn.total_resource,
                                                       self.total_names)
        return share

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        ls, rs = self.share(left.uid), self.share(right.uid)
        if ls == rs:
            return 0
        return -1 if ls < rs else 1

    def job_order_key(self, job: JobInfo) -> float:
        """The lower share first (``job_order`` as a key; the share moves only with the
        job's own allocations)."""
        return self.share(job.uid)

    def _update(self, task: TaskInfo, sign: int) -> None:
        allocated = self.allocation(task.job)
        if allocated is None:
            return
        if sign > 0:
            allocated.add(task.resreq)
        else:
            allocated.sub(task.resreq)
        self.shares[task.job] = dominant_share(allocated, self.ssn.total_resource,
                                               self.total_names)

    def on_allocate(self, task: TaskInfo) -> None:
        self._update(task, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._update(task, -1)

    def preemptable(
        self, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        total = self.ssn.total_resource
        own = self.allocation(preemptor.job)
        if own is None:
            return [], Vote.PERMIT
        my_share = dominant_share(own.clone().add(preemptor.resreq), total)
        victims = []
        remaining: dict[JobID, Resource] = {}
        for task in candidates:
            if task.job not in remaining:
                theirs = self.allocation(task.job)
                if theirs is None:
                    continue
                remaining[task.job] = theirs.clone()
            # Each victim taken from a job lowers that job's share for the next candidate.
            their_share = dominant_share(remaining[task.job].sub(task.resreq), total)
            if my_share < their_share or abs(my_share - their_share) <= _SHARE_EPSILON:
                victims.append(task)
        return victims, Vote.PERMIT

    # -- hierarchical DRF (enableHierarchy), in scheduler.framework.hdrf ------------------
    def _hdrf(self) -> Hdrf | None:
        """The HDRF tree when this plugin's ``enableHierarchy`` flag is on, else None."""
        cached = getattr(self, "_hdrf_state", None)
        if cached is None or cached[0] is not self.ssn:
            enabled = any(
                entry.plugin is self and entry.flags.get("enableHierarchy", False)
                for entry in self.ssn.plugin_entries()
            )
            cached = (self.ssn, Hdrf(self.ssn, dominant_share) if enabled else None)
            self._hdrf_state = cached
        return cached[1]

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        """HDRF queue order (0 without ``enableHierarchy``, deferring to other plugins)."""
        hdrf = self._hdrf()
        return 0 if hdrf is None else hdrf.queue_order(left, right)

    def reclaimable(
        self, reclaimer: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], Vote]:
        """HDRF victims (abstains without ``enableHierarchy``)."""
        hdrf = self._hdrf()
        if hdrf is None:
            return [], Vote.ABSTAIN
        return hdrf.reclaimable(reclaimer, candidates)
