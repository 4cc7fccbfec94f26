"""``lahar inspect gpushare``: who uses which GPU, read from annotations only.

Like ``kubectl inspect gpushare``, but for both families Lahar places: GPU share (node
capacity ``volcano.sh/gpu-memory`` / ``volcano.sh/gpu-number``, pods' ``volcano.sh/gpu-index``
and GPU limits) and vGPU (the node register annotation and pods' device annotations, in the
Volcano and the HAMi spelling). Nothing is asked of the scheduler: the same annotations that
rebuild its ledger after a restart are read here, from manifest files (``lahar simulate -o
yaml`` output, ``kubectl get nodes,pods -o yaml``) or from a live cluster. An annotation that
cannot be read becomes a warning naming the object; it never stops the report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.resource import QuantityError, parse_quantity
from scheduler.cluster.manifests import ManifestError, expand_paths, parse_documents
from scheduler.commands.tables import table_lines
from scheduler.confyaml import UnreadableFile, read_text
from scheduler.devices.codec import (
    CodecError,
    decode_index_list,
    parse_register,
)
from scheduler.devices.names import (
    GPU_INDEX,
    GPU_MEMORY,
    GPU_NUMBER,
    GPU_UNHEALTHY_IDS,
    HAMI,
    VOLCANO,
    VGpuNames,
)
from scheduler.devices.usage import vgpu_record

__all__ = ["CardUsage", "GpuReport", "PodShare", "add_inspect_arguments", "inspect_gpus"]

Obj = Mapping[str, Any]
_TERMINAL = frozenset({"Succeeded", "Failed"})


@dataclass(slots=True)
class PodShare:
    pod: str
    memory: int
    cores: int | None = None


@dataclass(slots=True)
class CardUsage:
    """One physical card: its capacity and the pods sharing it."""

    node: str
    family: str
    """``gpushare``, or the vGPU profile (``volcano`` / ``hami``)."""
    index: int
    memory_total: int
    uuid: str = ""
    type: str = ""
    healthy: bool = True
    split: int | None = None
    cores_used: int | None = None
    pods: list[PodShare] = field(default_factory=list)

    @property
    def memory_used(self) -> int:
        return sum(share.memory for share in self.pods)


@dataclass(slots=True)
class GpuReport:
    cards: list[CardUsage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def memory_used(self) -> int:
        return sum(card.memory_used for card in self.cards)

    @property
    def memory_total(self) -> int:
        return sum(card.memory_total for card in self.cards)


# -- computing usage -----------------------------------------------------------------------
def inspect_gpus(objects: Iterable[Obj]) -> GpuReport:
    """Per-card usage of every GPU share and vGPU node among ``objects`` (Nodes and Pods)."""
    nodes: dict[str, Obj] = {}
    pods: dict[str, list[Obj]] = {}
    for obj in objects:
        if not isinstance(obj, Mapping):
            continue
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Node" and meta.get("name"):
            nodes[str(meta["name"])] = obj
        elif obj.get("kind") == "Pod" and _is_active(obj):
            pods.setdefault(str((obj.get("spec") or {}).get("nodeName")), []).append(obj)
    report = GpuReport()
    for name in sorted(nodes):
        _gpushare(report, nodes[name], name, pods.get(name, []))
        for names in (VOLCANO, HAMI):
            _vgpu(report, nodes[name], name, pods.get(name, []), names)
    return report


def _gpushare(report: GpuReport, node: Obj, name: str, pods: Sequence[Obj]) -> None:
    status = node.get("status") or {}
    values = status.get("allocatable") or status.get("capacity") or {}
    if GPU_NUMBER not in values and GPU_MEMORY not in values:
        return
    number = _quantity(values.get(GPU_NUMBER, 0), report, f"node {name} {GPU_NUMBER}")
    total = _quantity(values.get(GPU_MEMORY, 0), report, f"node {name} {GPU_MEMORY}")
    if not number:
        return
    unhealthy: set[int] = set()
    text = _annotations(node).get(GPU_UNHEALTHY_IDS)
    if text:
        try:
            unhealthy = set(decode_index_list(str(text)))
        except CodecError as exc:
            report.warnings.append(f"node {name}: unreadable {GPU_UNHEALTHY_IDS} ({exc}); "
                                   f"all its cards are shown unhealthy, as the scheduler sees them")
            unhealthy = set(range(number))
    cards = [CardUsage(node=name, family="gpushare", index=i, memory_total=total // number,
                       healthy=i not in unhealthy) for i in range(number)]
    for pod in pods:
        text = _annotations(pod).get(GPU_INDEX)
        if text is None:
            continue
        try:
            indices = decode_index_list(str(text))
        except CodecError as exc:
            report.warnings.append(f"pod {_key(pod)} on node {name}: unreadable {GPU_INDEX} "
                                   f"({exc})")
            continue
        memory = _pod_limit(pod, GPU_MEMORY, report)
        whole = len(indices) > 1 or (not memory and _pod_limit(pod, GPU_NUMBER, report))
        for index in indices:
            if index >= number:
                report.warnings.append(f"pod {_key(pod)} on node {name} holds GPU index {index},"
                                       f" but the node has {number} card(s)")
                continue
            card = cards[index]
            card.pods.append(PodShare(_key(pod), card.memory_total if whole else memory))
    report.cards.extend(cards)


def _vgpu(report: GpuReport, node: Obj, name: str, pods: Sequence[Obj],
          names: VGpuNames) -> None:
    text = _annotations(node).get(names.register)
    if text is None:
        return
    try:
        registered = parse_register(str(text), json_format=names.register_json)
    except CodecError as exc:
        report.warnings.append(f"node {name}: malformed {names.register} ({exc}); "
                               f"its vGPUs are not shown")
        return
    cards: dict[str, CardUsage] = {}
    for info in registered:
        if info.uuid in cards:
            report.warnings.append(f"node {name} registers GPU {info.uuid} more than once; "
                                   f"only the first entry is shown")
            continue
        cards[info.uuid] = CardUsage(node=name, family=names.profile, index=info.index,
                                     memory_total=info.memory, uuid=info.uuid, type=info.type,
                                     healthy=info.healthy, split=info.split, cores_used=0)
    for pod in pods:
        # The scheduler's reading rule (devices/usage.py vgpu_record): entry by entry, a bad
        # entry left out and named, the others counted.
        record = vgpu_record(_annotations(pod), names)
        if record is None:
            continue
        for key, reasons in record.unreadable:
            report.warnings.append(f"pod {_key(pod)} on node {name}: unreadable vGPU "
                                   f"annotation {key} ({'; '.join(reasons)})")
        for skipped in record.held.skipped:
            report.warnings.append(f"pod {_key(pod)} on node {name}: unreadable vGPU "
                                   f"annotation {record.key} entry left out ({skipped})")
        for device in record.held.devices:
            card = cards.get(device.uuid)
            if card is None:
                report.warnings.append(f"pod {_key(pod)} on node {name} holds GPU {device.uuid},"
                                       f" which the node does not register")
                continue
            card.cores_used = (card.cores_used or 0) + device.cores
            card.pods.append(PodShare(_key(pod), device.memory, device.cores))
    report.cards.extend(sorted(cards.values(), key=lambda c: c.index))


def _pod_limit(pod: Obj, resource: str, report: GpuReport) -> int:
    """Max(sum over app containers, largest init container) of a GPU limit (else request)."""
    spec = pod.get("spec") or {}

    def limit(container: Obj) -> int:
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            values = resources.get(section) or {}
            if resource in values:
                return _quantity(values[resource], report, f"pod {_key(pod)} limit {resource}")
        return 0

    app = sum(limit(c) for c in spec.get("containers") or [] if isinstance(c, Mapping))
    init = max((limit(c) for c in spec.get("initContainers") or [] if isinstance(c, Mapping)),
               default=0)
    return max(app, init)


def _quantity(value: Any, report: GpuReport, what: str) -> int:
    try:
        number = parse_quantity(value)
    except QuantityError:
        number = None
    if number is None or number < 0 or number != int(number):
        report.warnings.append(f"{what}: {value!r} is not a whole non-negative number")
        return 0
    return int(number)


def _is_active(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (
        (pod.get("status") or {}).get("phase") not in _TERMINAL)


def _annotations(obj: Obj) -> Mapping[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def _key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


# -- rendering -------------------------------------------------------------------------------
def _percent(used: int, total: int) -> str:
    return f"{used * 100 // total}%" if total else "-"


def render_table(report: GpuReport) -> str:
    if not report.cards:
        return "No GPU share or vGPU nodes found.\n"
    rows = [["NODE", "FAMILY", "GPU", "UUID", "MEMORY(used/total)", "SHARES", "CORES", "PODS"]]
    for card in report.cards:
        shares = f"{len(card.pods)}/{card.split}" if card.split is not None else str(
            len(card.pods))
        pods = ", ".join(f"{share.pod}({share.memory})" for share in card.pods) or "-"
        used, total = card.memory_used, card.memory_total
        rows.append([
            card.node, card.family, str(card.index) + ("" if card.healthy else " (unhealthy)"),
            card.uuid or "-",
            f"{used}/{total} ({_percent(used, total)})",
            shares, "-" if card.cores_used is None else f"{card.cores_used}%", pods,
        ])
    lines = table_lines(rows, gap="  ")
    used, total = report.memory_used, report.memory_total
    lines.append("")
    lines.append(f"Allocated/Total GPU memory in the cluster: {used}/{total} "
                 f"({_percent(used, total)})")
    return "\n".join(lines) + "\n"


def report_json(report: GpuReport) -> dict[str, Any]:
    """A stable structure: nodes by name, cards by family then index, pods in order."""
    nodes: dict[str, list[dict[str, Any]]] = {}
    for card in report.cards:
        nodes.setdefault(card.node, []).append({
            "family": card.family, "index": card.index, "uuid": card.uuid or None,
            "type": card.type or None, "healthy": card.healthy,
            "memoryUsed": card.memory_used, "memoryTotal": card.memory_total,
            "shares": len(card.pods), "splitCount": card.split, "coresUsed": card.cores_used,
            "pods": [{"pod": share.pod, "memory": share.memory, "cores": share.cores}
                     for share in card.pods],
        })
    return {
        "nodes": [{"name": name, "cards": cards} for name, cards in nodes.items()],
        "total": {"memoryUsed": report.memory_used, "memoryTotal": report.memory_total},
        "warnings": list(report.warnings),
    }


# -- command line --------------------------------------------------------------------------
def add_inspect_arguments(sub: Any) -> None:
    """Register ``inspect gpushare`` on the ``lahar`` sub-command parsers."""
    inspect = sub.add_parser("inspect", help="show cluster state read from annotations")
    inspect_sub = inspect.add_subparsers(dest="inspect_command", required=True)
    gpus = inspect_sub.add_parser(
        "gpushare", help="GPU memory used/total per node and card, and the pods on each card")
    gpus.add_argument("files", nargs="*", metavar="FILE",
                      help="YAML/JSON manifests or v1 Lists (e.g. lahar simulate -o yaml)")
    add_cluster_arguments(gpus, "Nodes and Pods")
    gpus.add_argument("-o", "--output", choices=("table", "json"), default="table",
                      help="a table per node and card, or the report as JSON (default: table)")
    gpus.set_defaults(func=_inspect_gpushare)


KUBECONFIG_HELP = ("kubeconfig file (default: in-cluster service account, else $KUBECONFIG's "
                   "first file, else ~/.kube/config)")
CONTEXT_HELP = "the kubeconfig context to use (default: its current-context)"


def add_cluster_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--kubeconfig`` and ``--context``, read as by ``lahar run`` and ``lahar node-agent``:
    without FILEs the report reads ``what`` from the cluster they name."""
    parser.add_argument("--kubeconfig", default=None, metavar="PATH",
                        help=f"without FILEs, {what} are read from the cluster; "
                             f"{KUBECONFIG_HELP}")
    parser.add_argument("--context", default=None, help=CONTEXT_HELP)


