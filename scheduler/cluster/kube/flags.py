"""``lahar run`` flags, spelled and defaulted like ``vc-scheduler``'s so manifests carry over.

Booleans accept Go's forms (``--leader-elect``, ``--leader-elect=false``); durations accept Go
strings (``500ms``, ``1s``, ``1m30s``); ``-v`` accepts ``-v 4``, ``-v=4`` and ``--v=4``. After
parsing, :func:`normalize` resolves repeatable and deprecated flags in place.
"""

from __future__ import annotations

import argparse
import re

from scheduler.cluster.kube.volcano_flags import add_volcano_only_flags

__all__ = [
    "add_run_arguments", "normalize", "parse_bool", "parse_duration", "positive_int",
    "positive_number",
]

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
          "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Go duration string → seconds (``"0"`` alone is allowed, as in Go)."""
    value = text.strip()
    if value in ("0", ""):
        return 0.0
    sign = -1.0 if value.startswith("-") else 1.0
    body = value[1:] if value[:1] in "+-" else value
    position, total = 0, 0.0
    for match in _PART.finditer(body):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(body) or not body:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (examples: 500ms, 1s, 2m)")
    return sign * total


def feature_gates(text: str) -> str:
    """``--feature-gates``: checked as kube-scheduler checks it (known names, true/false).
    argparse passes the empty default through here too: nothing to check there, and the DRA
    package (its allocator, a tenth of a second of imports) stays unloaded."""
    if not text.strip():
        return text
    from scheduler.framework.draapi import parse_feature_gates

    try:
        parse_feature_gates(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _positive_duration(text: str) -> float:
    value = parse_duration(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
    return value


def positive_number(text: str) -> float:
    """An argparse type: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
    return value


def _non_negative_duration(text: str) -> float:
    value = parse_duration(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "t", "true", "yes", "y", "on"):
        return True
    if value in ("0", "f", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}")


def _verbosity(text: str) -> int:
    try:
        return int(text.lstrip("="))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid verbosity {text!r}") from None


def _selector(text: str) -> tuple[str, str]:
    key, sep, value = text.partition(":")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"node selector {text!r} is not key:value")
    return key.strip(), value.strip()


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _flag(group: argparse._ArgumentGroup, name: str, default: bool, help: str) -> None:
    group.add_argument(name, nargs="?", const=True, default=default, type=parse_bool,
                       metavar="BOOL", help=f"{help} (default {str(default).lower()})")


def _shard_name(text: str) -> str:
    """A NodeShard name: a DNS subdomain, as the API server requires of cluster objects."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a NodeShard name: lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit")
    return text


def add_sharding_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Volcano's ``--scheduler-sharding-mode`` and ``--scheduler-sharding-name``."""
    parser.add_argument("--scheduler-sharding-mode", choices=("none", "hard", "soft"),
                        default="none",
                        help="node sharding, as Volcano 1.14+: hard = place only on the nodes "
                             "of this scheduler's NodeShard, soft = prefer them, none = ignore "
                             "NodeShards (default none)")
    parser.add_argument("--scheduler-sharding-name", default="volcano", metavar="NAME",
                        type=_shard_name,
                        help="the NodeShard (shard.volcano.sh) of this scheduler "
                             "(default volcano)")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``vc-scheduler``-compatible flags of ``lahar run`` to ``parser``."""
    sched = parser.add_argument_group("scheduling")
    sched.add_argument("--scheduler-conf", default="", metavar="PATH",
                       help="scheduler conf YAML (hot-reloaded); empty = built-in default")
    sched.add_argument("--schedule-period", type=_positive_duration, default=1.0,
                       metavar="DURATION",
                       help="time between the end of one cycle and the start of the next, "
                            "or between starts (--schedule-period-from) (default 1s)")
    sched.add_argument("--schedule-period-from", choices=("end", "start"), default="end",
                       help="where the period counts from: the end of a cycle, as Volcano "
                            "(wait.Until, sliding), or its start, so cycles begin one period "
                            "apart however long each takes (one follows at once when a cycle "
                            "outlasts the period) (default end)")
    sched.add_argument("--schedule-on-arrival", type=_non_negative_duration, default=0.0,
                       metavar="DURATION",
                       help="when above 0, a pod that arrives starts the next cycle early, once "
                            "this long has passed since the last cycle started; the period "
                            "still bounds the wait when nothing arrives (default 0: off, as "
                            "Volcano)")
    sched.add_argument("--scheduler-name", action="append", default=None, metavar="NAME",
                       help="schedule pods with this spec.schedulerName (repeatable; "
                            "default volcano)")
    add_sharding_arguments(sched)
    sched.add_argument("--feature-gates", type=feature_gates, default="",
                       metavar="NAME=true|false,...",
                       help="kube-scheduler's Dynamic Resource Allocation feature gates "
                            "(DRAConsumableCapacity, DRAPrioritizedList, ...), as its "
                            "--feature-gates; added to the conf's predicate.DRAFeatureGates")
    sched.add_argument("--default-queue", default="default", metavar="QUEUE",
                       help="queue for PodGroups that name none (default default)")
    sched.add_argument("--node-selector", action="append", type=_selector, default=None,
                       metavar="KEY:VALUE",
                       help="only use nodes carrying this label (repeatable)")
    sched.add_argument("--percentage-nodes-to-find", type=int, default=0, metavar="PERCENT",
                       help="percentage of nodes to find feasible and score for a pod; "
                            "<=0 = adaptive, as kube-scheduler (default 0)")
    sched.add_argument("--minimum-feasible-nodes", type=int, default=100, metavar="N",
                       help="find at least this many feasible nodes before scoring stops "
                            "the search (default 100)")
    sched.add_argument("--minimum-percentage-nodes-to-find", type=int, default=5,
                       metavar="PERCENT",
                       help="the adaptive percentage never goes below this (default 5)")
    sched.add_argument("--resource-sync-timeout", type=_non_negative_duration, default=60.0,
                       metavar="DURATION",
                       help="wait at most this long for the initial cache sync (0 = forever)")
    sched.add_argument("--cache-dump-dir", default="/tmp", metavar="DIR",
                       help="where SIGUSR1 writes the cache as JSON (default /tmp)")
    _flag(sched, "--cache-dumper", True, "dump the cache on SIGUSR1")
    _flag(sched, "--enable-podgroup-controller", True,
          "give plain pods of our schedulers a PodGroup, as Volcano's controller does")

    topology = parser.add_argument_group("network topology")
    topology.add_argument(
        "--hypernode-discovery-config", default="", metavar="PATH",
        help="run HyperNode label discovery from this file, the volcano-controller.conf key "
             "of Volcano's volcano-controller-configmap (mounted; re-read when it changes); "
             "empty = off. Needs the RBAC of conf/deploy/optional/hypernode-discovery.yaml")

    api = parser.add_argument_group("API server")
    api.add_argument("--kubeconfig", default="", metavar="PATH",
                     help="kubeconfig file (default: in-cluster service account, else "
                          "$KUBECONFIG's first file, else ~/.kube/config)")
    api.add_argument("--context", default="", metavar="NAME",
                     help="the kubeconfig context to use (default: its current-context)")
    api.add_argument("--master", default="", metavar="URL",
                     help="API server address, overrides kubeconfig")
    api.add_argument("--kube-api-qps", type=positive_number, default=2000.0, metavar="QPS",
                     help="requests per second to the API server, sustained (default 2000)")
    api.add_argument("--kube-api-burst", type=positive_int, default=2000, metavar="N",
                     help="requests to the API server allowed in a burst above "
                          "--kube-api-qps (default 2000)")
    api.add_argument("--bind-workers", type=positive_int, default=32, metavar="N",
                     help="threads sending Bindings concurrently (default 32); binds, status "
                          "and watches together stay within --kube-api-qps/--kube-api-burst")

    serve = parser.add_argument_group("serving")
    serve.add_argument("--listen-address", default=":8080", metavar="[HOST]:PORT",
                       help="address of /metrics (default :8080, every interface)")
    _flag(serve, "--enable-metrics", False, "serve /metrics")
    serve.add_argument("--healthz-address", default=":11251", metavar="[HOST]:PORT",
                       help="address of /healthz, /readyz (default :11251, every interface)")
    _flag(serve, "--enable-healthz", False, "serve /healthz and /readyz")
    serve.add_argument("--web-address", default="", metavar="[HOST]:PORT",
                       help="serve the read-only web view and its /api/ JSON here (off by "
                            "default; no host means 127.0.0.1; see docs/web.md)")

    elect = parser.add_argument_group("leader election")
    _flag(elect, "--leader-elect", True, "run only while holding the leader Lease")
    elect.add_argument("--leader-elect-lease-duration", type=parse_duration, default=15.0,
                       metavar="DURATION",
                       help="how long a candidate waits after the leader's last renewal "
                            "before it takes the Lease (default 15s)")
    elect.add_argument("--leader-elect-renew-deadline", type=parse_duration, default=10.0,
                       metavar="DURATION",
                       help="the leader stops leading when it could not renew for this long "
                            "(default 10s)")
    elect.add_argument("--leader-elect-retry-period", type=parse_duration, default=2.0,
                       metavar="DURATION",
                       help="time between tries to take or renew the Lease (default 2s)")
    elect.add_argument("--leader-elect-resource-name", default="", metavar="NAME",
                       help="Lease name (default: the scheduler name)")
    elect.add_argument("--leader-elect-resource-namespace", default="volcano-system",
                       metavar="NAMESPACE",
                       help="namespace of the Lease (default volcano-system)")
    elect.add_argument("--lock-object-namespace", default="", metavar="NAMESPACE",
                       help="deprecated: use --leader-elect-resource-namespace")

    logs = parser.add_argument_group("logging")
    logs.add_argument("-v", "--v", dest="verbosity", type=_verbosity, default=0, metavar="N",
                      help="log verbosity (klog levels; >=4 is debug)")
    logs.add_argument("--log-format", choices=("auto", "json", "console"), default="auto",
                      help="auto = JSON unless stderr is a terminal")
    _flag(logs, "--logtostderr", True, "accepted for compatibility; logs always go to stderr")
    add_volcano_only_flags(parser)


def normalize(args: argparse.Namespace) -> argparse.Namespace:
    """Fill list defaults and resolve the deprecated lock namespace flag."""
    args.scheduler_name = list(dict.fromkeys(args.scheduler_name or ["volcano"]))
    args.node_selector = dict(args.node_selector or [])
    if args.lock_object_namespace:
        args.leader_elect_resource_namespace = args.lock_object_namespace
    if not args.leader_elect_resource_name:
        names = args.scheduler_name
        args.leader_elect_resource_name = names[0] if len(names) == 1 else "volcano"
    return args
