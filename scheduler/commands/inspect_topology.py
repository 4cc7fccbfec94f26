"""``lahar inspect topology``: the HyperNode tree, what each domain holds and which jobs run in it.

Reads HyperNodes, Nodes, Pods and PodGroups from manifest files (a cluster file, ``lahar
simulate -o json`` output, ``kubectl get hypernodes,nodes,pods,podgroups -o yaml``) or from a
live cluster, builds the tree as the scheduler does (:func:`scheduler.api.hypernode.build_tree`)
and draws it like ``tree``: every HyperNode with its tier, its ``status.nodeCount`` as
Volcano's HyperNode controller counts it (the names its members select), used/allocatable per
resource and the jobs whose bound pods it is the smallest domain holding, then a few of its
nodes (``--nodes`` / ``--all-nodes`` show more). A job's network-topology constraint is shown
with it, and marked when its pods sit higher in the tree than a hard constraint allows.
Nothing is asked of the scheduler; an object that cannot be read becomes a warning.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.errors import ObjectError
from scheduler.api.hypernode import (
    HyperNode,
    HyperNodeTree,
    build_tree,
    hypernode_from_object,
    status_node_count,
)
from scheduler.api.pod import pod_requests
from scheduler.api.resource import (
    CPU,
    MEMORY,
    QuantityError,
    Resource,
    format_quantity,
    resource_from_list,
)
from scheduler.api.task import group_of
from scheduler.commands.inspect import add_cluster_arguments, run_inspect
from scheduler.commands.tables import table_lines

__all__ = ["JobPlacement", "TopologyReport", "add_inspect_topology", "inspect_topology",
           "render_topology", "topology_json"]

Obj = Mapping[str, Any]
HYPERNODES_PATH = "/apis/topology.volcano.sh/v1alpha1/hypernodes"
PODGROUPS_PATH = "/apis/scheduling.volcano.sh/v1beta1/podgroups"
_NOT_SHOWN = ("pods", "ephemeral-storage", "hugepages-", "attachable-volumes-")
CLUSTER = ""
"""Where a job is listed whose pods no single HyperNode holds."""


@dataclass(slots=True)
class Usage:
    allocatable: Resource = field(default_factory=Resource)
    used: Resource = field(default_factory=Resource)
    pods: int = 0

    def add(self, other: Usage) -> None:
        self.allocatable.add(other.allocatable)
        self.used.add(other.used)
        self.pods += other.pods


@dataclass(slots=True)
class JobPlacement:
    name: str
    """``namespace/podgroup``."""
    bound: int = 0
    pending: int = 0
    constraint: str = ""
    """``hard, tier <= 1`` / ``soft, tier <= leaf``; empty without networkTopology."""
    hard_tier: int | None = None
    over: bool = False
    """Its bound pods span a domain above the tier a hard constraint allows."""

    def label(self) -> str:
        parts = [f"{self.bound} pod" + ("s" if self.bound != 1 else "")] if self.bound else []
        if self.pending:
            parts.append(f"{self.pending} pending")
        if self.constraint:
            parts.append(self.constraint + (" EXCEEDED" if self.over else ""))
        return f"{self.name} ({', '.join(parts)})"


@dataclass(slots=True)
class TopologyReport:
    tree: HyperNodeTree
    nodes: dict[str, Usage] = field(default_factory=dict)
    hypernodes: dict[str, Usage] = field(default_factory=dict)
    jobs_at: dict[str, list[JobPlacement]] = field(default_factory=dict)
    pending: list[JobPlacement] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    """Nodes in no HyperNode."""
    node_counts: dict[str, int] = field(default_factory=dict)
    """HyperNode → ``status.nodeCount`` (Volcano's controller: names its members select)."""
    resources: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def own_nodes(self, name: str) -> list[str]:
        """Nodes that are members of ``name`` itself, not of one of its children."""
        info = self.tree.info[name]
        below = set().union(*(self.tree.nodes_of(c) for c in info.children))
        return sorted(info.nodes - below)


# -- building the report ----------------------------------------------------------------------

def inspect_topology(objects: Iterable[Obj]) -> TopologyReport:
    warnings: list[str] = []
    hypernodes: list[HyperNode] = []
    node_objs: dict[str, Obj] = {}
    pods: list[Obj] = []
    groups: dict[str, Obj] = {}
    for obj in objects:
        kind, meta = obj.get("kind"), obj.get("metadata") or {}
        if kind == "HyperNode":
            try:
                hypernodes.append(hypernode_from_object(obj))
            except ObjectError as exc:
                warnings.append(f"{exc}; the HyperNode is left out")
        elif kind == "Node" and meta.get("name"):
            node_objs[str(meta["name"])] = obj
        elif kind == "Pod":
            pods.append(obj)
        elif kind == "PodGroup":
            groups[f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"] = obj
    labels = {name: dict((obj.get("metadata") or {}).get("labels") or {})
              for name, obj in node_objs.items()}
    tree = build_tree(hypernodes, labels)
    report = TopologyReport(tree=tree, warnings=warnings + list(tree.warnings))
    report.node_counts = {hn.name: status_node_count(hn, labels) for hn in hypernodes}
    for name, obj in sorted(node_objs.items()):
        report.nodes[name] = Usage(allocatable=_allocatable(obj, report.warnings))
    jobs = _charge_pods(report, pods, groups)
    for name, info in tree.info.items():
        usage = Usage()
        for node in info.nodes:
            if node in report.nodes:
                usage.add(report.nodes[node])
        report.hypernodes[name] = usage
    report.outside = sorted(set(report.nodes) - {n for i in tree.info.values() for n in i.nodes})
    report.resources = _shown_resources(report.nodes.values())
    _place_jobs(report, jobs)
    return report


def _allocatable(node: Obj, warnings: list[str]) -> Resource:
    status = node.get("status") or {}
    try:
        return resource_from_list(status.get("allocatable") or status.get("capacity"))
    except QuantityError as exc:
        name = (node.get("metadata") or {}).get("name")
        warnings.append(f"Node {name}: status.allocatable: {exc}; counted as empty")
        return Resource()


def _group_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    group = group_of(meta)
    return f"{meta.get('namespace') or 'default'}/{group}" if group else ""


def _charge_pods(report: TopologyReport, pods: list[Obj],
                 groups: Mapping[str, Obj]) -> dict[str, tuple[JobPlacement, set[str]]]:
    """Add each active bound pod's requests to its node; gather jobs and their nodes."""
    jobs: dict[str, tuple[JobPlacement, set[str]]] = {
        key: (_job(key, group, report.tree), set()) for key, group in groups.items()}
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        key = _group_key(pod)
        if key and key not in jobs:
            jobs[key] = (JobPlacement(name=key), set())
        if not node:
            if key:
                jobs[key][0].pending += 1
            continue
        usage = report.nodes.get(node)
        if usage is not None:
            try:
                requests, _ = pod_requests(pod)
            except (ObjectError, QuantityError) as exc:
                report.warnings.append(f"{exc}; its requests are not counted")
            else:
                usage.used.add(requests)
                usage.pods += 1
        if key:
            jobs[key][0].bound += 1
            jobs[key][1].add(node)
    return jobs


def _job(key: str, group: Obj, tree: HyperNodeTree) -> JobPlacement:
    job = JobPlacement(name=key)
    topology = (group.get("spec") or {}).get("networkTopology")
    if not isinstance(topology, Mapping):
        return job
    mode = str(topology.get("mode") or "hard")
    tier = topology.get("highestTierAllowed")
    tier_name = topology.get("highestTierName")
    if isinstance(tier_name, str) and tier_name:
        job.constraint = f"{mode}, tier <= {tier_name}"
        tier = tree.tier_names.get(tier_name)
    elif isinstance(tier, int) and not isinstance(tier, bool):
        job.constraint = f"{mode}, tier <= {tier}"
    else:
        job.constraint = mode
        tier = None
    job.hard_tier = tier if mode == "hard" and isinstance(tier, int) else None
    return job


def _place_jobs(report: TopologyReport,
                jobs: Mapping[str, tuple[JobPlacement, set[str]]]) -> None:
    """A job goes where the scheduler sees it (Volcano's ``recoverAllocatedHyperNode``): of the
    HyperNodes holding every node its pods are bound to, the one of the lowest tier (by name
    among equals); the cluster when none holds them all."""
    tree = report.tree
    for key in sorted(jobs):
        job, nodes = jobs[key]
        if not nodes:
            if job.pending:
                report.pending.append(job)
            continue
        common: set[str] | None = None
        for node in nodes:
            holding = set(tree.containing(node))
            common = holding if common is None else common & holding
        place = min(common, key=lambda n: (tree.tier_of(n), n)) if common else CLUSTER
        if job.hard_tier is not None:
            job.over = place == CLUSTER or tree.tier_of(place) > job.hard_tier
        report.jobs_at.setdefault(place, []).append(job)


def _shown_resources(usages: Iterable[Usage]) -> list[str]:
    scalars: set[str] = set()
    for usage in usages:
        scalars.update(name for name, value in usage.allocatable.scalars.items()
                       if value > 0 and not name.startswith(_NOT_SHOWN))
    return [CPU, MEMORY, *sorted(scalars)]


# -- the picture ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TreeOptions:
    nodes: int = 3
    """Node lines shown under a HyperNode before the rest are summed up (-1: all)."""
    jobs: int = 3
    """Jobs named on a line before the rest are counted."""
    root: str = ""
    """Draw only this HyperNode's subtree."""


def _amounts(report: TopologyReport, usage: Usage) -> list[str]:
    return [f"{format_quantity(name, usage.used.get(name))}/"
            f"{format_quantity(name, usage.allocatable.get(name))}"
            for name in report.resources]


def _jobs_cell(jobs: list[JobPlacement], limit: int) -> str:
    if not jobs:
        return ""
    shown = [job.label() for job in jobs[:limit]]
    if len(jobs) > limit:
        shown.append(f"+{len(jobs) - limit} more")
    return "; ".join(shown)


def render_topology(report: TopologyReport, options: TreeOptions = TreeOptions()) -> str:
    tree = report.tree
    if not tree and not report.nodes:
        return "No HyperNodes and no Nodes found.\n"
    header = ["HYPERNODE / NODE", "TIER", "NODECOUNT",
              *[f"{name.upper() if '/' not in name else name}(used/alloc)"
                for name in report.resources], "JOBS"]
    rows: list[Row] = [header]
    total = Usage()
    for usage in report.nodes.values():
        total.add(usage)
    if options.root:
        if options.root not in tree.info:
            return f"No HyperNode named {options.root}.\n"
        roots = [options.root]
    else:
        roots = tree.roots()
        rows.append(["cluster", "", str(len(report.nodes)), *_amounts(report, total),
                     _jobs_cell(report.jobs_at.get(CLUSTER, []), options.jobs)])
    for index, name in enumerate(roots):
        last = index == len(roots) - 1 and not (report.outside and not options.root)
        _hypernode_rows(report, options, rows, name, prefix="", branch=not options.root,
                        last=last)
    if report.outside and not options.root:
        rows.append(["└── (in no HyperNode)", "", str(len(report.outside)),
                     *["" for _ in report.resources], ""])
        _node_rows(report, options, rows, report.outside, prefix="    ")
    lines = _aligned(rows)
    if not tree.ready:
        lines.append("")
        lines.append("The tree is not usable (see the warnings): jobs with a network-topology "
                     "constraint wait until it is fixed.")
    if report.pending and not options.root:
        lines.append("")
        lines.append("Pending (no pod bound): " + _jobs_cell(report.pending, len(report.pending)))
    return "\n".join(lines) + "\n"


Row = list[str] | str
"""A table row, or a line of its own that takes no part in the column widths."""


def _aligned(rows: list[Row]) -> list[str]:
    table = table_lines([row for row in rows if not isinstance(row, str)], gap="  ")
    cells = iter(table)
    return [row if isinstance(row, str) else next(cells) for row in rows]


def _hypernode_rows(report: TopologyReport, options: TreeOptions, rows: list[Row],
                    name: str, *, prefix: str, branch: bool, last: bool) -> None:
    info = report.tree.info[name]
    connector = ("└── " if last else "├── ") if branch else ""
    tier = f"{info.tier}" + (f" {info.tier_name}" if info.tier_name else "")
    rows.append([prefix + connector + name, tier, str(report.node_counts.get(name, 0)),
                 *_amounts(report, report.hypernodes[name]),
                 _jobs_cell(report.jobs_at.get(name, []), options.jobs)])
    inner = prefix + (("    " if last else "│   ") if branch else "")
    own = report.own_nodes(name) if options.nodes else []
    children = info.children
    for index, child in enumerate(children):
        _hypernode_rows(report, options, rows, child, prefix=inner, branch=True,
                        last=index == len(children) - 1 and not own)
    _node_rows(report, options, rows, own, prefix=inner)


def _node_rows(report: TopologyReport, options: TreeOptions, rows: list[Row],
               nodes: list[str], *, prefix: str) -> None:
    if options.nodes == 0 or not nodes:
        return
    shown = nodes if options.nodes < 0 else nodes[:options.nodes]
    hidden = len(nodes) - len(shown)
    for index, node in enumerate(shown):
        connector = "└── " if index == len(shown) - 1 and not hidden else "├── "
        usage = report.nodes.get(node)
        amounts = _amounts(report, usage) if usage else ["" for _ in report.resources]
        pods = f"{usage.pods} pod" + ("s" if usage.pods != 1 else "") if usage else "not found"
        rows.append([prefix + connector + node, "", "", *amounts, pods])
    if hidden:
        rows.append(prefix + f"└── … {hidden} more node" + ("s" if hidden != 1 else "")
                    + " (--nodes N, --all-nodes)")


# -- JSON -----------------------------------------------------------------------------------

def _quantities(report: TopologyReport, resource: Resource) -> dict[str, str]:
    return {name: format_quantity(name, resource.get(name)) for name in report.resources}


def _usage_json(report: TopologyReport, usage: Usage) -> dict[str, Any]:
    return {"allocatable": _quantities(report, usage.allocatable),
            "used": _quantities(report, usage.used), "pods": usage.pods}


def _job_json(job: JobPlacement) -> dict[str, Any]:
    return {"name": job.name, "boundPods": job.bound, "pendingPods": job.pending,
            "constraint": job.constraint or None, "exceedsConstraint": job.over}


def _hypernode_json(report: TopologyReport, name: str) -> dict[str, Any]:
    info = report.tree.info[name]
    return {"name": name, "tier": info.tier, "tierName": info.tier_name or None,
            "nodeCount": report.node_counts.get(name, 0), "nodesUnder": len(info.nodes),
            **_usage_json(report, report.hypernodes[name]),
            "jobs": [_job_json(job) for job in report.jobs_at.get(name, [])],
            "nodes": report.own_nodes(name),
            "children": [_hypernode_json(report, child) for child in info.children]}


def topology_json(report: TopologyReport) -> dict[str, Any]:
    return {
        "ready": report.tree.ready,
        "resources": report.resources,
        "hypernodes": [_hypernode_json(report, root) for root in report.tree.roots()],
        "clusterJobs": [_job_json(job) for job in report.jobs_at.get(CLUSTER, [])],
        "pendingJobs": [_job_json(job) for job in report.pending],
        "nodes": {name: _usage_json(report, usage) for name, usage in report.nodes.items()},
        "nodesInNoHyperNode": report.outside,
        "warnings": list(report.warnings),
    }


# -- command line ---------------------------------------------------------------------------

def add_inspect_topology(sub: Any) -> None:
    """Register ``inspect topology`` beside the other ``lahar inspect`` reports."""
    inspect = sub.choices.get("inspect")
    if inspect is None:
        inspect = sub.add_parser("inspect", help="show cluster state read from annotations")
        inspect.add_subparsers(dest="inspect_command", required=True)
    inspect_sub = next(action for action in inspect._actions
                       if isinstance(action, argparse._SubParsersAction))
    parser = inspect_sub.add_parser(
        "topology", help="the HyperNode tree: used/allocatable per network domain and the "
                         "jobs placed in each")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="YAML/JSON manifests or v1 Lists (e.g. lahar simulate -o json)")
    add_cluster_arguments(parser, "HyperNodes, Nodes, Pods and PodGroups")
    parser.add_argument("-o", "--output", choices=("tree", "json"), default="tree",
                        help="a tree picture, or the whole tree as JSON (default: tree)")
    parser.add_argument("--nodes", type=_count, default=3, metavar="N",
                        help="node lines shown under each HyperNode before the rest are "
                             "counted (default 3; 0 hides them)")
    parser.add_argument("--all-nodes", action="store_true", help="list every node")
    parser.add_argument("--jobs", type=_count, default=3, metavar="N",
                        help="jobs named on each line before the rest are counted (default 3)")
    parser.add_argument("--hypernode", default="", metavar="NAME",
                        help="draw only this HyperNode and what is under it")
    parser.set_defaults(func=_inspect_topology)


def _inspect_topology(args: argparse.Namespace) -> int:
    options = TreeOptions(nodes=-1 if args.all_nodes else max(args.nodes, 0),
                          jobs=max(args.jobs, 1), root=args.hypernode)
    return run_inspect(args, collections=((HYPERNODES_PATH, "HyperNode"),
                                          ("/api/v1/nodes", "Node"), ("/api/v1/pods", "Pod"),
                                          (PODGROUPS_PATH, "PodGroup")),
                       build=inspect_topology, to_json=topology_json,
                       to_table=lambda report: render_topology(report, options))


def _count(text: str) -> int:
    """An argparse type: a whole number of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value
