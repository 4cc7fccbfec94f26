"""``lahar run`` against the API server double: pods, nodes and namespaces read from the API
carry what inter-pod affinity and topology spread need (labels, terms, namespace labels)."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

from scheduler.cluster.kube.flags import normalize
from scheduler.cluster.kube.run import add_run_arguments, run_main
from tests.apiserver import ApiServerDouble
from tests.scenarios.affinity_helpers import ZONE, affinity, labelled_pod, spread, term, zoned_node


def _wait(predicate: Callable[[], bool], *, timeout: float = 10.0, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _args(url: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return normalize(
        parser.parse_args(["--master", url, "--leader-elect=false", "--schedule-period=50ms"])
    )


def test_run_reads_terms_and_namespace_labels_from_the_api_server() -> None:
    """satisfyPodAffinity with a namespaceSelector resolved from Namespace objects (without
    the namespace's labels nothing would match and the pod would never bind), and
    PodTopologySpread.Filter, both on objects the reflectors delivered."""
    double = ApiServerDouble()
    double.start()
    stop = threading.Event()
    runner: threading.Thread | None = None
    try:
        double.create(
            "v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "data", "labels": {"tier": "db"}},
            },
        )
        for node in (zoned_node("a1", "a"), zoned_node("a2", "a"), zoned_node("b1", "b")):
            double.create("v1/nodes", node)
        db = labelled_pod(
            "db", namespace="data", labels={"app": "db"}, node="a1", scheduler="default-scheduler"
        )
        db["status"] = {"phase": "Running"}
        double.create("v1/pods", db)
        near = term({"app": "db"}, ZONE, namespace_selector={"matchLabels": {"tier": "db"}})
        web = labelled_pod("web", labels={"app": "web"}, affinity=affinity(required=[near]))
        web["status"] = {"phase": "Pending"}
        double.create("v1/pods", web)
        for i in range(2):
            worker = labelled_pod(
                f"w{i}",
                labels={"app": "w"},
                spread=[spread({"app": "w"}, "kubernetes.io/hostname")],
            )
            worker["status"] = {"phase": "Pending"}
            double.create("v1/pods", worker)
        outcome: list[int] = []
        runner = threading.Thread(
            target=lambda: outcome.append(run_main(_args(double.url), stop=stop)), daemon=True
        )
        runner.start()

        def node_of(name: str) -> str:
            pod = double.get("v1/pods", f"default/{name}") or {}
            return str(pod.get("spec", {}).get("nodeName") or "")

        _wait(lambda: all(node_of(n) for n in ("web", "w0", "w1")), what="binds")
        assert node_of("web") in ("a1", "a2")
        assert node_of("w0") != node_of("w1")
    finally:
        stop.set()
        if runner is not None:  # its PodGroup writes must not outlive the server, or they
            runner.join(30)  # retry and log into whichever test runs next
        double.stop()
