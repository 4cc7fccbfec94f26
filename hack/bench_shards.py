#!/usr/bin/env python3
"""Node sharding on one API server: one ``lahar run`` against several with hard NodeShards.

    python hack/bench_shards.py --kubeconfig K [--nodes 200] [--pods 2000] [--shards 2]
                                [--order single,sharded] [--schedule-period 200ms]

Each phase gets fresh fake Nodes (labelled and tainted for that phase only), of 1 CPU each, and
plain pods of 100m: the cluster holds exactly ten pods a node, so with ``--pods`` = 10 ×
``--nodes`` every node ends full and one pod too many on a node shows.

* ``single``: one ``lahar run`` for all the pods, no sharding.
* ``sharded``: ``lahar shard-controller --once --assignment-batch-size 0`` splits the nodes
  into ``--shards`` NodeShards of ``nodes / shards`` each (allocation-rate over [0, 1] and
  node-limit, in Volcano's sharding.yaml), then ``--shards`` ``lahar run`` processes start
  together, each with its own ``--scheduler-name`` and ``--scheduler-sharding-mode=hard``;
  pod ``i`` names scheduler ``i mod shards``.

Pods are created before the schedulers start; a watch times each bind from the start.
``<phase>_all_bound_s`` = start to the last bind; ``<phase>_pods_per_second`` = pods /
(last bind − first bind). Checks, per phase: every pod bound, no node above its CPU or its pod
count, in the sharded phase every pod on its scheduler's shard; ``binding_posts`` (from the API
server's ``apiserver_request_total``: Binding requests in the phase, whoever sent them) equal
to the pods, i.e. no pod bound twice or tried twice, and no ``bind failed`` in any log.

Prints one JSON object: the figures of each phase, ``pods_per_second_ratio`` and
``all_bound_ratio`` (sharded / single), peak RSS and CPU seconds per scheduler, the CPU model
and the order. Everything created is deleted at the end (the NodeShard CRD too, when this run
installed it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from apiwrites import server_writes  # noqa: E402
from bench_e2e import (  # noqa: E402
    ROOT,
    RUN_LABEL,
    TAINT,
    Cluster,
    api_server,
    bound_at,
    cpu_seconds,
    ignore_missing,
    in_parallel,
    pod_manifest,
    precompile,
    undecoded,
)
from bench_peer import cpu_model, peak_rss_mb, start_lahar, stop_group  # noqa: E402
from kubernetes import client  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

SHARD = ("shard.volcano.sh", "v1alpha1")
PODS_PER_NODE = 10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default="",
                        help="API server to use (default: start the in-repo double)")
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--order", default="single,sharded")
    parser.add_argument("--schedule-period", default="200ms")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--logs", default="", help="keep the schedulers' logs in this folder")
    args = parser.parse_args(argv)
    args.order = [p.strip() for p in args.order.split(",") if p.strip()]
    if any(p not in ("single", "sharded") for p in args.order):
        parser.error("--order takes single and sharded")
    if args.pods > args.nodes * PODS_PER_NODE:
        parser.error(f"--pods must be at most {PODS_PER_NODE} × --nodes (the cluster's room)")
    return args


def ensure_shard_crd(cluster: Cluster) -> bool:
    """Install the NodeShard CRD when the server lacks it; True when this call installed it."""
    import yaml

    try:
        undecoded(cluster.custom.list_cluster_custom_object, *SHARD, "nodeshards", limit=1)
        return False
    except ApiException as error:
        if error.status != 404:
            raise
    extensions = client.ApiextensionsV1Api(cluster.custom.api_client)
    path = ROOT / "conf" / "crds" / "shard.volcano.sh_nodeshards.yaml"
    for document in yaml.safe_load_all(path.read_text()):
        if document:
            undecoded(extensions.create_custom_resource_definition, document)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            undecoded(cluster.custom.list_cluster_custom_object, *SHARD, "nodeshards", limit=1)
            return True
        except ApiException:
            time.sleep(0.5)
    raise RuntimeError("the NodeShard CRD was not served within 60 s")


def remove_shard_crd(cluster: Cluster) -> None:
    extensions = client.ApiextensionsV1Api(cluster.custom.api_client)
    ignore_missing(extensions.delete_custom_resource_definition, "nodeshards.shard.volcano.sh")


def create_node(cluster: Cluster, name: str, run_id: str) -> None:
    resources = {"cpu": "1", "memory": "16Gi", "pods": "110"}
    undecoded(cluster.core.create_node, {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {RUN_LABEL: run_id,
                                              "kubernetes.io/hostname": name}},
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "Fake"}]}})


def sharding_yaml(names: list[str], per_shard: int) -> str:
    lines = ["schedulerConfigs:"]
    for name in names:
        lines += [f"  - name: {name}", "    type: volcano", "    policies:",
                  "      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, "
                  "maxCPUUtil: 1.0}}",
                  f"      - {{name: node-limit, arguments: {{maxNodes: {per_shard}}}}}"]
    return "\n".join(lines) + "\n"


def write_shards(kubeconfig: str, names: list[str], per_shard: int, run_id: str,
                 workdir: Path) -> dict[str, list[str]]:
    config = workdir / f"sharding-{run_id}.yaml"
    config.write_text(sharding_yaml(names, per_shard))
    subprocess.run([sys.executable, "-m", "scheduler", "shard-controller", "--kubeconfig",
                    kubeconfig, "--sharding-config", str(config), "--assignment-batch-size",
                    "0", "--node-selector", f"{RUN_LABEL}:{run_id}", "--once"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    cluster = Cluster(kubeconfig)
    return {name: list(undecoded(cluster.custom.get_cluster_custom_object, *SHARD,
                                 "nodeshards", name)["spec"]["nodesDesired"])
            for name in names}


def check(cluster: Cluster, *, namespace: str, nodes: list[str],
          shard_of: dict[str, set[str]] | None) -> dict[str, Any]:
    """What went wrong: unbound pods, full nodes over their room, pods off their shard."""
    pods = undecoded(cluster.core.list_namespaced_pod, namespace).get("items") or []
    per_node: dict[str, int] = {}
    unbound = off_shard = 0
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node:
            unbound += 1
            continue
        per_node[node] = per_node.get(node, 0) + 1
        if shard_of is not None and node not in shard_of[pod["spec"]["schedulerName"]]:
            off_shard += 1
    return {"unbound": unbound, "off_shard": off_shard,
            "overfilled_nodes": sum(1 for n in nodes if per_node.get(n, 0) > PODS_PER_NODE),
            "fullest_node_pods": max(per_node.values(), default=0)}


def phase(kind: str, cluster: Cluster, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    namespace = f"lahar-shards-{run_id}"
    node_names = [f"lahar-shards-{run_id}-{i:04d}" for i in range(args.nodes)]
    count = args.shards if kind == "sharded" else 1
    schedulers = [f"lahar-shards-{run_id}-{i}" for i in range(count)]
    pod_names = [f"p-{i:06d}" for i in range(args.pods)]
    processes: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    logs: list[Any] = []
    try:
        undecoded(cluster.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": namespace}})
        in_parallel(8, [partial(create_node, cluster, n, run_id) for n in node_names])
        in_parallel(8, [partial(undecoded, cluster.core.create_namespaced_pod, namespace,
                                pod_manifest(namespace, p, scheduler=schedulers[i % count],
                                             group="", run_id=run_id))
                        for i, p in enumerate(pod_names)])
        shards = None
        if kind == "sharded":
            shards = write_shards(args.kubeconfig, schedulers, args.nodes // count, run_id,
                                  workdir)
        writes_before = server_writes(args.kubeconfig)
        started = time.perf_counter()
        for name in schedulers:
            log_path = workdir / f"{name}.log"
            extra = (["--scheduler-sharding-mode=hard", f"--scheduler-sharding-name={name}"]
                     if kind == "sharded" else [])
            logs.append(log_path.open("wb"))
            processes.append((name, start_lahar(args.kubeconfig, name, run_id,
                                                args.schedule_period, logs[-1].fileno(),
                                                extra),
                              log_path))
        times = bound_at(cluster, namespace=namespace, pods=set(pod_names), started=started,
                         timeout=args.timeout)
        stamps = sorted(times.values())
        time.sleep(1.0)  # binds still in flight, if any, reach the server's counters
        writes_after = server_writes(args.kubeconfig)
        result: dict[str, Any] = {"bound": len(stamps), "schedulers": count}
        if stamps:
            result["first_bind_s"] = round(stamps[0], 3)
            result["all_bound_s"] = round(stamps[-1], 3)
            if len(stamps) > 1 and stamps[-1] > stamps[0]:
                result["pods_per_second"] = round(len(stamps) / (stamps[-1] - stamps[0]), 1)
        if writes_before is not None and writes_after is not None:
            result["binding_posts"] = (writes_after["POST pods/binding"]
                                       - writes_before["POST pods/binding"])
        result["peak_rss_mb"] = [peak_rss_mb(p.pid) for _, p, _ in processes]
        result["cpu_s"] = [round(cpu_seconds(p.pid) or 0.0, 2) for _, p, _ in processes]
        result.update(check(cluster, namespace=namespace, nodes=node_names,
                            shard_of=None if shards is None
                            else {name: set(nodes) for name, nodes in shards.items()}))
        if shards is not None:
            result["shard_sizes"] = [len(shards[name]) for name in schedulers]
            result["shards_overlap"] = len(set.intersection(*(set(v) for v in shards.values())))
        for _, process, _ in processes:
            stop_group(process, wrapped=False)
        result["bind_failed_lines"] = sum(
            log_path.read_text(errors="replace").count('"bind failed"')
            for _, _, log_path in processes)
        return result
    finally:
        for _, process, _ in processes:
            stop_group(process, wrapped=False)
        for log in logs:
            log.close()
        for name in schedulers:
            ignore_missing(cluster.custom.delete_cluster_custom_object, *SHARD, "nodeshards",
                           name)
        cluster.remove(namespace, node_names)


def run(args: argparse.Namespace) -> dict[str, Any]:
    precompile()
    with api_server(args.kubeconfig) as kubeconfig:
        args.kubeconfig = kubeconfig
        cluster = Cluster(kubeconfig)
        cluster.ensure_crds()
        installed = ensure_shard_crd(cluster)
        out: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "shards": args.shards,
                               "order": args.order, "cpu_model": cpu_model()}
        try:
            with tempfile.TemporaryDirectory(prefix="lahar-shards-") as temp:
                workdir = Path(args.logs or temp)
                workdir.mkdir(parents=True, exist_ok=True)
                for kind in args.order:
                    for key, value in phase(kind, cluster, args, workdir).items():
                        out[f"{kind}_{key}"] = value
        finally:
            if installed:
                remove_shard_crd(cluster)
        if out.get("single_pods_per_second") and out.get("sharded_pods_per_second"):
            out["pods_per_second_ratio"] = round(
                out["sharded_pods_per_second"] / out["single_pods_per_second"], 2)
        if out.get("single_all_bound_s") and out.get("sharded_all_bound_s"):
            out["all_bound_ratio"] = round(
                out["sharded_all_bound_s"] / out["single_all_bound_s"], 2)
        return out


def main(argv: list[str] | None = None) -> int:
    print(json.dumps(run(parse_args(argv)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
