"""``lahar shard-controller``: split the cluster's nodes among schedulers as NodeShards.

Volcano's sharding controller (its controller manager's ``sharding-controller``) for clusters
that run Lahar without Volcano; the flags are Volcano's (``--scheduler-configs``,
``--shard-sync-period``, ``--enable-node-event-trigger``) with the ConfigMap given as a file
(``--sharding-config``, the ConfigMap's ``sharding.yaml`` mounted), plus Lahar's opt-in
``--assignment-batch-size`` and ``--node-selector``. ``--once`` assigns, writes and quits.
See docs/sharding.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from scheduler.cluster.kube.flags import _non_negative_duration, _selector

__all__ = ["add_shard_controller_arguments"]


def _run(args: argparse.Namespace) -> int:
    from scheduler.cluster.kube.client import KubeClient
    from scheduler.cluster.kube.shardcontroller import (
        FileReload,
        ShardController,
        file_signature,
        load_config_file,
        summary,
    )
    from scheduler.cluster.sharding.config import (
        DEFAULT_SCHEDULER_CONFIGS,
        ShardingConfigError,
        parse_legacy,
    )

    reload = None
    try:
        if args.sharding_config:
            signature = file_signature(args.sharding_config)
            config = load_config_file(args.sharding_config)
            reload = FileReload(args.sharding_config, signature)
        else:
            config = parse_legacy(args.scheduler_configs or list(DEFAULT_SCHEDULER_CONFIGS))
    except (OSError, ShardingConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        client = KubeClient.from_flags(kubeconfig=args.kubeconfig or None,
                                       master=args.master or None,
                                       context=args.context or None)
    except (OSError, ValueError) as error:
        print(f"error: cannot build the API client configuration: {error}", file=sys.stderr)
        return 2
    controller = ShardController(
        client, config=config, sync_period=args.shard_sync_period,
        node_event_trigger=args.enable_node_event_trigger == "true",
        batch_size=args.assignment_batch_size,
        node_selector=dict(args.node_selector or []), reload=reload)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    controller.run(stop, once=args.once)
    if args.once:
        print(summary(controller.plan()))
        if controller.failed_writes:
            print(f"error: {controller.failed_writes} NodeShard write(s) failed (see the log)",
                  file=sys.stderr)
            return 1
    return 0


def add_shard_controller_arguments(sub: Any) -> None:
    parser = sub.add_parser(
        "shard-controller", help="split the nodes among schedulers as NodeShards",
        description="Volcano's node sharding controller: assigns nodes to schedulers by "
        "allocation-rate bands, warmup labels and node-count limits and writes one NodeShard "
        "(shard.volcano.sh/v1alpha1) per scheduler, for schedulers run with "
        "--scheduler-sharding-mode hard|soft. See docs/sharding.md.")
    api = parser.add_argument_group("API server")
    api.add_argument("--kubeconfig", default="", metavar="PATH",
                     help="kubeconfig file (default: in-cluster service account, else "
                          "$KUBECONFIG, else ~/.kube/config)")
    api.add_argument("--context", default="", help="the kubeconfig context to use")
    api.add_argument("--master", default="", metavar="URL",
                     help="API server address, overrides kubeconfig")
    conf = parser.add_argument_group("sharding (Volcano's flags)")
    conf.add_argument("--sharding-config", default="", metavar="FILE",
                      help="Volcano's sharding.yaml (the sharding ConfigMap's key, mounted); "
                           "read again when it changes; takes precedence over "
                           "--scheduler-configs")
    conf.add_argument("--scheduler-configs", action="append", default=None,
                      metavar="NAME:TYPE:MIN:MAX:WARMUP:MINNODES:MAXNODES",
                      help="one scheduler's shard, Volcano's older format (repeatable; default "
                           "volcano:volcano:0.0:0.6:false:2:100 and "
                           "agent-scheduler:agent:0.7:1.0:true:2:100)")
    conf.add_argument("--shard-sync-period", type=_non_negative_duration, default=60.0,
                      metavar="DURATION", help="full assignment period (default 60s)")
    conf.add_argument("--enable-node-event-trigger", choices=("true", "false"),
                      default="true", nargs="?", const="true",
                      help="assign again 200ms after a node's allocation rate moves by more "
                           "than 0.5 or a node appears (default true)")
    lahar = parser.add_argument_group("Lahar's")
    lahar.add_argument("--assignment-batch-size", type=int, default=50, metavar="N",
                       help="assign nodes in batches of N, each on its own, as Volcano "
                            "(default 50); 0 = all nodes in one pass, so maxNodes caps the "
                            "whole shard")
    lahar.add_argument("--node-selector", action="append", type=_selector, default=None,
                       metavar="KEY:VALUE",
                       help="only shard nodes carrying this label (repeatable)")
    lahar.add_argument("--once", action="store_true",
                       help="assign once, write the NodeShards, print the sizes and quit")
    parser.set_defaults(func=_run)