def _inspect_gpushare(args: argparse.Namespace) -> int:
    return run_inspect(args, collections=(("/api/v1/nodes", "Node"), ("/api/v1/pods", "Pod")),
                       build=inspect_gpus, to_json=report_json, to_table=render_table)


def run_inspect(args: argparse.Namespace, *, collections: Sequence[tuple[str, str]],
                build: Callable[[list[Obj]], Any], to_json: Callable[[Any], Any],
                to_table: Callable[[Any], str]) -> int:
    """One ``lahar inspect`` report: objects from ``args.files`` or from the cluster's
    ``collections`` (API path, kind), ``build`` makes the report (with ``warnings``), printed
    as a table or as JSON."""
    context = getattr(args, "context", None)
    if args.files and (args.kubeconfig or context):
        print("error: give manifest FILEs or read the cluster (--kubeconfig, --context), not "
              "both", file=sys.stderr)
        return 2
    if args.files:
        try:
            objects = _from_files(args.files)
        except ManifestError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    else:
        from scheduler.cluster.kube.kubeconfig import ConfigError, load_client_config

        try:  # no FILEs and no cluster either: a usage error, as before anything is read
            load_client_config(kubeconfig=args.kubeconfig, context=context)
        except ConfigError as exc:
            print(f"error: give manifest FILEs or --kubeconfig ({exc})", file=sys.stderr)
            return 2
        try:
            objects = _from_cluster(args.kubeconfig, context, collections)
        except Exception as exc:  # cluster unreachable, bad kubeconfig, forbidden
            print(f"error: cannot read the cluster: {exc}", file=sys.stderr)
            return 1
    report = build(objects)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.output == "json":
        sys.stdout.write(json.dumps(to_json(report), indent=2) + "\n")
    else:
        sys.stdout.write(to_table(report))
    return 0


