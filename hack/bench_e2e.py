#!/usr/bin/env python3
"""End-to-end bind throughput of ``lahar run`` against an API server, with raw-bind baselines.

    python hack/bench_e2e.py --nodes 200 --pods 2000 [--kubeconfig K] [--schedule-period 200ms]
                             [--baseline-binds 1000] [--warmup-binds 200]
                             [-- EXTRA lahar run FLAGS...]

Against ``--kubeconfig`` it uses that API server: it creates its own namespace, fake Nodes
(labelled and tainted for this run only, so nothing else lands on them) and the Volcano CRDs
when they are missing, and removes what it made at the end. Without it, it starts the
in-repository API server double (``python -m tests.apiserver``) in a subprocess.

Steps, in this order, on the same server:

0. ``--warmup-binds`` pods of a scheduler name nobody serves are bound directly from eight
   threads and not counted: a freshly started API server answers its first few hundred
   writes slower, and whichever measurement came first would pay for that.
1. ``raw_bind_1_thread`` / ``raw_bind_8_threads``: pods of a scheduler name nobody serves are
   bound through the ``binding`` subresource directly, by one thread and then by eight (one
   client each), and the binds per second are measured. These are the ceilings a scheduler's
   write path can approach.
2. PodGroups of 1–4 pods (``minMember`` = size), ``--pods`` pods in all, are created up front.
3. ``lahar run`` is started; a watch records when each pod gets ``spec.nodeName``.
   ``first_bind_seconds`` = process start to the first bind (start-up, list, first cycle);
   ``pods_per_second`` = pods bound / (last bind − first bind), the steady write rate.

Prints one JSON object: ``pods_per_second``, ``raw_bind_1_thread``, ``raw_bind_8_threads``,
``ratio_to_8_threads``, ``first_bind_seconds``, the CPU time ``lahar run`` used until the last
bind (``scheduler_cpu_seconds``) and the run's shape.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import urllib3  # noqa: E402
from kubernetes import client, config  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402
from unwind import unwind_on_sigterm  # noqa: E402

from scheduler.cluster.kube.client import KubeClient  # noqa: E402
from scheduler.cluster.kube.reflector import iter_lines  # noqa: E402

# A test server's self-signed certificate: urllib3 would warn on every request, and the
# project's client once per client.
warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
logging.getLogger("scheduler.cluster.kube.client").setLevel(logging.ERROR)

VOLCANO = ("scheduling.volcano.sh", "v1beta1")
RUN_LABEL = "lahar.bench/run"
TAINT = {"key": "lahar.bench/fake", "value": "true", "effect": "NoSchedule"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--kubeconfig", default="",
                        help="API server to use (default: start the in-repo double)")
    parser.add_argument("--schedule-period", default="200ms")
    parser.add_argument("--baseline-binds", type=int, default=1000,
                        help="pods bound directly for each raw baseline")
    parser.add_argument("--warmup-binds", type=int, default=200,
                        help="pods bound directly, not counted, before the baselines")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for every pod to be bound")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("extra", nargs="*", help="more `lahar run` flags (after --)")
    return parser.parse_args(argv)


def undecoded(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Call a client method without model decoding; read the body before the connection goes
    back to the pool (a connection released unread is reused dirty)."""
    response = call(*args, _preload_content=False, **kwargs)
    try:
        data = response.read()
    finally:
        response.release_conn()
    return json.loads(data) if data else {}


def ignore_missing(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    try:
        undecoded(call, *args, **kwargs)
    except ApiException as error:
        if error.status != 404:
            raise


def pod_manifest(namespace: str, name: str, *, scheduler: str, group: str,
                 run_id: str) -> dict[str, Any]:
    """A pause pod of 100m CPU / 64Mi for ``scheduler``, kept on this run's fake nodes."""
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {RUN_LABEL: run_id},
                     "annotations": annotations},
        "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                 "nodeSelector": {RUN_LABEL: run_id},
                 "tolerations": [{"key": TAINT["key"], "operator": "Exists"}],
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


