"""The real-cluster adapter: the Kubernetes API server as Lahar's source of objects.

``client`` is the raw-JSON HTTP seam, ``reflector`` mirrors collections into the cache,
``writer`` carries the scheduler's decisions back, ``leader`` holds the Lease that makes one
replica active, and ``run`` wires them into the ``lahar run`` command.

The names below are loaded on first use: ``lahar`` reads ``run``'s flags from ``flags`` on
every start, and that must not pay for importing the official client (a quarter second).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.cluster.kube.client import KubeClient, TokenBucket
    from scheduler.cluster.kube.leader import LeaderElector
    from scheduler.cluster.kube.reflector import (
        RESOURCES,
        Reflector,
        ReflectorGroup,
        ResourceSpec,
    )
    from scheduler.cluster.kube.retry import RetryPolicy, is_retryable
    from scheduler.cluster.kube.writer import ConflictError, KubeClusterWriter

_HOMES = {
    "KubeClient": "client",
    "TokenBucket": "client",
    "LeaderElector": "leader",
    "RESOURCES": "reflector",
    "Reflector": "reflector",
    "ReflectorGroup": "reflector",
    "ResourceSpec": "reflector",
    "RetryPolicy": "retry",
    "is_retryable": "retry",
    "ConflictError": "writer",
    "KubeClusterWriter": "writer",
}

__all__ = [
    "RESOURCES",
    "ConflictError",
    "KubeClient",
    "KubeClusterWriter",
    "LeaderElector",
    "Reflector",
    "ReflectorGroup",
    "ResourceSpec",
    "RetryPolicy",
    "TokenBucket",
    "is_retryable",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value
