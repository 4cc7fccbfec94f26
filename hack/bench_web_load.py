#!/usr/bin/env python3
"""Does reading the web view slow scheduling? A 2,000-pod burst with and without 50 readers.

Runs ``lahar run --web-address`` in this process against the API double (tests/apiserver) on
``--nodes`` nodes, creates ``--pods`` plain pods at once, and times until every one is bound.
Then the same on a fresh double while ``--clients`` readers (threads of a separate process)
poll the pages and the JSON every ``--every`` seconds. Rounds alternate quiet and loaded; the
figure is the median all-bound time of each and their difference in percent.

    python hack/bench_web_load.py --pods 2000 --clients 50 --every 0.5 --rounds 2
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from kube_helpers import make_node, make_pod  # noqa: E402

from scheduler.cluster.kube.flags import normalize  # noqa: E402
from scheduler.cluster.kube.run import add_run_arguments, run_main  # noqa: E402
from scheduler.web.publish import Publisher  # noqa: E402
from scheduler.web.server import WebServer  # noqa: E402
from tests.apiserver import ApiServerDouble  # noqa: E402

PATHS = ("/api/overview", "/api/jobs", "/", "/jobs", "/queues", "/nodes")


def readers(url: str, clients: int, every: float, naive: bool) -> int:
    """The readers' process: ``clients`` threads polling until killed.

    Each reader is a browser tab: one kept-alive connection, ``Accept-Encoding: gzip``, and
    ``If-None-Match`` with the ETag it last got, as a browser's ``fetch`` sends for an answer
    marked ``Cache-Control: no-cache``. ``naive`` readers open a connection per request and
    take every body whole (urllib's way), the worst case for the server."""
    host, _, port = url.removeprefix("http://").partition(":")

    def browser(index: int) -> None:
        n = index
        tags: dict[str, str] = {}
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        while True:
            path = PATHS[n % len(PATHS)]
            headers = {"Accept-Encoding": "gzip, deflate, br"}
            if path in tags:
                headers["If-None-Match"] = tags[path]
            try:
                conn.request("GET", path, headers=headers)
                reply = conn.getresponse()
                reply.read()
                if reply.getheader("ETag"):
                    tags[path] = reply.getheader("ETag", "")
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
            n += 1
            time.sleep(every)

    def poll(index: int) -> None:
        n = index
        while True:
            try:
                with urllib.request.urlopen(url + PATHS[n % len(PATHS)], timeout=10) as reply:
                    reply.read()
            except OSError:
                pass
            n += 1
            time.sleep(every)

    for i in range(clients):
        threading.Thread(target=poll if naive else browser, args=(i,), daemon=True).start()
    while True:
        time.sleep(3600)


def burst(*, nodes: int, pods: int, clients: int, every: float, naive: bool = False) -> float:
    api = ApiServerDouble()
    api.start()
    for i in range(nodes):
        api.create("v1/nodes", make_node(f"n{i}", cpu="64"))
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = normalize(parser.parse_args(["--master", api.url, "--leader-elect=false",
                                        "--schedule-period=100ms", "--log-format=json", "-v=0",
                                        "--web-address=127.0.0.1:0"]))
    publisher = Publisher()
    args.on_close = publisher
    server = WebServer(args.web_address, publisher).start()
    stop = threading.Event()
    runner = threading.Thread(target=lambda: run_main(args, stop=stop), daemon=True)
    runner.start()
    while publisher.ask() is None:
        time.sleep(0.05)
    reader = (subprocess.Popen([sys.executable, __file__, "--readers", server.url,
                                "--clients", str(clients), "--every", str(every),
                                *(["--naive"] if naive else [])])
              if clients else None)
    try:
        time.sleep(1.0)  # readers connected
        names = [f"p{i}" for i in range(pods)]
        started = time.perf_counter()
        for name in names:
            body = make_pod(name, namespace="load")
            body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
            api.create("v1/pods", body)
        left = list(reversed(names))
        while left:  # cheap: stop at the first pod still unbound, look again a moment later
            while left and (api.get("v1/pods", f"load/{left[-1]}") or {}).get(
                    "spec", {}).get("nodeName"):
                left.pop()
            if left:
                time.sleep(0.05)
        seconds = time.perf_counter() - started
        print(f"burst with {clients} reader(s): {seconds:.2f} s", file=sys.stderr, flush=True)
        return seconds
    finally:
        if reader is not None:
            reader.kill()
            reader.wait()
        stop.set()
        runner.join(20)
        server.stop()
        api.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--naive", action="store_true",
                        help="readers open a connection per request and take no gzip or 304")
    parser.add_argument("--readers", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.readers:
        return readers(args.readers, args.clients, args.every, args.naive)
    quiet, loaded = [], []
    for _ in range(args.rounds):
        quiet.append(burst(nodes=args.nodes, pods=args.pods, clients=0, every=args.every))
        loaded.append(burst(nodes=args.nodes, pods=args.pods, clients=args.clients,
                            every=args.every, naive=args.naive))
    q, lo = statistics.median(quiet), statistics.median(loaded)
    print(json.dumps({"pods": args.pods, "nodes": args.nodes, "clients": args.clients,
                      "readers": "naive" if args.naive else "browser",
                      "every_seconds": args.every, "quiet_seconds": [round(x, 2) for x in quiet],
                      "loaded_seconds": [round(x, 2) for x in loaded],
                      "change_percent": round((lo - q) / q * 100, 1)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
