"""Run ``lahar run --web-address`` against the API double in a thread (web tests' fixture)."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kube_helpers import make_node, make_pod, wait_until

from scheduler.cluster.kube.flags import normalize
from scheduler.cluster.kube.run import add_run_arguments, run_main
from scheduler.web.publish import Publisher
from scheduler.web.server import WebServer
from tests.apiserver import ApiServerDouble


def pod(name: str, *, cpu: str = "1") -> dict[str, Any]:
    body = make_pod(name, namespace="team", group="pg1")
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    return body


def seed(apiserver: ApiServerDouble) -> None:
    """Two nodes, a PodGroup of one, a pod that fits and one that never can."""
    apiserver.create("v1/nodes", make_node("n1"))
    apiserver.create("v1/nodes", make_node("n2"))
    for name, members in (("pg1", 1), ("huge", 1)):
        apiserver.create("scheduling.volcano.sh/v1beta1/podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"minMember": members, "queue": "default"}})
    apiserver.create("v1/pods", pod("p1"))
    big = make_pod("big", namespace="team", group="huge")
    big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500"}}
    apiserver.create("v1/pods", big)


@contextmanager
def running_with_web(apiserver: ApiServerDouble) -> Iterator[WebServer]:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = normalize(parser.parse_args(["--master", apiserver.url, "--leader-elect=false",
                                        "--schedule-period=50ms", "--log-format=json",
                                        "--web-address=127.0.0.1:0"]))
    publisher = Publisher()
    args.on_close = publisher
    server = WebServer(args.web_address, publisher).start()
    stop = threading.Event()
    runner = threading.Thread(target=lambda: run_main(args, stop=stop), daemon=True)
    runner.start()
    try:
        publisher.ask()  # a reader is here: build from the first cycle on
        wait_until(lambda: publisher.ask() is not None, timeout=10.0, message="first view")
        yield server
    finally:
        stop.set()
        runner.join(10.0)
        server.stop()
