"""``lahar simulate``: schedule Kubernetes manifests on the embedded cluster and print what
the cluster looks like after (a table, or every object as a ``v1`` ``List``).

The scheduler itself is imported when the command runs, not when the parser is built, so
``lahar --help`` and ``--version`` stay quick.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scheduler.cluster.kube.flags import add_sharding_arguments, feature_gates, positive_int
from scheduler.commands.progress import Ticker

if TYPE_CHECKING:
    from scheduler.cluster.manifests import Manifest
    from scheduler.cluster.simulation import SimulationResult
    from scheduler.conf import SchedulerConf

__all__ = ["add_simulate_arguments", "discover_hypernodes", "load_conf_warning"]

INTERRUPTED = 130
"""Exit status after Ctrl-C, as a shell reports a command ended by SIGINT (128 + 2)."""


def load_conf_warning(path: str | None) -> SchedulerConf:
    """The conf at ``path`` (the built-in one for None), its warnings printed on stderr."""
    from scheduler.conf import load_conf

    conf = load_conf(path, log_warnings=False)
    for warning in conf.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return conf


def totals_line(objects: list[Any], result: SimulationResult, seconds: float) -> str:
    """``3 nodes; 7 pods: 5 bound, 2 pending, 1 evicted; 2 cycle(s), settled; 0.1 s.``"""
    nodes = bound = pending = evicted = 0
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node":
            nodes += 1
        elif kind == "Pod":
            if (obj.get("spec") or {}).get("nodeName"):
                bound += 1
            else:
                pending += 1
        elif (kind == "Event" and obj.get("reason") == "Evict"
              and (obj.get("involvedObject") or {}).get("kind") == "Pod"):
            evicted += 1
    state = "settled" if result.settled else "stopped at --max-cycles"
    return (f"{nodes} node(s); {bound + pending} pod(s): {bound} bound, {pending} pending, "
            f"{evicted} evicted; {result.cycles} cycle(s), {state}; {seconds:.1f} s.")


def discover_hypernodes(manifests: list[Manifest], path: str, *,
                        warnings: list[str]) -> list[Manifest]:
    """``manifests`` with the HyperNodes label discovery would keep: those the config at
    ``path`` derives from the Nodes' labels added (or brought up to date), discovered ones no
    longer derived removed, every other HyperNode left as given. Raises ``ValueError`` (a
    :class:`~scheduler.cluster.discovery.DiscoveryConfigError`) naming the file and field."""
    from scheduler.cluster.discovery import (
        apply_plan,
        config_text,
        desired_hypernodes,
        parse_discovery_config,
        plan_reconcile,
    )
    from scheduler.cluster.manifests import Manifest

    with open(path) as handle:
        text = handle.read()
    config = parse_discovery_config(config_text(text, source=path), source=path)
    warnings.extend(config.warnings)
    if not config.enabled:
        warnings.append(f"{path}: enables no label discovery; HyperNodes are as given")
        return manifests
    existing: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    for manifest in manifests:
        if manifest.kind == "HyperNode":
            name = str((manifest.obj.get("metadata") or {}).get("name", ""))
            existing[name], sources[name] = manifest.obj, manifest.source
    nodes = [m.obj for m in manifests if m.kind == "Node"]
    plan = plan_reconcile(desired_hypernodes(nodes, config, existing=existing), existing)
    warnings.extend(f"{path}: {conflict}" for conflict in plan.conflicts)
    after = apply_plan(existing, plan)
    written = {str(obj["metadata"]["name"]) for obj in (*plan.create, *plan.update)}
    kept = [m for m in manifests if m.kind != "HyperNode"]
    for name in sorted(after):
        if name in written:
            kept.append(Manifest(source=f"{path} (discovered)", obj=after[name]))
        else:
            kept.append(Manifest(source=sources[name], obj=existing[name]))
    return kept


def _simulate(args: argparse.Namespace) -> int:
    args.files = [*args.files, *args.filenames]
    if not args.files:
        print("error: give at least one FILE (a manifest, a directory of them, or - for "
              "standard input)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    progress = Ticker(sys.stderr, prefix="lahar simulate")
    state: dict[str, Any] = {"cycles": 0, "writing": False}
    try:
        with progress:
            return _run(args, progress, state, started)
    except KeyboardInterrupt:
        done = f"after {state['cycles']} cycle(s)"
        what = ("the output above is incomplete" if state["writing"]
                else "nothing was written")
        print(f"\nlahar simulate: interrupted (Ctrl-C) {done}; {what}.", file=sys.stderr)
        return INTERRUPTED
    finally:
        from scheduler.commands.warnlines import restore_logging

        restore_logging()


def _run(args: argparse.Namespace, progress: Ticker, state: dict[str, Any],
         started: float) -> int:
    from scheduler.cluster.manifests import ManifestError, load_manifests
    from scheduler.cluster.simulation import run_simulation
    from scheduler.commands.report import render_table, write_list
    from scheduler.conf import ConfError
    from scheduler.deviceconf import with_dra

    # Loading makes millions of objects that all stay alive (no reference cycles among
    # them): collecting while they pile up only walks them again and again.
    gc.disable()
    progress.phase = f"loading {len(args.files)} file(s)"
    try:
        conf = with_dra(load_conf_warning(args.conf), args.feature_gates)
        manifests, warnings = load_manifests(args.files)
    except (ConfError, ManifestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        gc.enable()
    if args.hypernode_discovery:
        try:
            manifests = discover_hypernodes(manifests, args.hypernode_discovery,
                                            warnings=warnings)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    from scheduler.cluster.manifests import object_key
    from scheduler.commands.warnlines import configure_warning_lines, object_sources

    configure_warning_lines(object_sources(manifests, key=object_key))

    def on_cycle(result: SimulationResult) -> None:
        state["cycles"] = result.cycles
        state["now"] = result.cluster.clock()
        progress.phase = f"cycle {result.cycles + 1}"

    publisher = None
    if args.html:
        from scheduler.web.publish import Publisher

        publisher = Publisher(clock=lambda: float(state["now"]), always=True)
    progress.phase = "building the cluster"
    result = run_simulation(
        manifests,
        conf=conf,
        scheduler_names=args.scheduler_name or ["volcano"],
        seed=args.seed,
        max_cycles=args.max_cycles,
        freeze_loaded=True,  # one run per process: the loaded cluster lives to the end
        take_manifests=True,  # nothing here reads them again
        on_cycle=on_cycle,
        on_close=publisher,
        setup=sharding_setup(args.scheduler_sharding_mode, args.scheduler_sharding_name),
    )
    state["cycles"] = result.cycles
    del manifests  # the cluster holds the objects (or copies) now
    progress.phase = "writing the output"
    objects = result.cluster.all_objects()
    if publisher is not None:
        from scheduler.web.htmlfile import render_file

        with open(args.html, "w", encoding="utf-8") as out:
            out.write(render_file(publisher, events=[o for o in objects
                                                     if o.get("kind") == "Event"]))
    if args.output == "table":
        text = render_table(objects, scheduler_names=result.cluster.scheduler_names)
        progress.close()
        state["writing"] = True
        sys.stdout.write(text)
        sys.stdout.write("\n" + totals_line(objects, result, time.perf_counter() - started)
                         + "\n")
    else:
        progress.close()
        state["writing"] = True
        write_list(objects, sys.stdout, output=args.output)
    return 0


def sharding_setup(mode: str, name: str) -> Callable[[Any, Any], None] | None:
    """Switch the simulated scheduler's cache to node sharding (NodeShards from the files)."""
    if mode == "none":
        return None

    def setup(cluster: Any, cache: Any) -> None:
        from scheduler.cache.shards import NodeShardStore

        cache.shards = NodeShardStore(mode=mode, name=name)

    return setup


