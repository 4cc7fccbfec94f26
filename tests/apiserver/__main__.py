"""``python -m tests.apiserver --kubeconfig PATH``: serve the double until interrupted."""

from __future__ import annotations

import argparse
import signal
import threading

from tests.apiserver.standalone import populate, start_standalone


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.apiserver",
                                     description="a bare Kubernetes API server double")
    parser.add_argument("--kubeconfig", required=True, help="where to write its kubeconfig")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any)")
    parser.add_argument("--fake-nodes", type=int, default=0,
                        help="start with this many Nodes (scale benchmarks)")
    parser.add_argument("--fake-pods", type=int, default=0,
                        help="start with this many running pods in PodGroups of 4")
    parser.add_argument("--scheduler-name", default="volcano",
                        help="spec.schedulerName of the fake pods")
    args = parser.parse_args()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    double = start_standalone(args.kubeconfig, port=args.port)
    if args.fake_nodes or args.fake_pods:
        populate(double, nodes=args.fake_nodes, pods=args.fake_pods,
                 scheduler=args.scheduler_name)
    print(f"serving on {double.url}; kubeconfig {args.kubeconfig}", flush=True)
    stop.wait()
    double.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
