"""``python -m tests.apiserver --kubeconfig PATH``: serve the double until interrupted."""

from __future__ import annotations

import argparse
import signal
import threading

from tests.apiserver.standalone import start_standalone


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.apiserver",
                                     description="a bare Kubernetes API server double")
    parser.add_argument("--kubeconfig", required=True, help="where to write its kubeconfig")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any)")
    args = parser.parse_args()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    double = start_standalone(args.kubeconfig, port=args.port)
    print(f"serving on {double.url}; kubeconfig {args.kubeconfig}", flush=True)
    stop.wait()
    double.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
