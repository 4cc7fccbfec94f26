"""CDI: the agent's cards as a Container Device Interface spec, and ``Allocate`` answers that
name them.

With ``--cdi`` the agent writes one spec file, ``<cdi-root>/k8s.device-plugin.nvidia.com-gpu
.json`` (``/var/run/cdi`` by default), and every ``Allocate`` answer carries the CDI names of
the devices the scheduler chose (``CDIDevices`` of the kubelet API) instead of
``NVIDIA_VISIBLE_DEVICES``. A runtime configured for CDI (containerd, CRI-O) then injects the
device nodes, driver libraries and tools itself, without the NVIDIA runtime hook. The spec has
the shape nvidia-container-toolkit's ``nvcdi`` generates (``cdiVersion``, ``kind``, one device
per card named by UUID plus ``all``, shared ``containerEdits`` with the control device nodes,
``NVIDIA_VISIBLE_DEVICES=void`` and the driver's files bind-mounted read-only), under the
vendor HAMi's and NVIDIA's device plugins use (``k8s.device-plugin.nvidia.com``, class
``gpu``) so it never collides with an ``nvidia-ctk cdi generate`` spec of kind
``nvidia.com/gpu``. Where the toolkit adds hooks (symlinks, ``ldconfig``), this spec mounts
each library at its versioned name and its soname, at the host's path: no hook is needed.
MIG instances (:mod:`~scheduler.devices.node.modes`) are devices named by their MIG UUID
with the parent card's node and, where the driver lists them, their capability nodes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.devices.node.inventory import Gpu, Inventory

__all__ = ["CDI_VERSION", "KIND", "CdiSpecWriter", "DriverFiles", "build_spec",
           "cdi_device_names", "discover_driver", "qualified_name", "spec_path", "with_cdi"]

CDI_VERSION = "0.5.0"
VENDOR = "k8s.device-plugin.nvidia.com"
CLASS = "gpu"
KIND = f"{VENDOR}/{CLASS}"
VISIBLE = "NVIDIA_VISIBLE_DEVICES"
MOUNT_OPTIONS = ("ro", "nosuid", "nodev", "bind")

CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                 "/dev/nvidia-modeset")
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                "/lib/x86_64-linux-gnu", "/lib64", "/usr/lib")
LIBRARIES = ("libcuda.so", "libcudadebugger.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so",
             "libnvidia-nvvm.so", "libnvidia-gpucomp.so", "libnvidia-allocator.so",
             "libnvidia-cfg.so", "libnvidia-opencl.so", "libnvidia-pkcs11.so")
"""The compute libraries of the driver (the toolkit's ``compute``/``utility`` set)."""
BINARY_DIRS = ("/usr/bin", "/usr/local/bin")
BINARIES = ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
            "nvidia-cuda-mps-server")


def qualified_name(device: str) -> str:
    """``vendor/class=device``, as ``cdiapi.QualifiedName``."""
    return f"{KIND}={device}"


def spec_path(cdi_root: str) -> str:
    """``cdiapi.GenerateNameForSpec``: ``<vendor>-<class>``, saved as JSON."""
    return os.path.join(cdi_root, f"{VENDOR}-{CLASS}.json")


@dataclass(frozen=True, slots=True)
class DriverFiles:
    """What of the driver is on this host, as paths inside the container and on the host."""

    control_nodes: tuple[str, ...] = ()
    mounts: tuple[tuple[str, str], ...] = ()
    """(container path, host path): versioned libraries, their sonames, the tools."""


