"""The web view: the view a closed session publishes, its JSON API and its pages.

What the pages show is checked against the cluster the simulation left: a queue's allocated
against the pods bound in it, a card's memory against the vGPU annotations, a pending job's
reason against the pod's ``PodScheduled`` condition (Volcano's ``RecordJobStatusEvent`` in
pkg/scheduler/framework/job_updater.go writes that message; HAMi's WebUI shows per-card
memory allocated against capacity the same way).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from scheduler.cluster.manifests import load_manifests
from scheduler.cluster.simulation import run_simulation
from scheduler.conf import load_conf
from scheduler.web.htmlfile import render_file
from scheduler.web.publish import Publisher
from scheduler.web.server import WebServer, api_payload, web_address

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "conf" / "samples"

JOB_KEYS = {"uid", "name", "namespace", "queue", "phase", "min_member", "priority", "ready",
            "running", "pending", "age_seconds", "waiting_seconds", "queue_position", "reason",
            "conditions", "pods"}
QUEUE_KEYS = {"name", "parent", "state", "weight", "priority", "allocated", "deserved",
              "capability", "guarantee", "share", "overused", "jobs"}
NODE_KEYS = {"name", "ready", "unschedulable", "allocatable", "used", "pods", "cards"}
CARD_KEYS = {"family", "id", "index", "type", "memory_used", "memory", "cores_used", "cores",
             "shares_used", "shares", "healthy", "pods"}
OVERVIEW_KEYS = {"nodes", "nodes_ready", "jobs", "pods_bound", "pods_pending", "gpu_cards",
                 "gpu_cards_in_use", "gpu_memory", "gpu_memory_used", "device_resources",
                 "cycles", "cycle_seconds", "binds_per_second", "window_seconds", "history",
                 "view_build_seconds", "cycle", "built_at"}


def simulate(sample: str, conf: str | None = None) -> tuple[Publisher, Any]:
    manifests, _ = load_manifests([str(SAMPLES / sample)])
    publisher = Publisher(always=True)
    result = run_simulation(manifests, conf=load_conf(str(ROOT / "conf" / conf) if conf else None),
                            on_close=publisher)
    return publisher, result


@pytest.fixture(scope="module")
def quickstart() -> tuple[Publisher, Any]:
    return simulate("quickstart.yaml")


@pytest.fixture(scope="module")
def vgpu() -> tuple[Publisher, Any]:
    return simulate("vgpu.yaml", "vgpu.conf")


def _pods(result: Any) -> list[dict[str, Any]]:
    return [o for o in result.cluster.all_objects() if o.get("kind") == "Pod"]


def test_api_schema(quickstart: tuple[Publisher, Any]) -> None:
    publisher, _ = quickstart
    status, overview = api_payload("overview", publisher)
    assert status == 200 and set(overview) == OVERVIEW_KEYS
    for name, keys in (("jobs", JOB_KEYS), ("queues", QUEUE_KEYS), ("nodes", NODE_KEYS)):
        status, body = api_payload(name, publisher)
        assert status == 200 and body["items"]
        assert all(set(item) == keys for item in body["items"]), name
    status, body = api_payload("topology", publisher)
    assert status == 200 and body["items"] == []
    assert api_payload("secrets", publisher)[0] == 404
    json.dumps(publisher.current().data)  # type: ignore[union-attr]  # JSON all the way down


def test_counts_and_queue_allocated_match_the_cluster(quickstart: tuple[Publisher, Any]) -> None:
    publisher, result = quickstart
    pods = _pods(result)
    bound = [p for p in pods if p["spec"].get("nodeName")]
    data = publisher.current().data  # type: ignore[union-attr]
    assert data["overview"]["pods_bound"] == len(bound)
    assert data["overview"]["pods_pending"] == len(pods) - len(bound)
    cpu_by_queue: dict[str, float] = {}
    jobs = {(j["namespace"], j["name"]): j for j in data["jobs"]}
    for job in jobs.values():
        for pod in job["pods"]:
            if pod["node"]:
                cpu_by_queue[job["queue"]] = (cpu_by_queue.get(job["queue"], 0.0)
                                              + pod["request"]["cpu"])
    for queue in data["queues"]:
        assert queue["allocated"].get("cpu", 0.0) == cpu_by_queue.get(queue["name"], 0.0)


def test_pending_reason_is_the_pod_condition(quickstart: tuple[Publisher, Any]) -> None:
    publisher, result = quickstart
    data = publisher.current().data  # type: ignore[union-attr]
    messages = {}
    for pod in _pods(result):
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                messages[pod["metadata"]["name"]] = cond["message"]
    checked = 0
    for job in data["jobs"]:
        for pod in job["pods"]:
            if pod["name"] in messages:
                assert pod["message"] == messages[pod["name"]]
                checked += 1
        if job["pending"]:
            assert job["reason"] and job["queue_position"] >= 1
    assert checked >= 1


def test_card_memory_matches_the_ledger(vgpu: tuple[Publisher, Any]) -> None:
    publisher, result = vgpu
    data = publisher.current().data  # type: ignore[union-attr]
    cards = [c for n in data["nodes"] for c in n["cards"]]
    assert cards and all(set(c) == CARD_KEYS for c in cards)
    by_pod: dict[str, int] = {}
    for pod in _pods(result):
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        # volcano.sh/vgpu-ids-new: "uuid,type,mem,cores:" per card, ";" between containers
        text = (pod["metadata"].get("annotations") or {}).get("volcano.sh/vgpu-ids-new", "")
        for entry in re.findall(r"([^,;:]+),([^,]+),(\d+),(\d+)", text):
            by_pod[f"{key}@{entry[0]}"] = int(entry[2])
    for card in cards:
        expected = sum(v for k, v in by_pod.items() if k.endswith("@" + card["id"]))
        assert card["memory_used"] == expected, card
    assert data["overview"]["gpu_memory_used"] == sum(c["memory_used"] for c in cards)


def test_nobody_watching_builds_nothing() -> None:
    """A scheduler whose view nobody asked for pays only for the cycle-time ring."""
    manifests, _ = load_manifests([str(SAMPLES / "quickstart.yaml")])
    publisher = Publisher()
    run_simulation(manifests, conf=load_conf(None), on_close=publisher, max_cycles=2)
    assert publisher.cycles == 2 and publisher.current() is None
    assert publisher.ask() is None  # asked now: the next cycle builds
    run_simulation(manifests, conf=load_conf(None), on_close=publisher, max_cycles=1)
    assert publisher.current() is not None


def test_web_address_defaults_to_loopback() -> None:
    assert web_address(":8081") == ("127.0.0.1", 8081)
    assert web_address("0.0.0.0:8081") == ("0.0.0.0", 8081)
    with pytest.raises(ValueError, match="not host:port"):
        web_address("8081")


def _get(url: str, **headers: str) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


def test_server_pages_and_api(quickstart: tuple[Publisher, Any]) -> None:
    publisher, _ = quickstart
    server = WebServer("127.0.0.1:0", publisher).start()
    try:
        for path in ("/", "/queues", "/jobs", "/nodes", "/topology"):
            status, kind, body = _get(server.url + path)
            assert status == 200 and kind.startswith("text/html"), path
            assert "<main>" in body and "http://" not in body and "https://" not in body
        job = publisher.current().data["jobs"][0]  # type: ignore[union-attr]
        status, _, body = _get(f"{server.url}/jobs/{job['namespace']}/{job['name']}")
        assert status == 200 and job["pods"][0]["name"] in body
        status, _, body = _get(server.url + "/jobs", **{"X-Fragment": "main"})
        assert status == 200 and not body.startswith("<!doctype")
        status, kind, body = _get(server.url + "/api/queues")
        assert status == 200 and kind.startswith("application/json")
        assert {q["name"] for q in json.loads(body)["items"]} >= {"default"}
        assert _get(server.url + "/api/jobs/nowhere/none")[0] == 404
        assert _get(server.url + "/metrics")[0] == 404
    finally:
        server.stop()


def test_simulate_html_is_one_self_contained_file(tmp_path: Path) -> None:
    out = tmp_path / "view.html"
    subprocess.run([sys.executable, "-m", "scheduler", "simulate",
                    str(SAMPLES / "quickstart.yaml"), "--html", str(out)],
                   check=True, capture_output=True, cwd=ROOT, timeout=120)
    text = out.read_text()
    assert "http://" not in text and "https://" not in text
    assert re.findall(r"<link[^>]*>", text) == ["<link rel=icon href='data:,'>"]
    for page in ("overview", "queues", "jobs", "nodes", "topology"):
        assert f'id="page-{page}"' in text
    embedded = re.search(r'id="lahar-view">(.*?)</script>', text, re.S)
    assert embedded is not None
    data = json.loads(embedded.group(1))
    assert data["overview"]["nodes"] == 3


def test_render_file_needs_a_cycle() -> None:
    with pytest.raises(ValueError, match="no view was published"):
        render_file(Publisher())


def test_lahar_top_prints_overview_and_queue_tree(quickstart: tuple[Publisher, Any]) -> None:
    publisher, _ = quickstart
    data = publisher.current().data  # type: ignore[union-attr]
    server = WebServer("127.0.0.1:0", publisher).start()
    try:
        done = subprocess.run([sys.executable, "-m", "scheduler", "top", "--server", server.url,
                               "--once"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    o = data["overview"]
    assert f"pods bound {o['pods_bound']}   pending {o['pods_pending']}" in done.stdout
    for queue in data["queues"]:
        line = next(ln for ln in done.stdout.splitlines() if ln.split()[:1] == [queue["name"]])
        assert f"{queue['allocated'].get('cpu', 0.0) / 1000:g}/" in line


def test_lahar_top_says_when_the_server_is_unreachable() -> None:
    done = subprocess.run([sys.executable, "-m", "scheduler", "top", "--server",
                           "http://127.0.0.1:9", "--once"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 1 and "cannot read http://127.0.0.1:9/api/" in done.stderr


def test_many_readers_cost_one_render_per_picture(quickstart: tuple[Publisher, Any],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers share the loop's CPU: twenty requests for one picture render the page once."""
    import scheduler.web.server as server_module

    publisher, _ = quickstart
    renders: list[str] = []
    real = server_module.page_body

    def counting(name: str, *args: Any, **kwargs: Any) -> str:
        renders.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(server_module, "page_body", counting)
    server = WebServer("127.0.0.1:0", publisher).start()
    try:
        for _ in range(20):
            assert _get(server.url + "/jobs")[0] == 200
    finally:
        server.stop()
    assert renders == ["jobs"]
