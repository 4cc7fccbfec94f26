"""The allocator's two outcomes other than a result, in a module of their own so that code
catching them (the scheduling framework's DRA filter) need not import the allocator, its
search and the object model before a cluster has any DRA object."""

from __future__ import annotations

__all__ = ["AllocatorError", "Unschedulable"]


class AllocatorError(Exception):
    """What kube-scheduler's allocator returns as an error (the pod gets SchedulerError)."""


class Unschedulable(Exception):
    """No device fits: the reason names the claim, the request and why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)