def _host(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


_VERSIONED = re.compile(r"\.so\.\d+\.\d+")


def discover_driver(root: str = "/") -> DriverFiles:
    """The driver's control nodes, compute libraries and tools under ``root`` (the driver
    root: ``/`` on a host with the driver installed, ``/run/nvidia/driver`` with the driver
    container)."""
    nodes = tuple(node for node in CONTROL_NODES if os.path.exists(_host(root, node)))
    mounts: list[tuple[str, str]] = []
    seen: set[str] = set()
    for directory in LIBRARY_DIRS:
        host_dir = _host(root, directory)
        try:
            names = sorted(os.listdir(host_dir))
        except OSError:
            continue
        found: dict[str, str] = {}  # real path → the versioned file's name
        for name in names:
            path = os.path.join(host_dir, name)
            if (name.startswith(LIBRARIES) and _VERSIONED.search(name) and name not in seen
                    and not os.path.islink(path) and os.path.isfile(path)):
                seen.add(name)
                found[os.path.realpath(path)] = name
                mounts.append((f"{directory}/{name}", path))
        for name in names:  # sonames (libcuda.so.1) and dev links pointing at one of them
            path = os.path.join(host_dir, name)
            if name.startswith(LIBRARIES) and os.path.islink(path) \
                    and os.path.realpath(path) in found:
                mounts.append((f"{directory}/{name}", os.path.realpath(path)))
    for directory in BINARY_DIRS:
        for name in BINARIES:
            path = _host(root, f"{directory}/{name}")
            if name not in seen and os.path.isfile(path):
                seen.add(name)
                mounts.append((f"{directory}/{name}", os.path.realpath(path)))
    return DriverFiles(control_nodes=nodes, mounts=tuple(mounts))


def _node(path: str, root: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": path}
    if root not in ("", "/"):
        entry["hostPath"] = _host(root, path)
    return entry


def _gpu_node(gpu: Gpu) -> str:
    return f"/dev/nvidia{gpu.minor}"


def build_spec(inventory: Inventory, driver: DriverFiles, *, dev_root: str = "/",
               mig: Mapping[str, Sequence[Any]] | None = None) -> dict[str, Any]:
    """The spec of this node's cards (and their MIG instances: card UUID → instances with
    ``uuid`` and ``caps``, the capability device nodes)."""
    devices: list[dict[str, Any]] = []
    for gpu in sorted(inventory.gpus, key=lambda g: g.index):
        devices.append({"name": gpu.uuid, "containerEdits": {
            "deviceNodes": [_node(_gpu_node(gpu), dev_root)]}})
        for instance in (mig or {}).get(gpu.uuid, ()):
            nodes = [_gpu_node(gpu), *getattr(instance, "caps", ())]
            devices.append({"name": instance.uuid, "containerEdits": {
                "deviceNodes": [_node(node, dev_root) for node in nodes]}})
    if inventory.gpus:
        devices.append({"name": "all", "containerEdits": {"deviceNodes": [
            _node(_gpu_node(gpu), dev_root) for gpu in inventory.gpus]}})
    edits: dict[str, Any] = {"env": [f"{VISIBLE}=void"]}
    if driver.control_nodes:
        edits["deviceNodes"] = [_node(node, dev_root) for node in driver.control_nodes]
    if driver.mounts:
        edits["mounts"] = [{"hostPath": host, "containerPath": inside,
                            "options": list(MOUNT_OPTIONS)} for inside, host in driver.mounts]
    return {"cdiVersion": CDI_VERSION, "kind": KIND, "devices": devices,
            "containerEdits": edits}


@dataclass(slots=True)
class CdiSpecWriter:
    """Writes the spec when what it says changes (atomically: runtimes read it any time)."""

    cdi_root: str
    driver_root: str = "/"
    mig: Callable[[Inventory], Mapping[str, Sequence[Any]]] | None = None
    _last: str = field(default="")

    @property
    def path(self) -> str:
        return spec_path(self.cdi_root)

    def sync(self, inventory: Inventory) -> bool:
        """Write the spec if it differs from the last written; True when written."""
        spec = build_spec(inventory, discover_driver(self.driver_root), dev_root=self.driver_root,
                          mig=self.mig(inventory) if self.mig is not None else None)
        text = json.dumps(spec, indent=2, sort_keys=False) + "\n"
        if text == self._last and os.path.exists(self.path):
            return False
        os.makedirs(self.cdi_root, exist_ok=True)
        temporary = f"{self.path}.tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, self.path)
        self._last = text
        return True


def cdi_device_names(visible: str, inventory: Inventory, *, by_minor: bool) -> list[str]:
    """The CDI names of an ``NVIDIA_VISIBLE_DEVICES`` value: UUIDs (cards or MIG instances)
    name themselves; numbers are card indices (GPU share) or minors (fine-grained, as koordlet
    injects them). Raises ValueError for a number the node has no card for."""
    names = []
    for token in (t.strip() for t in visible.split(",")):
        if not token:
            continue
        if token.isdigit():
            number = int(token)
            gpu = next((g for g in inventory.gpus
                        if (g.minor if by_minor else g.index) == number), None)
            if gpu is None:
                what = "minor" if by_minor else "index"
                raise ValueError(f"no GPU with {what} {number} for its CDI name")
            token = gpu.uuid
        names.append(qualified_name(token))
    return names


def with_cdi(answer: Any, inventory: Inventory, *, by_minor: bool) -> Any:
    """``answer`` (a ``ContainerAnswer``) naming its devices by CDI instead of the
    environment: HAMi's ``getAllocateResponse`` with every strategy a CDI one sets
    ``CdiDevices`` and no ``NVIDIA_VISIBLE_DEVICES``; the family's other variables stay."""
    visible = answer.envs.get(VISIBLE)
    if not visible:
        return answer
    envs = {key: value for key, value in answer.envs.items() if key != VISIBLE}
    return replace(answer, envs=envs,
                   cdi_devices=tuple(cdi_device_names(visible, inventory, by_minor=by_minor)))
