"""The real-cluster adapter: the Kubernetes API server as Lahar's source of objects.

``client`` is the raw-JSON HTTP seam, ``reflector`` mirrors collections into the cache,
``writer`` carries the scheduler's decisions back, ``leader`` holds the Lease that makes one
replica active, and ``run`` wires them into the ``lahar run`` command.
"""

from scheduler.cluster.kube.client import KubeClient, TokenBucket
from scheduler.cluster.kube.leader import LeaderElector
from scheduler.cluster.kube.reflector import RESOURCES, Reflector, ReflectorGroup, ResourceSpec
from scheduler.cluster.kube.retry import RetryPolicy, is_retryable
from scheduler.cluster.kube.writer import ConflictError, KubeClusterWriter

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
