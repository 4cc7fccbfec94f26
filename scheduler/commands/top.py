"""``lahar top --server URL``: the web view's overview and queue table in a terminal.

For people on a jump host: it reads the scheduler's ``/api/overview`` and ``/api/queues``
(``lahar run --web-address``) and prints them, refreshing every ``--interval`` seconds until
Ctrl-C (``--once`` prints once). Only the JSON API is used, so what it shows is what the pages
show.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
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


def _top(args: argparse.Namespace, out: IO[str] = sys.stdout) -> int:
    base = args.server.rstrip("/")
    try:
        while True:
            try:
                text = render_top(_get(f"{base}/api/overview"),
                                  _get(f"{base}/api/queues")["items"])
            except urllib.error.HTTPError as err:
                text = f"{base}: {err.code} {json.loads(err.read() or b'{}').get('error', '')}\n"
            except (urllib.error.URLError, OSError, ValueError) as err:
                print(f"error: cannot read {base}/api/: {err}", file=sys.stderr)
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
    top = sub.add_parser(
        "top", help="show a running scheduler's overview and queues in the terminal",
        description="Read the web view's JSON API of a scheduler started with --web-address "
        "and print the overview and the queue table, refreshing.")
    top.add_argument("--server", required=True, metavar="URL",
                     help="the scheduler's web address, e.g. http://127.0.0.1:8081")
    top.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                     help="seconds between refreshes (default: 2)")
    top.add_argument("--once", action="store_true", help="print once and exit")
    top.set_defaults(func=_top)