def add_simulate_arguments(sub: Any) -> None:
    sim = sub.add_parser(
        "simulate", help="schedule Kubernetes manifests on the embedded cluster",
        description="Load Nodes, Pods, PodGroups, Queues, PriorityClasses, Namespaces and "
        "HyperNodes from manifests, schedule until a cycle changes nothing, and print the "
        "cluster after. Exit status: 0 done, 2 bad input, 130 interrupted.")
    sim.add_argument(
        "files", nargs="*", metavar="FILE",
        help="YAML or JSON manifests (multi-document or a v1 List), a directory of them (its "
             ".yaml, .yml and .json files, as kubectl -f DIR reads it), or - for standard input",
    )
    sim.add_argument("-f", "--filename", dest="filenames", action="append", default=[],
                     metavar="FILE", help="a FILE as kubectl takes it (repeatable)")
    sim.add_argument("--conf", metavar="CONF",
                     help="scheduler conf (Volcano format); the built-in default if omitted")
    sim.add_argument(
        "--scheduler-name", action="append", metavar="NAME",
        help="schedulerName of the pods to schedule (repeatable; default: volcano)",
    )
    sim.add_argument("--seed", type=int, default=0, metavar="N",
                     help="random seed for tie-breaks: the same input and seed give the same "
                     "output (default: 0)")
    sim.add_argument("--max-cycles", type=positive_int, default=100, metavar="N",
                     help="stop after this many cycles even if the cluster has not settled "
                     "(at least 1; default: 100; 1 shows one session's decisions)")
    sim.add_argument("--feature-gates", type=feature_gates, default="",
                     metavar="NAME=true|false,...",
                     help="kube-scheduler's Dynamic Resource Allocation feature gates, as its "
                     "--feature-gates (added to the conf's predicate.DRAFeatureGates)")
    sim.add_argument("--hypernode-discovery", metavar="FILE",
                     help="derive HyperNodes from the Nodes' labels as Volcano's label "
                     "discovery does; FILE holds the volcano-controller.conf text, or a "
                     "ConfigMap carrying it under that key (HyperNodes in the manifests that "
                     "discovery did not make are kept as given)")
    add_sharding_arguments(sim)
    sim.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table",
                     help="table: nodes, pending pods with their reason, evictions and "
                     "PodGroups, then a totals line; yaml/json: every object after scheduling "
                     "and the events, as a v1 List (default: table)")
    sim.add_argument("--html", metavar="FILE",
                     help="also write the web view of the cluster after scheduling to FILE: "
                     "one self-contained HTML page (see docs/web.md)")
    sim.set_defaults(func=_simulate)
