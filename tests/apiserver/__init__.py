"""An HTTP-level Kubernetes API server double (see :mod:`tests.apiserver.store`).

``ApiServerDouble`` serves the adapter's contract tests; :func:`start_standalone` (and
``python -m tests.apiserver``) runs it as a bare API server with a kubeconfig, for the e2e suite.
"""

from tests.apiserver.standalone import start_standalone, write_kubeconfig
from tests.apiserver.store import (
    DEFAULT_COLLECTIONS,
    DEVICES,
    STANDALONE_COLLECTIONS,
    ApiServerDouble,
    merge_patch,
    status_body,
    strategic_merge,
)

__all__ = [
    "DEFAULT_COLLECTIONS",
    "DEVICES",
    "STANDALONE_COLLECTIONS",
    "ApiServerDouble",
    "merge_patch",
    "start_standalone",
    "status_body",
    "strategic_merge",
    "write_kubeconfig",
]
