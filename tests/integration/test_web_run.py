"""``lahar run --web-address``: the pages and JSON of a running scheduler on the API double."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from kube_helpers import wait_until
from web_helpers import pod, running_with_web, seed

from tests.apiserver import ApiServerDouble


def _json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return json.loads(reply.read())


def test_run_serves_the_view_and_follows_the_cluster(apiserver: ApiServerDouble) -> None:
    seed(apiserver)
    with running_with_web(apiserver) as server:
        def job(name: str) -> Any:
            items = _json(f"{server.url}/api/jobs")["items"]
            return next((j for j in items if j["name"] == name), None)

        wait_until(lambda: (job("pg1") or {}).get("ready") == 1, timeout=10.0, message="bound")
        big = job("huge")
        assert big["pending"] == 1 and big["queue_position"] == 1
        # the reason is the pod's PodScheduled condition, as written to the API server
        wait_until(lambda: any(c.get("type") == "PodScheduled" for c in
                               (apiserver.get("v1/pods", "team/big") or {})
                               .get("status", {}).get("conditions", [])),
                   timeout=10.0, message="condition")
        cond = next(c for c in apiserver.get("v1/pods", "team/big")["status"]["conditions"]
                    if c["type"] == "PodScheduled")
        wait_until(lambda: job("huge")["reason"] == cond["message"], timeout=10.0,
                   message="reason")
        overview = _json(f"{server.url}/api/overview")
        assert overview["nodes"] == 2 and overview["cycles"] >= 1
        assert overview["cycle_seconds"]["p99"] >= overview["cycle_seconds"]["p50"] > 0
        queues = {q["name"]: q for q in _json(f"{server.url}/api/queues")["items"]}
        assert queues["default"]["allocated"]["cpu"] == 1000.0
        apiserver.create("v1/pods", pod("p2"))
        wait_until(lambda: any(p["name"] == "p2" for p in (job("pg1") or {"pods": []})["pods"]),
                   timeout=10.0, message="a new pod shows")
        with urllib.request.urlopen(f"{server.url}/jobs/team/pg1", timeout=5) as reply:
            assert "p2" in reply.read().decode()


def test_lahar_gauges_after_a_run(apiserver: ApiServerDouble) -> None:
    """Lahar's own gauges are set every cycle (a hook that failed would leave them unset)."""
    from scheduler import metrics

    seed(apiserver)
    metrics.CACHE_SYNC_AGE.set(-1.0)
    with running_with_web(apiserver):
        wait_until(lambda: (metrics.REGISTRY.get_sample_value("lahar_cache_sync_age_seconds")
                            or -1.0) >= 0.0, timeout=10.0, message="cache sync age")
        assert metrics.REGISTRY.get_sample_value("lahar_bind_queue_depth") is not None
        assert metrics.REGISTRY.get_sample_value("lahar_status_writer_backlog") is not None