class Cluster:
    """The API calls the benchmark makes, each thread with a client of its own."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self._local = threading.local()

    def _api(self) -> client.ApiClient:
        api = getattr(self._local, "api", None)
        if api is None:
            api = config.new_client_from_config(config_file=self.kubeconfig)
            self._local.api = api
        return api

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self._api())

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self._api())

    def ensure_crds(self) -> None:
        import yaml

        extensions = client.ApiextensionsV1Api(self._api())
        for plural in ("podgroups", "queues"):
            try:
                undecoded(self.custom.list_cluster_custom_object, *VOLCANO, plural, limit=1)
                continue
            except ApiException as error:
                if error.status != 404:
                    raise
            path = ROOT / "conf" / "crds" / f"scheduling.volcano.sh_{plural}.yaml"
            for document in yaml.safe_load_all(path.read_text()):
                if document:
                    undecoded(extensions.create_custom_resource_definition, document)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    undecoded(self.custom.list_cluster_custom_object, *VOLCANO, plural, limit=1)
                    break
                except ApiException:
                    time.sleep(0.5)

    def create_node(self, name: str, run_id: str) -> None:
        resources = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        undecoded(self.core.create_node, {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {RUN_LABEL: run_id,
                                                  "kubernetes.io/hostname": name}},
            "spec": {"taints": [TAINT]},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Fake"}]}})

    def create_pod(self, namespace: str, name: str, *, scheduler: str, group: str,
                   run_id: str) -> None:
        undecoded(self.core.create_namespaced_pod, namespace,
                  pod_manifest(namespace, name, scheduler=scheduler, group=group, run_id=run_id))

    def create_podgroup(self, namespace: str, name: str, size: int) -> None:
        undecoded(self.custom.create_namespaced_custom_object, *VOLCANO, namespace, "podgroups",
                  {"apiVersion": "/".join(VOLCANO), "kind": "PodGroup",
                   "metadata": {"name": name, "namespace": namespace},
                   "spec": {"minMember": size}})

    def bind(self, namespace: str, pod: str, node: str) -> None:
        undecoded(self.core.create_namespaced_pod_binding, pod, namespace, {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    def remove(self, namespace: str, nodes: list[str]) -> None:
        """Delete what the run made; finalize the namespace, which a bare server never empties."""
        pods = undecoded(self.core.list_namespaced_pod, namespace).get("items") or []
        in_parallel(8, [partial(ignore_missing, self.core.delete_namespaced_pod,
                                p["metadata"]["name"], namespace, grace_period_seconds=0)
                        for p in pods])
        groups = undecoded(self.custom.list_namespaced_custom_object, *VOLCANO, namespace,
                           "podgroups").get("items") or []
        in_parallel(8, [partial(ignore_missing, self.custom.delete_namespaced_custom_object,
                                *VOLCANO, namespace, "podgroups", g["metadata"]["name"])
                        for g in groups])
        in_parallel(8, [partial(ignore_missing, self.core.delete_node, n) for n in nodes])
        ignore_missing(self.core.delete_namespace, namespace)
        try:
            body = undecoded(self.core.read_namespace, namespace)
        except ApiException:
            return
        body.setdefault("spec", {})["finalizers"] = []
        ignore_missing(self.core.replace_namespace_finalize, namespace, body)


def plain_burst(cluster: Cluster, *, prefix: str, run_id: str, nodes: int, pods: int,
                scheduler: str) -> tuple[str, list[str], list[str]]:
    """A namespace ``prefix-run_id``, ``nodes`` fake Nodes labelled for the run and ``pods``
    plain pods (no PodGroup) for ``scheduler``: the namespace, node names and pod names."""
    namespace = f"{prefix}-{run_id}"
    node_names = [f"{prefix}-{run_id}-{i:05d}" for i in range(nodes)]
    undecoded(cluster.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": namespace}})
    in_parallel(8, [partial(cluster.create_node, n, run_id) for n in node_names])
    pod_names = [f"p-{i:06d}" for i in range(pods)]
    in_parallel(8, [partial(cluster.create_pod, namespace, p, scheduler=scheduler, group="",
                            run_id=run_id) for p in pod_names])
    return namespace, node_names, pod_names


def in_parallel(threads: int, calls: list[Callable[[], None]]) -> float:
    """Run ``calls`` on ``threads`` workers; the wall time it took."""
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()
    return time.perf_counter() - start


def raw_bind_rate(cluster: Cluster, *, namespace: str, nodes: list[str], count: int,
                  threads: int, run_id: str, tag: str) -> float:
    """Binds per second of ``count`` direct binds from ``threads`` threads."""
    names = [f"raw-{tag}-{i}" for i in range(count)]
    nobody = f"nobody-{run_id}"
    in_parallel(8, [partial(cluster.create_pod, namespace, n, scheduler=nobody, group="",
                            run_id=run_id) for n in names])
    seconds = in_parallel(threads, [partial(cluster.bind, namespace, n, nodes[i % len(nodes)])
                                    for i, n in enumerate(names)])
    return count / seconds


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process used so far; None where /proc is not there."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def precompile() -> None:
    """Byte-compile the project first, as installing its wheel does: a process started with
    ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module at each start."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "scheduler", "plugins", "actions"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


