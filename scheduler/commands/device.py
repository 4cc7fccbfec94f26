"""``lahar device report``: print the Device object this machine would report (the node agent
writes it)."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any

import yaml

from scheduler.devices.node.report import Loader, NoGpus, Sysfs, build_device_object, load_nvml

__all__ = ["add_device_arguments", "report_main"]

NVIDIA_DRIVER_DIR = "/proc/driver/nvidia"


def add_device_arguments(sub: Any) -> None:
    device = sub.add_parser("device", help="node-side device tools")
    device_sub = device.add_subparsers(dest="device_command", required=True)
    report = device_sub.add_parser(
        "report", help="the Koordinator Device object of this machine's NVIDIA GPUs")
    report.add_argument("--dry-run", action="store_true",
                        help="accepted for older scripts: the report is always printed, never "
                             "written (lahar node-agent writes it)")
    report.add_argument("--node-name", default=None,
                        help="Device object name (default: $NODE_NAME, else the host name)")
    report.add_argument("--sysfs", default="/sys", metavar="DIR",
                        help="where sysfs is mounted, read for PCIe and NUMA placement "
                             "(default: /sys)")
    report.set_defaults(func=report_main)


def report_main(args: argparse.Namespace, *, loader: Loader = load_nvml,
                driver_dir: str = NVIDIA_DRIVER_DIR) -> int:
    node = args.node_name or os.environ.get("NODE_NAME") or socket.gethostname()
    try:
        nvml, error = loader()
    except ImportError:
        if not os.path.isdir(driver_dir):
            print(f"no NVIDIA GPUs on this machine: no NVIDIA driver ({driver_dir} is "
                  f"absent); nothing to report")
            return 0
        print("error: reading GPUs needs nvidia-ml-py (pip install -e '.[nodeagent]' in the clone)",
              file=sys.stderr)
        return 1
    try:
        device = build_device_object(node, nvml, sysfs=Sysfs(args.sysfs), error=error)
    except NoGpus as exc:
        print(f"no NVIDIA GPUs on this machine: {exc}; nothing to report")
        return 0
    sys.stdout.write(yaml.safe_dump(device, sort_keys=False))
    return 0