def _from_files(paths: Sequence[str]) -> list[Obj]:
    """Every object of the files; a file without any is a warning, as in ``lahar simulate``
    (no objects at all is a report of nothing, not an error: a cluster may have no GPUs)."""
    objects: list[Obj] = []
    for path in expand_paths(paths):
        try:
            text = read_text(path)
        except UnreadableFile as exc:
            raise ManifestError(str(exc)) from None
        documents = parse_documents(text, source=str(path))
        for manifest in documents:
            if not manifest.kind:  # e.g. JSON of something else: a report of it would be empty
                raise ManifestError(f"{manifest.source}: not a Kubernetes object or List "
                                    "(it has no kind)")
        if not documents:
            print(f"warning: {path}: no objects in the file", file=sys.stderr)
        objects.extend(m.obj for m in documents)
    return objects


def _from_cluster(kubeconfig: str | None, context: str | None,
                  collections: Sequence[tuple[str, str]]) -> list[Obj]:
    from scheduler.cluster.kube.client import KubeClient

    client = KubeClient.from_flags(kubeconfig=kubeconfig, context=context, qps=50.0, burst=100)
    try:
        return [obj for path, kind in collections for obj in _list(client, path, kind)]
    finally:
        client.close()


def _list(client: Any, path: str, kind: str) -> list[Obj]:
    """Every item of a collection, page by page (items of a List answer carry no kind)."""
    items: list[Obj] = []
    token = ""
    while True:
        query: dict[str, str | int] = {"limit": 500}
        if token:
            query["continue"] = token
        page = client.request_json("GET", path, query=query)
        items.extend({**item, "kind": kind} for item in page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items
