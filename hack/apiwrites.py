"""The write requests an API server has served, read from its own ``/metrics``.

``apiserver_request_total`` counts every request by verb, resource, subresource and response
code; the difference of two readings is what the server wrote between them, whoever sent it.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.cluster.kube.client import ApiError, KubeClient

__all__ = ["server_writes"]

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})
LABEL = re.compile(r'(\w+)="([^"]*)"')


def server_writes(kubeconfig: str) -> Counter[str] | None:
    """The API server's write requests so far by ``"VERB resource[/subresource]"`` (its
    ``apiserver_request_total``, all codes), or None when ``/metrics`` cannot be read."""
    light = KubeClient.from_flags(kubeconfig=kubeconfig, qps=0)
    try:
        response = light.request("GET", "/metrics")
        text = response.read().decode()
        response.release_conn()
    except (ApiError, OSError):
        return None
    finally:
        light.close()
    writes: Counter[str] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line.rpartition(" ")
        labels = dict(LABEL.findall(labels_text))
        if labels.get("verb") not in WRITE_VERBS:
            continue
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        writes[f"{labels['verb']} {resource}"] += int(float(value))
    return writes
