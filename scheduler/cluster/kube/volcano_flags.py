"""Flags of Volcano's scheduler that ``lahar run`` accepts without acting on them, so that a
Deployment written for vc-scheduler runs unchanged instead of crash-looping on "unrecognized
arguments"; each one given is named in a warning at start.

The list is Volcano's ``ServerOption.AddFlags`` (cmd/scheduler/app/options/options.go) less
what Lahar implements (its own flags in :mod:`scheduler.cluster.kube.flags`,
``--feature-gates`` among them), plus component-base's ``--leader-elect-resource-lock`` and
klog's flags. ``--version`` is acted on: it prints Lahar's version and quits, as
vc-scheduler's does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["VersionAction", "add_volcano_only_flags", "installed_version", "not_acted_on"]

_BOOLEANS = {
    "--priority-class": "PriorityClass preemption at PodGroup level (Lahar always reads "
                        "PriorityClasses)",
    "--csi-storage": "CSIDriver and CSIStorageCapacity informers",
    "--enable-pprof": "the pprof endpoint",
    "--disable-default-scheduler-config": "(Lahar keeps or falls back to its default conf)",
    "--alsologtostderr": "klog", "--add-dir-header": "klog", "--one-output": "klog",
    "--skip-headers": "klog", "--skip-log-headers": "klog",
}
_VALUES = {
    "--ca-cert-file": ("FILE", "CA of its webhook server"),
    "--tls-cert-file": ("FILE", "certificate of its webhook server"),
    "--tls-private-key-file": ("FILE", "key of its webhook server"),
    "--resync-period": ("DURATION", "informer resync (Lahar's watches need none)"),
    "--plugins-dir": ("DIR", "Go plugins to load (Lahar's come from entry points)"),
    "--node-worker-threads": ("N", "node sync workers"),
    "--gate-removal-worker-num": ("N", "scheduling-gate removal workers"),
    "--ignored-provisioners": ("LIST", "CSI provisioners left out of PVC requests"),
    "--leader-elect-resource-lock": ("KIND", "lock kind (Lahar always uses a Lease)"),
    "--log-dir": ("DIR", "klog"), "--log-file": ("FILE", "klog"),
    "--log-file-max-size": ("MB", "klog"), "--log-flush-frequency": ("DURATION", "klog"),
    "--stderrthreshold": ("LEVEL", "klog"), "--vmodule": ("PATTERN", "klog"),
    "--log-backtrace-at": ("FILE:LINE", "klog"),
}


def installed_version() -> str:
    """The installed distribution's version (the source tree's when run uninstalled)."""
    import importlib.metadata  # only when asked: a tenth of a second of every start otherwise

    try:
        return importlib.metadata.version("lahar")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


class VersionAction(argparse.Action):
    """``--version``: prints ``lahar VERSION`` and quits, as argparse's ``version`` action
    does, with the version looked up only then."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS,
                 help: str = "show program's version number and exit",
                 version: Callable[[], str] = installed_version) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help)
        self.version = version

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser._print_message(f"lahar {self.version()}\n", sys.stdout)
        parser.exit()


def _dest(flag: str) -> str:
    return "volcano_" + flag.lstrip("-").replace("-", "_")


def add_volcano_only_flags(parser: argparse.ArgumentParser) -> None:
    """Add the group of Volcano's flags that Lahar accepts and does not act on."""
    group = parser.add_argument_group(
        "Volcano's flags accepted but not acted on (each one given is named in a warning)")
    parser.add_argument("--version", action=VersionAction)
    for flag in sorted(_BOOLEANS):
        # pflag booleans: --flag, --flag=true, --flag=false
        group.add_argument(flag, dest=_dest(flag), nargs="?", const="true", default=None,
                           metavar="BOOL", help=f"Volcano's: {_BOOLEANS[flag]}")
    for flag, (metavar, _) in sorted(_VALUES.items()):
        group.add_argument(flag, dest=_dest(flag), action="append", default=None,
                           metavar=metavar, help=f"Volcano's: {_VALUES[flag][1]}")


def not_acted_on(args: argparse.Namespace) -> list[str]:
    """The Volcano-only flags given, as ``--flag=value``, in a stable order."""
    given = []
    for flag in sorted([*_BOOLEANS, *_VALUES]):
        value = getattr(args, _dest(flag), None)
        if value is None:
            continue
        shown = ",".join(value) if isinstance(value, list) else value
        given.append(f"{flag}={shown}")
    return given