@contextmanager
def api_server(kubeconfig: str) -> Iterator[str]:
    """The kubeconfig to use: the one given, or a freshly started double's."""
    if kubeconfig:
        yield kubeconfig
        return
    with tempfile.TemporaryDirectory(prefix="lahar-bench-") as workdir:
        path = str(Path(workdir) / "kubeconfig")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        process = subprocess.Popen([sys.executable, "-m", "tests.apiserver", "--kubeconfig",
                                    path], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert process.stdout is not None
            process.stdout.readline()  # "serving on ...": the kubeconfig is written
            yield path
        finally:
            process.terminate()
            process.wait(10)


def watch_binds(cluster: Cluster, *, namespace: str, pods: set[str], started: float,
                timeout: float, alive: Callable[[], bool] = lambda: True) -> list[float]:
    """Seconds since ``started`` at which each of ``pods`` was seen bound, in order."""
    return sorted(bound_at(cluster, namespace=namespace, pods=pods, started=started,
                           timeout=timeout, alive=alive).values())


def bound_at(cluster: Cluster, *, namespace: str, pods: set[str], started: float,
             timeout: float, into: dict[str, float] | None = None,
             alive: Callable[[], bool] = lambda: True,
             first_seen: dict[str, float] | None = None) -> dict[str, float]:
    """Seconds since ``started`` (a ``time.perf_counter`` value) at which each of ``pods``
    was seen bound, by name; filled into ``into`` as they come when one is given. Gives up
    at ``timeout`` or, within a watch's 30 s, once ``alive()`` says the scheduler is gone.
    ``first_seen``, when given, gets the same clock's reading at each pod's first appearance
    in the listing or the watch, bound or not.

    The watch is read with the project's light client and plain JSON: the official client's
    watch turns every event into a model object (a few ms of CPU each), and a scheduler whose
    pods change more often than another's (a PodGroup annotation, a status) would be timed
    late by a watcher falling behind.
    """
    light = KubeClient.from_flags(kubeconfig=cluster.kubeconfig, qps=0)
    path = f"/api/v1/namespaces/{namespace}/pods"
    try:
        listing = light.request_json("GET", path)
        bound_at: dict[str, float] = {} if into is None else into
        for pod in listing.get("items") or []:
            name = pod["metadata"]["name"]
            if name not in pods:
                continue
            now = time.perf_counter() - started
            if first_seen is not None:
                first_seen.setdefault(name, now)
            if pod["spec"].get("nodeName"):
                bound_at[name] = now
        version = listing["metadata"]["resourceVersion"]
        deadline = time.monotonic() + timeout
        while len(bound_at) < len(pods) and time.monotonic() < deadline and alive():
            response = light.request("GET", path, query={
                "watch": True, "allowWatchBookmarks": True, "resourceVersion": version,
                "timeoutSeconds": 30}, timeout=(5.0, 60.0))
            try:
                for line in iter_lines(response):
                    obj = json.loads(line).get("object") or {}
                    meta = obj.get("metadata") or {}
                    version = meta.get("resourceVersion", version)
                    name = meta.get("name", "")
                    if name in pods:
                        now = time.perf_counter() - started
                        if first_seen is not None:
                            first_seen.setdefault(name, now)
                        if name not in bound_at and (obj.get("spec") or {}).get("nodeName"):
                            bound_at[name] = now
                            if len(bound_at) == len(pods):
                                break
                    if time.monotonic() > deadline or not alive():
                        break
            finally:
                response.release_conn()
        return bound_at
    finally:
        light.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    namespace = f"lahar-bench-{run_id}"
    scheduler = f"lahar-bench-{run_id}"
    rng = random.Random(args.seed)
    precompile()
    with api_server(args.kubeconfig) as kubeconfig:
        cluster = Cluster(kubeconfig)
        cluster.ensure_crds()
        nodes = [f"lahar-bench-{run_id}-{i:05d}" for i in range(args.nodes)]
        undecoded(cluster.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": namespace}})
        process: subprocess.Popen[bytes] | None = None
        log_name = ""
        cpu: float | None = None
        try:
            in_parallel(8, [partial(cluster.create_node, n, run_id) for n in nodes])
            if args.warmup_binds > 0:
                raw_bind_rate(cluster, namespace=namespace, nodes=nodes,
                              count=args.warmup_binds, threads=8, run_id=run_id, tag="w")
            raw_1 = raw_bind_rate(cluster, namespace=namespace, nodes=nodes,
                                  count=args.baseline_binds, threads=1, run_id=run_id, tag="a")
            raw_8 = raw_bind_rate(cluster, namespace=namespace, nodes=nodes,
                                  count=args.baseline_binds, threads=8, run_id=run_id, tag="b")
            calls: list[Callable[[], None]] = []
            names: set[str] = set()
            group = 0
            while len(names) < args.pods:
                size = min(rng.randint(1, 4), args.pods - len(names))
                group_name = f"pg-{group:05d}"
                cluster.create_podgroup(namespace, group_name, size)
                for member in range(size):
                    pod = f"{group_name}-{member}"
                    names.add(pod)
                    calls.append(partial(cluster.create_pod, namespace, pod,
                                         scheduler=scheduler, group=group_name, run_id=run_id))
                group += 1
            in_parallel(8, calls)
            log_fd, log_name = tempfile.mkstemp(prefix="lahar-bench-", suffix=".log")
            argv = [sys.executable, "-m", "scheduler", "run", "--kubeconfig", kubeconfig,
                    "--scheduler-name", scheduler, "--schedule-period", args.schedule_period,
                    "--leader-elect=false", "--node-selector", f"{RUN_LABEL}:{run_id}",
                    "--listen-address=127.0.0.1:0", "--healthz-address=127.0.0.1:0",
                    "--log-format=json", *args.extra]
            started = time.perf_counter()
            process = subprocess.Popen(argv, cwd=ROOT, stdout=log_fd, stderr=subprocess.STDOUT,
                                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
            os.close(log_fd)
            times = watch_binds(cluster, namespace=namespace, pods=names, started=started,
                                timeout=args.timeout)
            cpu = cpu_seconds(process.pid)
        finally:
            if process is not None:
                process.terminate()
                process.wait(30)
            cluster.remove(namespace, nodes)
    if len(times) < len(names):
        raise SystemExit(f"only {len(times)} of {len(names)} pods were bound in "
                         f"{args.timeout:.0f}s; scheduler log: {log_name}")
    span = times[-1] - times[0]
    rate = len(times) / span if span > 0 else float("inf")
    return {
        "server": "kubeconfig" if args.kubeconfig else "double",
        "nodes": args.nodes, "pods": args.pods, "podgroups": group,
        "pods_per_second": round(rate, 1),
        "raw_bind_1_thread": round(raw_1, 1),
        "raw_bind_8_threads": round(raw_8, 1),
        "ratio_to_8_threads": round(rate / raw_8, 3),
        "first_bind_seconds": round(times[0], 3),
        "all_bound_seconds": round(times[-1], 3),
        "scheduler_cpu_seconds": None if cpu is None else round(cpu, 2),
        "warmup_binds": args.warmup_binds,
        "lahar_run_flags": args.extra,
    }


def main(argv: list[str] | None = None) -> int:
    unwind_on_sigterm()
    print(json.dumps(run(parse_args(argv))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
