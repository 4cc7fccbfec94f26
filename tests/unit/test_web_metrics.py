"""Volcano's scheduler metric set, Lahar's own gauges, and the Grafana dashboard over them.

``VOLCANO`` lists every metric name Volcano's scheduler registers: pkg/scheduler/metrics/
metrics.go (e2e, job, plugin, action, task latencies, schedule attempts, preemption,
unschedulable counts, task operation latency, ``task_<status>_count``, goroutines), job.go,
namespace.go, queue.go (``queue_*``), and pkg/scheduler/api/devices/nvidia/vgpu/metrics.go
(the vGPU device gauges), plus the names other releases add (open session, inqueue, stage
duration, eviction transactions). Each must be exported or listed as not applicable in
docs/web.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from scheduler import metrics
from scheduler.cluster.kube.sessionmetrics import SessionMetrics
from scheduler.cluster.manifests import load_manifests
from scheduler.cluster.simulation import run_simulation
from scheduler.conf import load_conf

ROOT = Path(__file__).resolve().parents[2]

_QUEUE = [f"volcano_queue_{kind}_{unit}"
          for kind in ("allocated", "request", "deserved", "capacity", "real_capacity", "inqueue")
          for unit in ("milli_cpu", "memory_bytes", "scalar_resources")]
VOLCANO = [
    "volcano_e2e_scheduling_latency_milliseconds",
    "volcano_e2e_job_scheduling_latency_milliseconds",
    "volcano_e2e_job_scheduling_duration",
    "volcano_e2e_job_scheduling_start_time",
    "volcano_e2e_job_scheduling_last_time",
    "volcano_open_session_duration_milliseconds",
    "volcano_plugin_scheduling_latency_milliseconds",
    "volcano_action_scheduling_latency_milliseconds",
    "volcano_task_scheduling_latency_milliseconds",
    "volcano_scheduling_stage_duration_milliseconds",
    "volcano_schedule_attempts_total",
    "volcano_pod_preemption_victims",
    "volcano_total_preemption_attempts",
    "volcano_eviction_transactions_total",
    "volcano_unschedule_task_count",
    "volcano_unschedule_job_count",
    "volcano_task_operation_latency_milliseconds",
    "volcano_task_{status}_count",
    "volcano_goroutines",
    "volcano_job_share",
    "volcano_job_retry_counts",
    "volcano_job_succeeded_counts",
    "volcano_job_failed_counts",
    "volcano_namespace_share",
    "volcano_namespace_weight",
    "volcano_namespace_weighted_share",
    *_QUEUE,
    "volcano_queue_share",
    "volcano_queue_weight",
    "volcano_queue_overused",
    "volcano_vgpu_device_shared_number",
    "volcano_vgpu_device_allocated_memory",
    "volcano_vgpu_device_allocated_cores",
    "volcano_vgpu_device_memory_limit",
    "volcano_vgpu_device_memory_allocation_for_a_certain_pod",
    "volcano_vgpu_device_core_allocation_for_a_certain_pod",
]


def exported() -> set[str]:
    text = metrics.exposition().decode()
    return set(re.findall(r"^# HELP (\S+)", text, re.M))


def not_applicable() -> set[str]:
    doc = (ROOT / "docs" / "web.md").read_text()
    block = doc.split("<!-- metric-not-applicable")[1].split("<!-- end metric-not-applicable")[0]
    names: set[str] = set()
    for bullet in re.split(r"^- ", block, flags=re.M)[1:]:
        head = bullet.split("`:", 1)[0] + "`"  # the names, before the reason
        names.update(re.findall(r"`([a-z_{}]+)`", head))
    return names


def test_every_volcano_metric_is_exported_or_documented() -> None:
    have, skipped = exported(), not_applicable()
    missing = [name for name in VOLCANO if name not in have and name not in skipped]
    assert missing == []
    # and nothing is both exported and called not applicable
    assert have & skipped == set()


def test_lahar_gauges_are_documented() -> None:
    doc = (ROOT / "docs" / "web.md").read_text()
    own = {name for name in exported() if name.startswith("lahar_")}
    assert own >= {"lahar_bind_queue_depth", "lahar_status_writer_backlog",
                   "lahar_podgroup_controller_pending_pods", "lahar_cache_sync_age_seconds"}
    assert [name for name in own if f"`{name}`" not in doc] == []


def test_grafana_dashboard_queries_exported_metrics() -> None:
    dashboard = json.loads((ROOT / "conf" / "grafana" / "lahar.json").read_text())
    have = exported()
    queried: set[str] = set()
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert {"Queues", "Latency", "Binds", "GPUs"} <= {p["title"] for p in dashboard["panels"]
                                                      if p["type"] == "row"}
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            for name in re.findall(r"\b((?:volcano|lahar)_[a-z0-9_]+)", target["expr"]):
                queried.add(re.sub(r"_(bucket|sum|count)$", "", name)
                            if name.endswith(("_bucket", "_sum")) else name)
    unknown = sorted(name for name in queried if name not in have)
    assert unknown == []
    assert len(queried) >= 20


def _sample(name: str, **labels: str) -> float | None:
    value = metrics.REGISTRY.get_sample_value(name, labels)
    return value


def test_session_metrics_follow_the_session() -> None:
    """Volcano sets the vGPU gauges from the card ledger (vgpu/metrics.go GetStatus), the
    queue's deserved and share in proportion's OnSessionClose, job retries in gang's."""
    manifests, _ = load_manifests([str(ROOT / "conf" / "samples" / "vgpu.yaml")])
    cards: dict[tuple[str, str], tuple[int, int]] = {}

    def capture(session: object, stats: object) -> None:
        for node in session.nodes.values():  # type: ignore[attr-defined]
            for ledger in node.others.values():
                for card in getattr(ledger, "cards", []):
                    if getattr(card, "info", None) is not None:
                        cards[card.info.uuid, node.name] = (card.used_mem, card.info.memory)

    recorder = SessionMetrics()

    def hook(session: object, stats: object) -> None:
        recorder(session, stats)
        capture(session, stats)

    run_simulation(manifests, conf=load_conf(str(ROOT / "conf" / "vgpu.conf")), on_close=hook)
    assert cards
    for (uuid, node), (used, total) in cards.items():
        assert _sample("volcano_vgpu_device_allocated_memory", devID=uuid, NodeName=node) == used
        assert _sample("volcano_vgpu_device_memory_limit", devID=uuid, NodeName=node) == total
    assert _sample("volcano_queue_deserved_milli_cpu", queue_name="default") is not None
    assert _sample("volcano_queue_share", queue_name="default") is not None
    assert _sample("volcano_e2e_job_scheduling_latency_milliseconds_count") >= 1  # type: ignore[operator]
