"""The double as a bare API server: every collection the scheduler and the e2e suite use."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.apiserver.store import STANDALONE_COLLECTIONS, ApiServerDouble

__all__ = ["start_standalone", "write_kubeconfig"]


def write_kubeconfig(url: str, path: str | Path, *, name: str = "lahar-double") -> Path:
    """A kubeconfig pointing at ``url`` without credentials (the double checks none)."""
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }
    target = Path(path)
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


def start_standalone(kubeconfig: str | Path, *, port: int = 0,
                     max_watch_seconds: float = 30.0) -> ApiServerDouble:
    """Start serving on 127.0.0.1 and write a kubeconfig for it; ``stop()`` when done."""
    double = ApiServerDouble(collections=STANDALONE_COLLECTIONS,
                             status_subresources=("queues", "pods", "nodes"),
                             max_watch_seconds=max_watch_seconds, port=port)
    double.start()
    write_kubeconfig(double.url, kubeconfig)
    double.create("v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": "default"}})
    return double
