"""HAMi-core's knobs: where the agent takes them from, and the environment they become.

HAMi-core (``libvgpu.so``) reads its limits and switches from the container's environment;
the vGPU device plugins put them into the ``Allocate`` answer from their own settings. The
settings come, as the peers take them, from (lowest first):

1. the ``nvidia:`` section of the device config (``device-config.yaml``, the ConfigMap both
   HAMi's ``--config-file`` and volcano-vgpu's ``volcano-vgpu-device-config`` hold):
   ``deviceSplitCount``, ``deviceMemoryScaling``, ``deviceCoreScaling``, ``disableCoreLimit``,
   ``libCudaLogLevel``, ``gpuCorePolicy``, ``gpuMemoryFactor``, ``enableNumaTopology``;
2. the agent's flags, and the peers' environment variables for them (``DEVICE_SPLIT_COUNT``,
   ``DEVICE_MEMORY_SCALING``, ``DEVICE_CORES_SCALING``, ``DISABLE_CORE_LIMIT``), when given:
   volcano-vgpu lets a flag override the ConfigMap only when it is set (``LoadNvidiaConfig``);
3. this node's entry of HAMi's per-node config (``/config/config.json``, ``nodeconfig``:
   ``devicememoryscaling``, ``devicecorescaling``, ``devicesplitcount``, ``libcudaloglevel``,
   ``enablenumatopology``; keys matched case-insensitively as Go's JSON decoder does), which
   overrides everything (HAMi ``readFromConfigFile``, ``mergo.WithOverride``).

The environment (:func:`hami_core_env`) follows each profile's ``Allocate``: HAMi
(``nvinternal/plugin/server.go``) sets ``CUDA_OVERSUBSCRIBE=true`` when memory scaling is above
1, ``LIBCUDA_LOG_LEVEL`` when a level is configured and ``GPU_CORE_UTILIZATION_POLICY=disable``
with ``disableCoreLimit``; volcano-vgpu (``pkg/plugin/server.go``) sets ``CUDA_OVERSUBSCRIBE``
when *core* scaling is above 1 and the same core-limit switch, and multiplies each memory limit
by ``gpuMemoryFactor`` (:func:`memory_limit`). HAMi injects a ``gpuCorePolicy`` other than
``default`` through its admission webhook; Lahar has none, so the agent puts it into the answer
when ``--gpu-core-policy`` asks for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CORE_POLICIES",
    "CoreSettingsError",
    "flag_settings",
    "hami_core_env",
    "memory_limit",
    "read_device_config",
    "read_node_config",
]

CORE_POLICIES = ("default", "force", "disable")
CORE_LIMIT_SWITCH = "GPU_CORE_UTILIZATION_POLICY"

# device-config.yaml key -> AgentConfig field, and how to read the value
_DEVICE_KEYS = {
    "deviceSplitCount": ("split_count", "int"),
    "deviceMemoryScaling": ("device_memory_scaling", "float"),
    "deviceCoreScaling": ("device_cores_scaling", "float"),
    "disableCoreLimit": ("disable_core_limit", "bool"),
    "libCudaLogLevel": ("libcuda_log_level", "str"),
    "gpuCorePolicy": ("gpu_core_policy", "str"),
    "gpuMemoryFactor": ("gpu_memory_factor", "int"),
    "enableNumaTopology": ("numa_topology", "bool"),
}
# HAMi's NodeDefaultConfig json names (config.json ``nodeconfig`` entries)
_NODE_KEYS = {
    "devicesplitcount": ("split_count", "int"),
    "devicememoryscaling": ("device_memory_scaling", "float"),
    "devicecorescaling": ("device_cores_scaling", "float"),
    "libcudaloglevel": ("libcuda_log_level", "str"),
    "enablenumatopology": ("numa_topology", "bool"),
}
# flag dest -> (AgentConfig field, the peer's environment variable for it)
_FLAG_ENV = {
    "split_count": ("split_count", "DEVICE_SPLIT_COUNT"),
    "device_memory_scaling": ("device_memory_scaling", "DEVICE_MEMORY_SCALING"),
    "device_cores_scaling": ("device_cores_scaling", "DEVICE_CORES_SCALING"),
    "disable_core_limit": ("disable_core_limit", "DISABLE_CORE_LIMIT"),
    "libcuda_log_level": ("libcuda_log_level", ""),
    "gpu_core_policy": ("gpu_core_policy", ""),
    "gpu_memory_factor": ("gpu_memory_factor", ""),
    "numa_topology": ("numa_topology", ""),
}
_TRUE = frozenset({"1", "t", "true"})
_FALSE = frozenset({"0", "f", "false"})


class CoreSettingsError(ValueError):
    """A setting that cannot be read; the message names the file (or variable) and key."""


def _value(raw: object, kind: str, where: str) -> Any:
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE | _FALSE:
            return text in _TRUE
        raise CoreSettingsError(f"{where}: {raw!r} is not true or false")
    if kind == "str":
        if isinstance(raw, (dict, list)) or raw is None:
            raise CoreSettingsError(f"{where}: {raw!r} is not a value")
        return str(raw).strip()
    try:
        if isinstance(raw, bool):
            raise ValueError
        number = float(raw) if kind == "float" else int(str(raw).strip())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        what = "an integer" if kind == "int" else "a number"
        raise CoreSettingsError(f"{where}: {raw!r} is not {what}") from None
    return number


def read_device_config(text: str, *, source: str) -> dict[str, Any]:
    """The AgentConfig fields the ``nvidia:`` section of a device config sets."""
    import yaml  # only when a device config is given: the agent registers before it reads one

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CoreSettingsError(f"{source}: not YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise CoreSettingsError(f"{source}: must be a map with an 'nvidia' section")
    nvidia = data.get("nvidia") or {}
    if not isinstance(nvidia, Mapping):
        raise CoreSettingsError(f"{source}: nvidia must be a map")
    return {field: _value(nvidia[key], kind, f"{source}: nvidia.{key}")
            for key, (field, kind) in _DEVICE_KEYS.items() if nvidia.get(key) is not None}


def read_node_config(text: str, *, node_name: str, source: str) -> dict[str, Any]:
    """The AgentConfig fields this node's ``nodeconfig`` entries of HAMi's config.json set
    (a later entry for the node overrides an earlier one, as HAMi's loop does)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CoreSettingsError(f"{source}: not JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise CoreSettingsError(f"{source}: must be an object with 'nodeconfig'")
    entries = next((v for k, v in data.items() if k.lower() == "nodeconfig"), None) or []
    if not isinstance(entries, list):
        raise CoreSettingsError(f"{source}: nodeconfig must be a list")
    out: dict[str, Any] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise CoreSettingsError(f"{source}: nodeconfig[{i}] must be an object")
        lowered = {str(k).lower(): v for k, v in entry.items()}
        if lowered.get("name") != node_name:
            continue
        for key, (field, kind) in _NODE_KEYS.items():
            if lowered.get(key) is not None:
                out[field] = _value(lowered[key], kind, f"{source}: nodeconfig[{i}].{key}")
    return out


def flag_settings(values: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The AgentConfig fields given on the command line (a value that is not None) or, for
    the flags the peers also read from the environment, by that variable."""
    out: dict[str, Any] = {}
    kinds = {field: kind for field, kind in (*_DEVICE_KEYS.values(), *_NODE_KEYS.values())}
    for dest, (field, variable) in _FLAG_ENV.items():
        value = values.get(dest)
        if value is None and variable and environ.get(variable, "").strip():
            value = _value(environ[variable], kinds[field], f"${variable}")
        if value is not None:
            out[field] = value
    return out


def memory_limit(memory_mib: int, *, profile: str, gpu_memory_factor: int) -> str:
    """``CUDA_DEVICE_MEMORY_LIMIT_<i>`` of a device the annotation gives ``memory_mib``:
    volcano-vgpu registers and schedules memory in units of ``gpuMemoryFactor`` MiB."""
    factor = gpu_memory_factor if profile == "volcano" else 1
    return f"{memory_mib * factor}m"


def hami_core_env(*, profile: str, device_memory_scaling: float, device_cores_scaling: float,
                  disable_core_limit: bool, libcuda_log_level: str, gpu_core_policy: str,
                  container: Mapping[str, Any]) -> dict[str, str]:
    """The switches a vGPU container's HAMi-core gets (see the module docstring)."""
    env: dict[str, str] = {}
    scaling = device_memory_scaling if profile == "hami" else device_cores_scaling
    if scaling > 1:
        env["CUDA_OVERSUBSCRIBE"] = "true"
    if libcuda_log_level:
        env["LIBCUDA_LOG_LEVEL"] = libcuda_log_level
    own = {e.get("name") for e in container.get("env") or [] if isinstance(e, Mapping)}
    if gpu_core_policy and gpu_core_policy != "default" and CORE_LIMIT_SWITCH not in own:
        env[CORE_LIMIT_SWITCH] = gpu_core_policy
    if disable_core_limit:
        env[CORE_LIMIT_SWITCH] = "disable"
    return env
