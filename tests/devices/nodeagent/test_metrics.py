"""``/metrics``: HAMi-core's shared region read as HAMi's vGPUmonitor reads it.

The synthetic cache file is built with ctypes from the struct HAMi declares in
``pkg/monitor/nvidia/v1/spec.go`` (``sharedRegionT``, ``shrregProcSlotT``, ``deviceMemory``,
``deviceUtilization``), so its offsets come from C's alignment rules, not from the parser's
constants. The loader follows ``pkg/monitor/nvidia/cudevshr.go`` ``loadCache`` (magic
19920718, major version 1; directories ``<pod UID>_<container>`` under ``containers``) and the
names and labels ``cmd/vGPUmonitor/metrics.go`` exports (``hami_vgpu_memory_used_bytes`` …,
labels ``namespace, pod, container, vdevice_index, device_uuid``; the UUID cut to 40
characters; ``DeviceMemoryTotal`` and ``DeviceSmUtil`` summed over all process slots).
"""

from __future__ import annotations

import ctypes
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from scheduler.devices.node.metrics import HostGpuStat, MetricsServer, VgpuCollector
from scheduler.devices.node.sharedregion import REGION_SIZE, RegionError, read_region
from tests.devices.nodeagent.cluster import pod

U64 = ctypes.c_uint64
UUID_A = "GPU-11111111-2222-3333-4444-555555555555"
UUID_B = "GPU-66666666-7777-8888-9999-000000000000"


class DeviceMemory(ctypes.Structure):
    _fields_ = [("context", U64), ("module", U64), ("buffer", U64), ("offset", U64),
                ("total", U64), ("unused", U64 * 3)]


class DeviceUtil(ctypes.Structure):
    _fields_ = [("dec", U64), ("enc", U64), ("sm", U64), ("unused", U64 * 3)]


class Slot(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_int32), ("hostpid", ctypes.c_int32),
                ("used", DeviceMemory * 16), ("monitorused", U64 * 16),
                ("util", DeviceUtil * 16), ("status", ctypes.c_int32), ("unused", U64 * 3)]


class Region(ctypes.Structure):
    _fields_ = [("initialized", ctypes.c_int32), ("major", ctypes.c_int32),
                ("minor", ctypes.c_int32), ("sm_init", ctypes.c_int32),
                ("owner_pid", ctypes.c_uint32), ("sem", ctypes.c_char * 32), ("num", U64),
                ("uuids", (ctypes.c_char * 96) * 16), ("limit", U64 * 16),
                ("sm_limit", U64 * 16), ("procs", Slot * 1024), ("procnum", ctypes.c_int32),
                ("utilization_switch", ctypes.c_int32), ("recent_kernel", ctypes.c_int32),
                ("priority", ctypes.c_int32), ("last_kernel", ctypes.c_int64),
                ("unused", U64 * 4)]


def region(*, last_kernel: int = 0, major: int = 1, magic: int = 19920718) -> Region:
    r = Region()
    r.initialized, r.major, r.minor, r.num = magic, major, 1, 2
    r.uuids[0].value = (UUID_A + "-tail-after-forty").encode()
    r.uuids[1].value = UUID_B.encode()
    r.limit[0], r.limit[1] = 4 * 2**30, 2 * 2**30
    # two processes on device 0, one of them also on device 1; slot 900 to check the sum
    for slot, pid, total, sm in ((0, 10, 1 * 2**30, 20), (900, 11, 2 * 2**30, 15)):
        proc = r.procs[slot]
        proc.pid = pid
        proc.used[0].context, proc.used[0].module = 10, 20
        proc.used[0].buffer, proc.used[0].total = 30, total
        proc.util[0].sm = sm
    r.procs[0].used[1].total = 512 * 2**20
    r.procs[0].util[1].sm = 7
    r.last_kernel = last_kernel
    return r


def write(directory: Path, data: Region | bytes, name: str = "c0ffee.cache") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(bytes(data))
    return path


