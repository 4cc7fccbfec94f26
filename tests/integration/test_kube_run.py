"""``lahar run`` flags, conf hot reload, cache dump, and one full run against the API double."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import free_port, http_status, make_node, make_pod, record_cycles, wait_until

from scheduler.cluster.kube.client import KubeClient
from scheduler.cluster.kube.flags import normalize, parse_duration
from scheduler.cluster.kube.run import (
    ConfWatcher,
    Health,
    add_run_arguments,
    check_api,
    run_main,
    write_cache_dump,
)
from tests.apiserver import ApiServerDouble


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return normalize(parser.parse_args(list(argv)))


def test_defaults_match_vc_scheduler() -> None:
    args = parse()
    assert args.schedule_period == 1.0
    assert args.scheduler_name == ["volcano"]
    assert args.default_queue == "default"
    assert (args.kube_api_qps, args.kube_api_burst) == (2000.0, 2000)
    assert (args.listen_address, args.healthz_address) == (":8080", ":11251")
    assert args.enable_metrics is False and args.enable_healthz is False
    assert args.leader_elect is True
    assert (args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
            args.leader_elect_retry_period) == (15.0, 10.0, 2.0)
    assert args.leader_elect_resource_namespace == "volcano-system"
    assert args.leader_elect_resource_name == "volcano"
    assert args.node_selector == {}
    assert (args.percentage_nodes_to_find, args.minimum_feasible_nodes,
            args.minimum_percentage_nodes_to_find) == (0, 100, 5)
    assert args.verbosity == 0 and args.cache_dump_dir == "/tmp"
    assert args.bind_workers == 32  # Lahar's own flag


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_bind_workers_must_be_a_positive_count(value: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--bind-workers", value)
    assert "--bind-workers" in capsys.readouterr().err
    assert parse("--bind-workers=4").bind_workers == 4


def test_go_style_flags_are_accepted() -> None:
    args = parse("--leader-elect=false", "--enable-metrics", "--enable-healthz=true",
                 "--scheduler-name", "lahar", "--scheduler-name=batch",
                 "--schedule-period=500ms", "--leader-elect-lease-duration", "1m30s",
                 "--lock-object-namespace", "legacy", "--node-selector", "pool:gpu",
                 "--node-selector=zone:a", "-v=5", "--kube-api-qps", "50")
    assert args.leader_elect is False
    assert args.enable_metrics is True and args.enable_healthz is True
    assert args.scheduler_name == ["lahar", "batch"]
    assert args.leader_elect_resource_name == "volcano"  # several names: Volcano's default
    assert args.schedule_period == 0.5 and args.leader_elect_lease_duration == 90.0
    assert args.leader_elect_resource_namespace == "legacy"
    assert args.node_selector == {"pool": "gpu", "zone": "a"}
    assert args.verbosity == 5 and args.kube_api_qps == 50.0
    assert parse("--v=3", "--scheduler-name=lahar").leader_elect_resource_name == "lahar"


@pytest.mark.parametrize(("text", "seconds"), [
    ("1s", 1.0), ("500ms", 0.5), ("2m", 120.0), ("1h30m", 5400.0), ("1.5s", 1.5),
    ("0", 0.0), ("250us", 0.00025)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["1", "s", "1x", "1s2", "--1s"])
def test_parse_duration_rejects_garbage(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


def test_conf_watcher_follows_symlink_swaps_and_keeps_the_old_conf_on_errors(
        tmp_path: Path) -> None:
    def write_version(name: str, text: str) -> None:
        (tmp_path / name).mkdir()
        (tmp_path / name / "lahar-scheduler.conf").write_text(text)
        os.symlink(name, tmp_path / "..data_tmp")
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")  # what the kubelet does

    write_version("v1", "one")
    (tmp_path / "lahar-scheduler.conf").symlink_to("..data/lahar-scheduler.conf")
    applied: list[str] = []

    def load(path: str) -> str:
        text = Path(path).read_text()
        if text == "broken":
            raise ValueError("bad conf")
        return text

    watcher = ConfWatcher(str(tmp_path / "lahar-scheduler.conf"), load=load,
                          apply=applied.append)
    assert watcher.poll(force=True) is False  # unchanged
    write_version("v2", "two")
    assert watcher.poll(force=True) is True and applied == ["two"]
    write_version("v3", "broken")
    assert watcher.poll(force=True) is False and applied == ["two"]
    write_version("v4", "four")
    assert watcher.poll() is False  # polled less than a second ago
    assert watcher.poll(force=True) is True and applied == ["two", "four"]


def test_cache_dump_is_json_in_the_dump_dir(tmp_path: Path) -> None:
    path = write_cache_dump({"nodes": {"n1": {"tasks": []}}}, str(tmp_path))
    assert Path(path).parent == tmp_path and path.endswith(".json")
    assert json.loads(Path(path).read_text()) == {"nodes": {"n1": {"tasks": []}}}


def pod_with_request(name: str) -> dict[str, Any]:
    pod = make_pod(name, namespace="team", group="pg1")
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    return pod


def test_run_schedules_a_pod_against_the_api_server(apiserver: ApiServerDouble) -> None:
    apiserver.create("v1/nodes", make_node("n1"))
    apiserver.create("scheduling.volcano.sh/v1beta1/podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg1", "namespace": "team"},
        "spec": {"minMember": 1, "queue": "default"}})
    apiserver.create("v1/pods", pod_with_request("p1"))
    apiserver.fail("GET", "^/version$", 503, times=2)  # unreachable at first: retried
    port = free_port()
    args = parse("--master", apiserver.url, "--leader-elect=false", "--schedule-period=50ms",
                 "--enable-healthz", f"--healthz-address=127.0.0.1:{port}",
                 "--enable-metrics", f"--listen-address=127.0.0.1:{port}",
                 "--log-format=json")
    stop = threading.Event()
    outcome: list[int] = []
    runner = threading.Thread(target=lambda: outcome.append(run_main(args, stop=stop)),
                              daemon=True)
    runner.start()
    try:
        wait_until(lambda: http_status(f"http://127.0.0.1:{port}/healthz") == 200,
                   message="healthz")
        wait_until(lambda: http_status(f"http://127.0.0.1:{port}/readyz") == 200,
                   timeout=8.0, message="readyz after sync")
        wait_until(lambda: (apiserver.get("v1/pods", "team/p1") or {})
                   .get("spec", {}).get("nodeName") == "n1", timeout=8.0, message="bind")
        queue = apiserver.get("scheduling.volcano.sh/v1beta1/queues", "default")
        assert queue is not None and queue["spec"]["weight"] == 1
        assert len(apiserver.requests_to("GET", "^/version$")) == 3
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            body = response.read().decode()
        assert "volcano_e2e_scheduling_latency_milliseconds_count" in body
        assert 'volcano_action_scheduling_latency_milliseconds_count{action="allocate"}' in body
    finally:
        stop.set()
        runner.join(10.0)
    assert outcome == [0]
    time.sleep(0.05)
    assert http_status(f"http://127.0.0.1:{port}/healthz") == 0  # server stopped


def test_readyz_fails_while_the_api_server_serves_no_read() -> None:
    """Ready needs a read served within ``unanswered_after`` seconds (an etcd outage leaves
    the API server up but serving nothing); it comes back with the next answer."""
    now = [100.0]
    health = Health(leader_elect=False, connected=True, synced=True, unanswered_after=15.0,
                    clock=lambda: now[0])
    health.answered()
    now[0] += 14.0
    assert health.ready()
    now[0] += 2.0
    assert not health.ready()
    health.answered()
    assert health.ready()


def test_check_api_counts_answers_not_timeouts_or_5xx(apiserver: ApiServerDouble) -> None:
    kube = KubeClient.for_host(apiserver.url)
    try:
        health = Health(last_answer=0.0)
        apiserver.fail("GET", "^/api/v1/nodes", 503, times=1)
        assert not check_api(kube, health) and health.last_answer == 0.0
        assert check_api(kube, health) and health.last_answer > 0.0
        apiserver.fail("GET", "^/api/v1/nodes", 403, times=1)  # refused, but it answered
        assert check_api(kube, health)
    finally:
        kube.close()


def _cycle_spans(apiserver: ApiServerDouble, monkeypatch: pytest.MonkeyPatch, *flags: str,
                 cycle: float = 0.0, after: float = 0.0) -> list[tuple[float, float]]:
    """Start and end of each of ``lahar run``'s first five cycles, each made to last at least
    ``cycle`` seconds, with ``after`` seconds of work after each (a full collection)."""
    from scheduler.collector import Collector

    apiserver.create("v1/nodes", make_node("n1"))
    spans = record_cycles(monkeypatch, cycle=cycle)
    monkeypatch.setattr(Collector, "after_cycle", lambda self, busy=False: time.sleep(after))
    args = parse("--master", apiserver.url, "--leader-elect=false", *flags)
    stop = threading.Event()
    runner = threading.Thread(target=run_main, args=(args,), kwargs={"stop": stop}, daemon=True)
    runner.start()
    try:
        wait_until(lambda: len(spans) >= 5, timeout=10.0, message="five cycles")
    finally:
        stop.set()
        runner.join(10.0)
    return spans[1:5]  # the first cycle also waits for the sync


def test_the_period_runs_from_the_end_of_the_cycle_work_after_it_waits_within(
        apiserver: ApiServerDouble, monkeypatch: pytest.MonkeyPatch) -> None:
    """Volcano runs ``runOnce`` under ``wait.Until`` (sliding): the next cycle starts one period
    after the last one ended. What ``lahar run`` does after a cycle (a full collection here,
    made to take 0.4 s) is spent inside that period, not added to it."""
    spans = _cycle_spans(apiserver, monkeypatch, "--schedule-period=500ms", after=0.4)
    waits = [later[0] - earlier[1] for earlier, later in itertools.pairwise(spans)]
    assert all(0.45 <= wait < 0.8 for wait in waits), waits  # 0.5 s, not 0.5 + 0.4


@pytest.mark.parametrize(("cycle", "apart"), [(0.3, 0.5), (0.7, 0.8)])
def test_the_period_from_the_start_spaces_cycle_starts_one_period_apart(
        apiserver: ApiServerDouble, monkeypatch: pytest.MonkeyPatch, cycle: float,
        apart: float) -> None:
    """``--schedule-period-from=start``: cycles of 0.3 s start 0.5 s apart (by default 0.8 s:
    see the test above), and one of 0.7 s, longer than the period, is followed as soon as the
    work after it (0.1 s) is done."""
    spans = _cycle_spans(apiserver, monkeypatch, "--schedule-period=500ms",
                         "--schedule-period-from=start", cycle=cycle, after=0.1)
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(spans)]
    assert all(apart - 0.05 <= gap < apart + 0.2 for gap in gaps), gaps


def test_the_period_counts_from_the_end_unless_asked() -> None:
    assert parse().schedule_period_from == "end"
    with pytest.raises(SystemExit):
        parse("--schedule-period-from=middle")
