"""CDI specs of prepared claims: one transient spec file per claim, as NVIDIA's DRA driver
writes them.

NVIDIA's ``k8s-dra-driver-gpu`` (``cmd/gpu-kubelet-plugin/cdi.go``) writes, for each prepared
claim, ``<cdi-root>/k8s.<driver>-claim_<claim UID>.json`` of kind ``k8s.<driver>/claim``, with
one device per allocated device named ``<claim UID>-<device>``, and answers
``NodePrepareResources`` with those qualified names. Lahar does the same under its own
driver name, so a claim's spec is written and removed with the claim and two claims sharing a
card (consumable capacity) get different environments. A device's edits are its device nodes
and environment (``NVIDIA_VISIBLE_DEVICES``, HAMi-core's variables for a share) and mounts;
the spec's common edits carry the driver's control nodes and libraries
(:func:`~scheduler.devices.node.cdi.discover_driver`, as the device-plugin ``--cdi`` spec).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.devices.node.cdi import CDI_VERSION, MOUNT_OPTIONS, DriverFiles

__all__ = ["ClaimDevice", "claim_kind", "claim_spec", "claim_spec_path", "qualified",
           "remove_claim_spec", "write_claim_spec"]


@dataclass(frozen=True, slots=True)
class ClaimDevice:
    """What one allocated device gives the containers of the claim."""

    name: str
    """The DRA device name (``gpu-0``, ``gpu-0-mig-1``, ``rdma-0``)."""
    env: Mapping[str, str] = field(default_factory=dict)
    device_nodes: tuple[str, ...] = ()
    mounts: tuple[tuple[str, str, bool], ...] = ()
    """(container path, host path, read only)."""


def claim_kind(driver: str) -> str:
    return f"k8s.{driver}/claim"


def qualified(driver: str, claim_uid: str, device: str) -> str:
    """The CDI name kubelet passes to the runtime: ``k8s.<driver>/claim=<uid>-<device>``."""
    return f"{claim_kind(driver)}={claim_uid}-{device}"


def claim_spec_path(cdi_root: str, driver: str, claim_uid: str) -> str:
    return os.path.join(cdi_root, f"k8s.{driver}-claim_{claim_uid}.json")


def _node(path: str, dev_root: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": path}
    if dev_root not in ("", "/"):
        entry["hostPath"] = os.path.join(dev_root, path.lstrip("/"))
    return entry


def claim_spec(*, driver: str, claim_uid: str, devices: Sequence[ClaimDevice],
               files: DriverFiles, dev_root: str = "/") -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for device in devices:
        edits: dict[str, Any] = {}
        if device.env:
            edits["env"] = [f"{key}={value}" for key, value in device.env.items()]
        if device.device_nodes:
            edits["deviceNodes"] = [_node(node, dev_root) for node in device.device_nodes]
        if device.mounts:
            edits["mounts"] = [{"hostPath": host, "containerPath": inside,
                                "options": ["ro" if read_only else "rw", "nosuid", "nodev",
                                            "bind"]}
                               for inside, host, read_only in device.mounts]
        out.append({"name": f"{claim_uid}-{device.name}", "containerEdits": edits})
    common: dict[str, Any] = {}
    if files.control_nodes:
        common["deviceNodes"] = [_node(node, dev_root) for node in files.control_nodes]
    if files.mounts:
        common["mounts"] = [{"hostPath": host, "containerPath": inside,
                             "options": list(MOUNT_OPTIONS)} for inside, host in files.mounts]
    spec: dict[str, Any] = {"cdiVersion": CDI_VERSION, "kind": claim_kind(driver),
                            "devices": out}
    if common:
        spec["containerEdits"] = common
    return spec


def write_claim_spec(cdi_root: str, driver: str, claim_uid: str, spec: Mapping[str, Any]) -> str:
    """Write atomically (a runtime may read the directory at any time); the path."""
    path = claim_spec_path(cdi_root, driver, claim_uid)
    os.makedirs(cdi_root, exist_ok=True)
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(json.dumps(spec, indent=2) + "\n")
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)
    return path


def remove_claim_spec(cdi_root: str, driver: str, claim_uid: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(claim_spec_path(cdi_root, driver, claim_uid))