def test_layout_matches_the_c_struct() -> None:
    assert ctypes.sizeof(Region) == REGION_SIZE == 2008952
    assert Region.num.offset == 56 and Region.procs.offset == 1856
    assert ctypes.sizeof(Slot) == 1960 and Region.last_kernel.offset == 2008912


def test_region_sums_every_process_slot(tmp_path: Path) -> None:
    usage = read_region(str(write(tmp_path, region(last_kernel=1_700_000_000))))
    first, second = usage.devices
    assert (first.index, first.uuid, first.used, first.limit) == (0, UUID_A, 3 * 2**30, 4 * 2**30)
    assert (first.context, first.module, first.buffer, first.sm_util) == (20, 40, 60, 35)
    assert (second.uuid, second.used, second.sm_util) == (UUID_B, 512 * 2**20, 7)
    assert usage.last_kernel_time == 1_700_000_000


@pytest.mark.parametrize(("data", "message"), [
    (region(magic=7), "not initialised by HAMi-core"),
    (region(major=2), "region version 2.1"),
    (bytes(region())[:4096], "4096 bytes, a version-1 region has 2008952"),
    (b"\0\0", "too small"),
])
def test_unreadable_regions_name_the_file_and_problem(tmp_path: Path, data: Any,
                                                      message: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(RegionError, match=message) as caught:
        read_region(str(path))
    assert str(path) in str(caught.value)


def scrape(collector: VgpuCollector) -> str:
    server = MetricsServer(collector=collector, address="127.0.0.1:0")
    server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as r:
            return str(r.read().decode())
    finally:
        server.stop()


def test_metrics_endpoint_serves_hami_names_per_container(tmp_path: Path) -> None:
    containers = tmp_path / "vgpu" / "containers"
    write(containers / "uid-train_main", region(last_kernel=990))
    write(containers / "uid-train_side", b"broken")         # counted, not fatal
    write(containers / "uid-gone_main", region())            # pod no longer on the node
    (containers / "uid-train_init").mkdir()                  # no CUDA call yet
    pods = [pod("train", containers=[("main", {}), ("side", {})])]
    host = [HostGpuStat(index=0, uuid=UUID_A, type="NVIDIA-A100", memory_used=5 * 2**30,
                        utilization=40)]
    text = scrape(VgpuCollector(containers_dir=str(containers), pods=lambda: pods,
                                host=lambda: host, clock=lambda: 1000.0))
    labels = (f'container="main",device_uuid="{UUID_A}",namespace="ml",pod="train",'
              f'vdevice_index="0"')
    for line in (f"hami_vgpu_memory_used_bytes{{{labels}}} 3.221225472e+09",
                 f"hami_vgpu_memory_limit_bytes{{{labels}}} 4.294967296e+09",
                 f"hami_container_device_memory_bytes{{{labels}}} 3.221225472e+09",
                 f"hami_container_device_utilization_ratio{{{labels}}} 35.0",
                 f"hami_vgpu_memory_context_bytes{{{labels}}} 20.0",
                 f"hami_vgpu_memory_module_bytes{{{labels}}} 40.0",
                 f"hami_vgpu_memory_buffer_bytes{{{labels}}} 60.0",
                 f"hami_container_last_kernel_elapsed_seconds{{{labels}}} 10.0",
                 'hami_host_gpu_memory_used_bytes{device_index="0",device_type="NVIDIA-A100",'
                 f'device_uuid="{UUID_A}"}} 5.36870912e+09',
                 'hami_host_gpu_utilization_ratio{device_index="0",device_type="NVIDIA-A100",'
                 f'device_uuid="{UUID_A}"}} 40.0',
                 "lahar_nodeagent_region_errors_total 1.0"):
        assert line in text, line
    assert 'vdevice_index="1"' in text and 'pod="gone"' not in text
    assert "uid-gone" not in text and 'container="side"' not in text
