"""HAMi-core's shared region: the per-container ``.cache`` file its library keeps usage in.

HAMi-core (``libvgpu.so``) maps one file per container, ``CUDA_DEVICE_MEMORY_SHARED_CACHE``,
which the agent places under ``<hook>/vgpu/containers/<pod UID>_<container>/`` on the host.
Every CUDA process of the container records in it, per device, the memory it holds and the SMs
it uses; HAMi's vGPUmonitor reads it to export per-container metrics. The layout read here is
the version-1 region (``majorVersion`` 1) as HAMi's ``pkg/monitor/nvidia/v1/spec.go`` declares
it, a C struct with natural alignment on a 64-bit host:

* header: ``initializedFlag`` (magic 19920718), major, minor, ``smInitFlag`` (int32 each),
  ``ownerPid`` (uint32), a 32-byte semaphore, ``num`` devices (uint64 at 56), 16 UUIDs of 96
  bytes (64), ``limit`` and ``smLimit`` (16 uint64 each, 1600 and 1728);
* 1024 process slots of 1960 bytes from 1856: ``pid``, ``hostpid`` (int32), per device a
  memory record of 8 uint64 (context, module, buffer, offset, total, 3 unused), 16 uint64
  ``monitorused``, per device a utilisation record of 6 uint64 (dec, enc, SM, 3 unused),
  ``status`` and 3 unused uint64;
* then ``procnum``, ``utilizationSwitch``, ``recentKernel``, ``priority`` (int32) and
  ``lastKernelTime`` (int64 at 2008912).

A device's usage is the sum over all slots, as the monitor's ``DeviceMemoryTotal`` and
``DeviceSmUtil`` do. The older version-0 region (a file of 1197897 bytes) is not read.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

__all__ = ["MAGIC", "REGION_SIZE", "DeviceUsage", "RegionError", "RegionUsage", "read_region"]

MAGIC = 19920718
MAX_DEVICES = 16
UUID_BYTES = 96
SLOTS = 1024
OFF_NUM = 56
OFF_UUIDS = 64
OFF_LIMIT = OFF_UUIDS + MAX_DEVICES * UUID_BYTES            # 1600
OFF_SM_LIMIT = OFF_LIMIT + MAX_DEVICES * 8                  # 1728
OFF_PROCS = OFF_SM_LIMIT + MAX_DEVICES * 8                  # 1856
MEMORY_RECORD = 8 * 8
UTIL_RECORD = 6 * 8
SLOT_USED = 8
SLOT_UTIL = SLOT_USED + MAX_DEVICES * MEMORY_RECORD + MAX_DEVICES * 8   # 1160
SLOT_SIZE = SLOT_UTIL + MAX_DEVICES * UTIL_RECORD + 8 + 3 * 8           # 1960
OFF_TAIL = OFF_PROCS + SLOTS * SLOT_SIZE                    # procnum, 2008896
OFF_LAST_KERNEL = OFF_TAIL + 16
REGION_SIZE = OFF_TAIL + 4 * 4 + 8 + 4 * 8                  # 2008952
V0_SIZE = 1197897

_HEADER = struct.Struct("<iii")
_MEMORY = struct.Struct("<5Q")  # context, module, buffer, offset, total
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")


class RegionError(ValueError):
    """A cache file that is not a version-1 HAMi-core region (the message names it)."""


@dataclass(frozen=True, slots=True)
class DeviceUsage:
    index: int
    uuid: str
    """As HAMi's monitor reports it: the first 40 characters."""
    used: int
    """Bytes, all processes."""
    limit: int
    context: int
    module: int
    buffer: int
    sm_util: int


@dataclass(frozen=True, slots=True)
class RegionUsage:
    devices: tuple[DeviceUsage, ...]
    last_kernel_time: int
    """Unix seconds of the last kernel launch (0: none)."""


def _uuid(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("ascii", "replace")[:40]


def parse_region(buffer: bytes | mmap.mmap, *, name: str = "region") -> RegionUsage:
    """The usage recorded in a region's bytes."""
    size = len(buffer)
    if size < _HEADER.size:
        raise RegionError(f"{name}: {size} bytes is too small for a HAMi-core region")
    magic, major, minor = _HEADER.unpack_from(buffer, 0)
    if magic != MAGIC:
        raise RegionError(f"{name}: not initialised by HAMi-core (flag {magic})")
    if size == V0_SIZE or major != 1:
        raise RegionError(f"{name}: region version {major}.{minor} ({size} bytes) is not read; "
                          f"only version 1 is")
    if size < REGION_SIZE:
        raise RegionError(f"{name}: {size} bytes, a version-1 region has {REGION_SIZE}")
    count = min(_U64.unpack_from(buffer, OFF_NUM)[0], MAX_DEVICES)
    totals = [[0] * 6 for _ in range(count)]  # context, module, buffer, offset, total, sm
    for slot in range(SLOTS):
        base = OFF_PROCS + slot * SLOT_SIZE
        for index in range(count):
            memory = _MEMORY.unpack_from(buffer, base + SLOT_USED + index * MEMORY_RECORD)
            row = totals[index]
            for field in range(5):
                row[field] += memory[field]
            row[5] += _U64.unpack_from(buffer, base + SLOT_UTIL + index * UTIL_RECORD + 16)[0]
    devices = []
    for index in range(count):
        uuid = _uuid(bytes(buffer[OFF_UUIDS + index * UUID_BYTES:
                                  OFF_UUIDS + (index + 1) * UUID_BYTES]))
        row = totals[index]
        devices.append(DeviceUsage(index=index, uuid=uuid, used=row[4],
                                   limit=_U64.unpack_from(buffer, OFF_LIMIT + index * 8)[0],
                                   context=row[0], module=row[1], buffer=row[2],
                                   sm_util=row[5]))
    return RegionUsage(devices=tuple(devices),
                       last_kernel_time=_I64.unpack_from(buffer, OFF_LAST_KERNEL)[0])


def read_region(path: str) -> RegionUsage:
    """Map the file read-only and parse it; raises :class:`RegionError` or OSError."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise RegionError(f"{path}: empty (the container has not started CUDA yet)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return parse_region(view, name=path)
