"""Builders for device-sharing scenarios: GPU share and vGPU nodes, pods and confs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import structlog

from tests.builders import PACKING_TIERS, conf_of, make_node, make_pod

Obj = dict[str, Any]


@pytest.fixture(autouse=True)
def _fresh_logging() -> None:
    """``lahar`` commands bind structlog to the stream pytest captured for an earlier test;
    device warnings logged later must not write to that closed stream."""
    structlog.reset_defaults()


BASE_TIERS = PACKING_TIERS


def deviceshare_conf(**arguments: Any) -> str:
    """The default tiers plus ``deviceshare`` with ``arguments`` (keys without the prefix)."""
    args = ", ".join(f"deviceshare.{k}: {json.dumps(v)}" for k, v in arguments.items())
    return BASE_TIERS + f"  - {{name: deviceshare, arguments: {{{args}}}}}\n"


def gpushare_conf(*, number: bool = False, policy: str = "", weight: int = 10,
                  lock: bool = False) -> str:
    """GPU share in memory mode, or in whole-card mode with ``number`` (never both: Volcano
    refuses a conf with both switches on)."""
    switch = "GPUNumberEnable" if number else "GPUSharingEnable"
    return deviceshare_conf(**{switch: True}, NodeLockEnable=lock, SchedulePolicy=policy,
                            ScheduleWeight=weight)


def vgpu_conf(*, policy: str = "binpack", weight: int = 10, lock: bool = False,
              profile: str = "volcano") -> str:
    return deviceshare_conf(VGPUEnable=True, NodeLockEnable=lock, SchedulePolicy=policy,
                            ScheduleWeight=weight, VGPUProfile=profile)


# -- GPU share ------------------------------------------------------------------------------
def gpu_node(name: str, *, cards: int = 2, card_memory: int = 16000, cpu: str = "32",
             annotations: Mapping[str, str] | None = None) -> Obj:
    return make_node(name, cpu=cpu, memory="128Gi", annotations=annotations, extra={
        "volcano.sh/gpu-memory": str(cards * card_memory), "volcano.sh/gpu-number": str(cards)})


def gpu_pod(name: str, *, memory: int | str | None = None, number: int | str | None = None,
            **kwargs: Any) -> Obj:
    limits: dict[str, str] = {}
    if memory is not None:
        limits["volcano.sh/gpu-memory"] = str(memory)
    if number is not None:
        limits["volcano.sh/gpu-number"] = str(number)
    return make_pod(name, limits=limits, **kwargs)


def bound_gpu_pod(name: str, *, node: str, index: str, memory: int | None = None,
                  number: int | None = None) -> Obj:
    """A running pod that already holds cards, as a restarted scheduler finds it."""
    return gpu_pod(name, memory=memory, number=number, node=node, phase="Running",
                   annotations={"volcano.sh/gpu-index": index,
                                "volcano.sh/predicate-time": "1"})


# -- vGPU -----------------------------------------------------------------------------------
def register(cards: Sequence[tuple[str, int, int, str, str]]) -> str:
    """Volcano's register annotation from ``(uuid, split, MiB, type, mode)`` entries."""
    return "".join(f"{u},{split},{mem},{kind},true,{mode}:"
                   for u, split, mem, kind, mode in cards)


def vgpu_node(name: str, cards: Sequence[tuple[str, int, int, str, str]] = (),
              *, text: str | None = None, cpu: str = "32", slots: int | None = None) -> Obj:
    slots = slots or sum(c[1] for c in cards) or 10
    memory = sum(c[2] for c in cards) or 40000
    return make_node(name, cpu=cpu, memory="128Gi",
                     annotations={"volcano.sh/node-vgpu-register":
                                  text if text is not None else register(cards)},
                     extra={"volcano.sh/vgpu-number": str(slots),
                            "volcano.sh/vgpu-memory": str(memory),
                            "volcano.sh/vgpu-cores": str(100 * max(len(cards), 1))})


def card(uuid: str, *, split: int = 10, memory: int = 16000, kind: str = "NVIDIA-A100",
         mode: str = "hami-core") -> tuple[str, int, int, str, str]:
    return (uuid, split, memory, kind, mode)


def vgpu_pod(name: str, *, number: int | None = 1, memory: int | None = None,
             percentage: int | None = None, cores: int | str | None = None,
             annotations: Mapping[str, str] | None = None, **kwargs: Any) -> Obj:
    limits: dict[str, str] = {}
    for key, value in (("volcano.sh/vgpu-number", number), ("volcano.sh/vgpu-memory", memory),
                       ("volcano.sh/vgpu-memory-percentage", percentage),
                       ("volcano.sh/vgpu-cores", cores)):
        if value is not None:
            limits[key] = str(value)
    return make_pod(name, limits=limits, annotations=annotations, **kwargs)


def devices_of(pod: Obj, key: str = "volcano.sh/vgpu-ids-new") -> list[list[tuple[str, int, int]]]:
    """``[[(uuid, MiB, cores), ...] per container]`` from a pod's vGPU annotation."""
    text = pod["metadata"]["annotations"][key]
    out = []
    for container in text.split(";"):
        out.append([(f[0], int(f[2]), int(f[3]))
                    for f in (e.split(",") for e in container.split(":") if e)])
    return out


# -- one session, looked at from inside ----------------------------------------------------------
def device_session(objs: Sequence[Obj], *, conf: str) -> tuple[Any, Any]:
    """``(session, deviceshare plugin)`` of the first cycle over ``objs`` (nothing placed)."""
    from scheduler.cluster.manifests import Manifest
    from scheduler.cluster.simulation import build_simulation

    _, _, scheduler = build_simulation([Manifest(f"t#{i}", o) for i, o in enumerate(objs)],
                                       conf=conf_of(conf))
    session = scheduler.open_session()
    plugin = next(e.plugin for e in session.plugin_entries()
                  if getattr(e.plugin, "NAME", "") == "deviceshare")
    return session, plugin


def session_task(session: Any, name: str) -> Any:
    return next(t for job in session.jobs.values() for t in job.tasks.values()
                if t.name == name)


def device_scores(objs: Sequence[Obj], *, conf: str, pod: str,
                  nodes: Sequence[str]) -> tuple[float, ...]:
    """The deviceshare node score (before ``ScheduleWeight``) of ``pod`` on each of ``nodes``."""
    import numpy as np

    session, plugin = device_session(objs, conf=conf)
    task = session_task(session, pod)
    for node in nodes:
        assert plugin.check_node(task, session.nodes[node]) is None, node
    rows = np.array([session.nodes[node].index for node in nodes])
    scores = plugin.score_nodes(task, session.table, rows) / plugin.config.weight
    return tuple(float(score) for score in scores)
