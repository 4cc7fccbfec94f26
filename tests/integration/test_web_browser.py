"""The web view in a real headless Chromium: a ``simulate --html`` file and a running ``lahar run``.

Each page is opened, the figures it shows are checked against the cluster (a queue's allocated
cpu, a card's memory, a pending job's reason — the pod's ``PodScheduled`` message, as Volcano's
RecordJobStatusEvent writes it), the page must log no console error and request no URL outside
the file or the scheduler, and a screenshot of each page is saved under the test's tmp dir. On
the running scheduler a pod created after the page opened must appear without a reload.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cdp import Browser, chromium_path
from web_helpers import pod, running_with_web, seed

from tests.apiserver import ApiServerDouble

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("overview", "queues", "jobs", "nodes", "topology")

pytestmark = pytest.mark.skipif(
    chromium_path() is None,
    reason="no Chromium on PATH: install Debian's 'chromium' package (.ci/run does when it can)")


def _local_only(requests: list[str], *, allowed: tuple[str, ...]) -> list[str]:
    return [url for url in requests if not url.startswith(allowed)]


def _simulate(out: Path, sample: str, conf: str | None = None) -> Path:
    extra = ["--conf", str(ROOT / "conf" / conf)] if conf else []
    subprocess.run([sys.executable, "-m", "scheduler", "simulate", *extra,
                    str(ROOT / "conf" / "samples" / sample), "--html", str(out)],
                   check=True, capture_output=True, cwd=ROOT, timeout=120)
    return out


@pytest.fixture(scope="module")
def vgpu_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _simulate(tmp_path_factory.mktemp("html") / "vgpu.html", "vgpu.yaml", "vgpu.conf")


@pytest.fixture(scope="module")
def quickstart_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _simulate(tmp_path_factory.mktemp("html") / "quickstart.html", "quickstart.yaml")


def _embedded(path: Path) -> Any:
    found = re.search(r'id="lahar-view">(.*?)</script>', path.read_text(), re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_simulate_html_file_in_chromium(vgpu_file: Path, quickstart_file: Path,
                                        tmp_path: Path) -> None:
    data = _embedded(vgpu_file)
    with Browser() as browser:
        for page in PAGES:
            browser.open(f"{vgpu_file.as_uri()}#{page}")
            shown = browser.evaluate(
                "[...document.querySelectorAll('section.page')].filter(s => !s.hidden)"
                ".map(s => s.id)")
            assert shown == [f"page-{page}"]
            (tmp_path / f"file-{page}.png").write_bytes(browser.screenshot())
        browser.open(f"{vgpu_file.as_uri()}#nodes")
        text = browser.evaluate("document.querySelector('#page-nodes').innerText")
        card = next(c for n in data["nodes"] for c in n["cards"] if c["memory_used"])
        used = f"{card['memory_used'] / 1024:.1f}Gi / {card['memory'] / 1024:.1f}Gi"
        assert used in text
        browser.open(f"{quickstart_file.as_uri()}#jobs")
        text = browser.evaluate("document.querySelector('#page-jobs').innerText")
        quick = _embedded(quickstart_file)
        pending = [j for j in quick["jobs"] if j["pending"]]
        assert pending and all(j["reason"] in text for j in pending)
        browser.open(f"{quickstart_file.as_uri()}#queues")
        text = browser.evaluate("document.querySelector('#page-queues').innerText")
        for queue in quick["queues"]:
            cpu = queue["allocated"].get("cpu", 0.0)
            if cpu:
                assert f"cpu {cpu / 1000:g} " in text, queue["name"]
        assert browser.console_errors == []
        assert _local_only(browser.requests, allowed=("file://", "data:", "about:")) == []
    assert all((tmp_path / f"file-{page}.png").stat().st_size > 10_000 for page in PAGES)


def test_running_scheduler_pages_in_chromium(apiserver: ApiServerDouble, tmp_path: Path) -> None:
    seed(apiserver)
    with running_with_web(apiserver) as server, Browser() as browser:
        local = (server.url, "data:", "about:")
        browser.open(server.url + "/jobs")
        browser.wait_for("document.body.innerText.includes('huge')")
        big = next(p for p in (apiserver.get("v1/pods", "team/big") or {})
                   .get("status", {}).get("conditions", []) if p["type"] == "PodScheduled")
        browser.wait_for(f"document.body.innerText.includes({json.dumps(big['message'])})")
        browser.open(server.url + "/queues")
        # one pod of 1 cpu is bound in the default queue
        browser.wait_for("document.body.innerText.includes('cpu 1 ')")
        for page in PAGES:
            browser.open(server.url + ("/" if page == "overview" else f"/{page}"))
            (tmp_path / f"run-{page}.png").write_bytes(browser.screenshot())
        browser.open(server.url + "/jobs/team/pg1")
        browser.evaluate("window.stillTheSamePage = true")
        assert not browser.evaluate("document.body.innerText.includes('p2')")
        apiserver.create("v1/pods", pod("p2"))
        browser.wait_for("document.body.innerText.includes('p2') && window.stillTheSamePage",
                         timeout=15.0)
        (tmp_path / "run-job.png").write_bytes(browser.screenshot())
        assert browser.console_errors == []
        assert _local_only(browser.requests, allowed=local) == []
