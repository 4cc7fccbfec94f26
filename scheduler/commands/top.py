"""``lahar top``: the web view's overview and queue table in a terminal.

For people on a jump host. ``--server URL`` reads the scheduler's ``/api/overview`` and
``/api/queues`` (``lahar run --web-address``). Without ``--server`` it reads the cluster
through a kubeconfig instead (``--kubeconfig``/``--context`` as ``inspect``): it lists Nodes,
Pods, PodGroups and Queues, opens one session over them with the conf's plugins and no action
(nothing is placed), and builds the same JSON the web view publishes. Either way it prints,
refreshing every ``--interval`` seconds until Ctrl-C (``--once`` prints once).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import IO, Any

from scheduler.commands.tables import table_lines

__all__ = ["add_top_arguments", "render_top"]


def _cores(milli: float | None) -> str:
    return "-" if milli is None else f"{milli / 1000:g}"


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value / 1024**3:.1f}Gi"


def render_top(overview: dict[str, Any], queues: list[dict[str, Any]]) -> str:
    """The overview line block and the queue table, as text."""
    cycle = overview.get("cycle_seconds", {})
    gpu = (f"{overview['gpu_memory_used'] / 1024:.1f}/{overview['gpu_memory'] / 1024:.1f}Gi"
           if overview.get("gpu_memory") else "-")
    lines = [
        f"nodes {overview['nodes']} ({overview['nodes_ready']} ready)   jobs {overview['jobs']}"
        f"   pods bound {overview['pods_bound']}   pending {overview['pods_pending']}",
        f"gpu cards in use {overview['gpu_cards_in_use']}/{overview['gpu_cards']}   "
        f"gpu memory {gpu}   binds/s {overview.get('binds_per_second', 0.0):.1f}",
        f"cycle last {cycle.get('last', 0) * 1000:.1f} ms   p50 {cycle.get('p50', 0) * 1000:.1f}"
        f" ms   p99 {cycle.get('p99', 0) * 1000:.1f} ms   (cycle {overview.get('cycle', 0)})",
        "",
    ]
    children: dict[str, list[dict[str, Any]]] = {}
    for queue in queues:
        children.setdefault(queue["parent"], []).append(queue)
    rows = [["QUEUE", "WEIGHT", "CPU ALLOC/DESERVED/CAP", "MEMORY ALLOC/CAP", "SHARE",
             "INQUEUE", "PENDING", "RUNNING", "OVERUSED"]]

    def walk(parent: str, depth: int) -> None:
        for q in children.get(parent, []):
            a, d, c = q["allocated"], q["deserved"], q["capability"]
            rows.append([
                "  " * depth + q["name"], str(q["weight"]),
                f"{_cores(a.get('cpu', 0.0))}/{_cores(d.get('cpu'))}/{_cores(c.get('cpu'))}",
                f"{_gib(a.get('memory', 0.0))}/{_gib(c.get('memory'))}", f"{q['share']:.2f}",
                str(q["jobs"]["inqueue"]), str(q["jobs"]["pending"]), str(q["jobs"]["running"]),
                "yes" if q["overused"] else "no"])
            walk(q["name"], depth + 1)

    walk("", 0)
    return "\n".join(lines + table_lines(rows)) + "\n"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return json.loads(reply.read())


CLUSTER_COLLECTIONS = (("/api/v1/nodes", "Node"), ("/api/v1/pods", "Pod"),
                       ("/apis/scheduling.volcano.sh/v1beta1/podgroups", "PodGroup"),
                       ("/apis/scheduling.volcano.sh/v1beta1/queues", "Queue"))


def cluster_view(objects: Sequence[Mapping[str, Any]], conf: Any) -> tuple[dict[str, Any],
                                                                    list[dict[str, Any]]]:
    """The web view's overview and queues of ``objects`` (a cluster's listed objects): one
    session with ``conf``'s plugins and no action, closed as a cycle is."""
    from dataclasses import replace

    from scheduler.cluster.manifests import Manifest
    from scheduler.cluster.simulation import build_simulation
    from scheduler.web.publish import Publisher

    publisher = Publisher(always=True)
    manifests = [Manifest(f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}",
                          dict(obj))
                 for obj in objects]
    _, _, scheduler = build_simulation(manifests, conf=replace(conf, actions=()),
                                       on_close=publisher)
    scheduler.run_once()
    view = publisher.current()
    if view is None:
        raise ValueError("no view was built")
    overview = {"cycle": view.cycle, **view.data["overview"], **publisher.summary()}
    return overview, view.data["queues"]


def _read_cluster(args: argparse.Namespace) -> str:
    from scheduler.commands.inspect import _from_cluster
    from scheduler.conf import load_conf

    conf = load_conf(args.scheduler_conf, log_warnings=False)
    try:
        objects = _from_cluster(args.kubeconfig, args.context, CLUSTER_COLLECTIONS)
    except Exception as exc:  # cluster unreachable, bad kubeconfig, forbidden
        raise OSError(str(exc)) from exc
    return render_top(*cluster_view(objects, conf))


def _top(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    out = out or sys.stdout
    base = (args.server or "").rstrip("/")
    try:
        while True:
            try:
                if not base:
                    text = _read_cluster(args)
                else:
                    text = render_top(_get(f"{base}/api/overview"),
                                      _get(f"{base}/api/queues")["items"])
            except urllib.error.HTTPError as err:
                text = f"{base}: {err.code} {json.loads(err.read() or b'{}').get('error', '')}\n"
            except (urllib.error.URLError, OSError, ValueError) as err:
                where = f"{base}/api/" if base else "the cluster"
                print(f"error: cannot read {where}: {err}", file=sys.stderr)
                return 1
            if not args.once and out.isatty():
                out.write("\x1b[H\x1b[2J")
            out.write(text)
            out.flush()
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 130


def add_top_arguments(sub: Any) -> None:
    from scheduler.commands.inspect import CONTEXT_HELP, KUBECONFIG_HELP

    top = sub.add_parser(
        "top", help="show a running scheduler's overview and queues in the terminal",
        description="Read the web view's JSON API of a scheduler started with --web-address, "
        "or without --server the cluster through a kubeconfig, and print the overview and the "
        "queue table, refreshing.")
    top.add_argument("--server", default=None, metavar="URL",
                     help="the scheduler's web address, e.g. http://127.0.0.1:8081 (without "
                          "it: read the cluster through --kubeconfig)")
    top.add_argument("--kubeconfig", default=None, metavar="PATH", help=KUBECONFIG_HELP)
    top.add_argument("--context", default=None, help=CONTEXT_HELP)
    top.add_argument("--scheduler-conf", default=None, metavar="FILE",
                     help="without --server: the conf whose plugins compute deserved shares "
                          "(default: Volcano's default conf)")
    top.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                     help="seconds between refreshes (default: 2)")
    top.add_argument("--once", action="store_true", help="print once and exit")
    top.set_defaults(func=_top)
