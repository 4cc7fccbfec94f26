"""The write requests an API server has served, read from its own ``/metrics``.

``apiserver_request_total`` counts every request by verb, resource, subresource and response
code; the difference of two readings is what the server wrote between them, whoever sent it.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.cluster.kube.client import ApiError, KubeClient

__all__ = ["server_writes"]

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})
REQUESTS = "apiserver_request_total"


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
    # Only this counter's samples go to the parser: the whole page is a megabyte or more.
    samples = "".join(line + "\n" for line in text.splitlines()
                      if line.startswith(REQUESTS + "{"))
    writes: Counter[str] = Counter()
    for family in text_string_to_metric_families(samples):
        for sample in family.samples:
            labels = sample.labels
            if labels.get("verb") not in WRITE_VERBS:
                continue
            resource = labels.get("resource", "")
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            writes[f"{labels['verb']} {resource}"] += int(sample.value)
    return writes
