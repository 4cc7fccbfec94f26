"""The ``lahar`` command line: ``simulate``, ``conf check``, ``inspect`` and (with a cluster)
``run``.

Every sub-command is registered unconditionally: a broken installation fails with its import
error instead of quietly losing commands. ``run`` alone is imported when it runs (it brings the
official Kubernetes client, a quarter second no other command needs); building the parser
checks that its module and the client can be found, so a missing one still fails every command
loudly. Conf and manifest warnings are printed once each, as ``warning: …`` lines on stderr.

Exit codes: 0 success, 1 runtime failure, 2 bad input (manifests, conf, flags).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Sequence

import structlog

from scheduler.cluster.kube.flags import add_run_arguments
from scheduler.commands.inspect import add_inspect_arguments
from scheduler.commands.replay import add_replay_arguments
from scheduler.commands.simulate import add_simulate_arguments, load_conf_warning
from scheduler.conf import ConfError

__all__ = ["build_parser", "main", "version"]


def version() -> str:
    """The installed distribution's version (the source tree's when run uninstalled)."""
    try:
        return importlib.metadata.version("lahar")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


_RUN_MODULES = ("scheduler.cluster.kube.run", "kubernetes")
"""What ``lahar run`` imports when it starts: checked, not imported, when the parser is built."""


def _require_run_modules() -> None:
    for name in _RUN_MODULES:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _run(args: argparse.Namespace) -> int:
    from scheduler.cluster.kube.run import run_main

    return run_main(args)


def _conf_check(args: argparse.Namespace) -> int:
    try:
        conf = load_conf_warning(args.conf)
    except ConfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tiers = "; ".join(", ".join(p.name for p in tier) for tier in conf.tiers)
    print(f"{conf.source}: ok (actions: {', '.join(conf.actions)}; tiers: {tiers})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lahar",
        description="A Volcano-style batch scheduler "
        "for Kubernetes with GPU/RDMA/FPGA device sharing.",
    )
    parser.add_argument("--version", action="version", version=f"lahar {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_simulate_arguments(sub)
    conf = sub.add_parser("conf", help="scheduler conf tools")
    conf_sub = conf.add_subparsers(dest="conf_command", required=True)
    check = conf_sub.add_parser("check", help="validate a scheduler conf")
    check.add_argument("conf", nargs="?", help="conf file (default: the built-in conf)")
    check.set_defaults(func=_conf_check)
    add_inspect_arguments(sub)
    add_replay_arguments(sub)
    from scheduler.commands.device import add_device_arguments
    from scheduler.commands.inspect_devices import add_inspect_devices

    add_inspect_devices(sub)
    add_device_arguments(sub)
    _require_run_modules()
    run = sub.add_parser("run", help="schedule pods on a Kubernetes cluster")
    add_run_arguments(run)
    run.set_defaults(func=_run)
    return parser


class _CurrentStderr:
    """Whatever ``sys.stderr`` is at write time: binding the stream object itself would keep
    logging into a stream that was swapped and closed (an embedding program, a test runner)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr())  # type: ignore[arg-type]
    )
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader went away (``lahar simulate -o yaml big.yaml | head``): stop quietly.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
