"""``lahar simulate``: schedule Kubernetes manifests on the embedded cluster and print what
the cluster looks like after (a table, or every object as a ``v1`` ``List``)."""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any

from scheduler.cluster.manifests import ManifestError, load_manifests
from scheduler.cluster.simulation import run_simulation
from scheduler.commands.report import render_table, write_list
from scheduler.conf import ConfError, SchedulerConf, load_conf

__all__ = ["add_simulate_arguments", "load_conf_warning"]


def load_conf_warning(path: str | None) -> SchedulerConf:
    """The conf at ``path`` (the built-in one for None), its warnings printed on stderr."""
    conf = load_conf(path, log_warnings=False)
    for warning in conf.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return conf


def _simulate(args: argparse.Namespace) -> int:
    # Loading makes millions of objects that all stay alive (no reference cycles among
    # them): collecting while they pile up only walks them again and again.
    gc.disable()
    try:
        conf = load_conf_warning(args.conf)
        manifests, warnings = load_manifests(args.files)
    except (ConfError, ManifestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        gc.enable()
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = run_simulation(
        manifests,
        conf=conf,
        scheduler_names=args.scheduler_name or ["volcano"],
        seed=args.seed,
        max_cycles=args.max_cycles,
        freeze_loaded=True,  # one run per process: the loaded cluster lives to the end
        take_manifests=True,  # nothing here reads them again
    )
    del manifests  # the cluster holds the objects (or copies) now
    objects = result.cluster.all_objects()
    if args.output == "table":
        sys.stdout.write(render_table(objects, scheduler_names=result.cluster.scheduler_names))
        state = "settled" if result.settled else "stopped at --max-cycles"
        sys.stdout.write(f"\n{result.cycles} cycle(s), {state}.\n")
    else:
        write_list(objects, sys.stdout, output=args.output)
    return 0


def add_simulate_arguments(sub: Any) -> None:
    sim = sub.add_parser("simulate", help="schedule Kubernetes manifests on the embedded cluster")
    sim.add_argument(
        "files", nargs="+", metavar="FILE", help="YAML/JSON manifests (multi-document or v1 List)"
    )
    sim.add_argument("--conf", help="scheduler conf (Volcano format); built-in default if omitted")
    sim.add_argument(
        "--scheduler-name",
        action="append",
        help="schedulerName of the pods to schedule (repeatable; default volcano)",
    )
    sim.add_argument("--seed", type=int, default=0, help="random seed for tie-breaks (default 0)")
    sim.add_argument("--max-cycles", type=int, default=100, help="stop after this many cycles")
    sim.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table")
    sim.set_defaults(func=_simulate)
