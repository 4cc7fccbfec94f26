"""Which card a pod gets, and how nodes score, under a conf Volcano also accepts.

Each test names the Volcano function whose behaviour it pins down. Lahar's own choices are
reachable only through ``deviceshare.SchedulePolicy`` values and are tested beside them.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.node import node_from_object
from scheduler.api.task import task_from_pod
from scheduler.devices.base import DeviceConfig, Reporter
from scheduler.devices.gpushare import GpuShareFamily
from scheduler.devices.requests import GpuShareRequest
from tests.builders import make_pod, simulate
from tests.devices.conftest import (
    bound_gpu_pod,
    card,
    device_scores,
    devices_of,
    gpu_node,
    gpu_pod,
    gpushare_conf,
    vgpu_conf,
    vgpu_node,
    vgpu_pod,
)

Obj = dict[str, Any]
THREE_CARDS = [card("GPU-0"), card("GPU-1"), card("GPU-2")]


def uuids(run: Any, name: str) -> list[str]:
    return [uuid for container in devices_of(run.pod(name)) for uuid, _, _ in container]


def holder(name: str, uuid: str, *, memory: int) -> Obj:
    """A running vGPU pod on ``n1`` that already holds ``memory`` MiB of card ``uuid``."""
    return make_pod(name, node="n1", phase="Running",
                    limits={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(memory)},
                    annotations={"volcano.sh/vgpu-ids-new": f"{uuid},NVIDIA,{memory},0:;"})


# -- vGPU card order (item: the policy's walk over the cards) ----------------------------------
@pytest.mark.parametrize(
    ("policy", "held", "expected"),
    [
        pytest.param("", [], "GPU-2", id="unset-highest-index-first"),
        pytest.param("", [("GPU-0", 9000)], "GPU-2", id="unset-ignores-usage"),
        pytest.param("binpack", [], "GPU-0", id="binpack-tie-lowest-index"),
        pytest.param("binpack", [("GPU-1", 2000), ("GPU-2", 2000)], "GPU-1",
                     id="binpack-used-memory-then-index"),
        pytest.param("binpack", [("GPU-0", 1000), ("GPU-2", 5000)], "GPU-2",
                     id="binpack-most-used-memory"),
        pytest.param("spread", [("GPU-0", 1000)], "GPU-1", id="spread-fewest-sharers"),
        pytest.param("spread", [("GPU-0", 9000), ("GPU-1", 1000), ("GPU-2", 500)], "GPU-0",
                     id="spread-sharer-tie-by-index-not-memory"),
    ],
)
def test_vgpu_card_order(policy: str, held: list[tuple[str, int]], expected: str) -> None:
    """Volcano vgpu ``sortedDeviceIndicesByPolicy`` as walked by
    ``checkNodeGPUSharingPredicateAndScore``: binpack by used memory (desc) then index, spread
    by sharer count (asc) then index, unset policy from the highest index down; no other
    tie-break."""
    objs: list[Obj] = [vgpu_node("n1", THREE_CARDS)]
    objs += [holder(f"old-{i}", uuid, memory=memory) for i, (uuid, memory) in enumerate(held)]
    objs.append(vgpu_pod("new", memory=1000))
    run = simulate(objs, conf=vgpu_conf(policy=policy), max_cycles=2)
    assert run.node_of("new") == "n1"
    assert uuids(run, "new") == [expected]


def test_vgpu_unset_policy_fills_several_vgpus_from_the_top() -> None:
    """``sortedDeviceIndicesByPolicy`` default branch: a two-vGPU container takes the two
    highest-index cards."""
    run = simulate([vgpu_node("n1", THREE_CARDS), vgpu_pod("p", number=2, memory=1000)],
                   conf=vgpu_conf(policy=""))
    assert uuids(run, "p") == ["GPU-2", "GPU-1"]


@pytest.mark.parametrize(("policy", "scores"), [("", (0, 0)), ("spread", (0, 0)),
                                                ("binpack", (25, 50))])
def test_vgpu_node_score_follows_volcano(policy: str, scores: tuple[int, int]) -> None:
    """vgpu ``GPUScore`` after the tentative charge: binpack 100 x used/total per chosen card;
    spread pays only for a card without sharers, which a charged card never is; unset 0."""
    objs = [vgpu_node("empty", [card("GPU-e", memory=8000)]),
            vgpu_node("n1", [card("GPU-h", memory=8000)]), holder("old", "GPU-h", memory=2000),
            vgpu_pod("p", memory=2000)]
    assert device_scores(objs, conf=vgpu_conf(policy=policy), pod="p",
                         nodes=("empty", "n1")) == scores


@pytest.mark.parametrize(
    ("annotations", "placed"),
    [
        pytest.param({"nvidia.com/use-gputype": "A100", "nvidia.com/nouse-gputype": "A100"},
                     True, id="allow-list-wins-over-deny-list"),
        pytest.param({"nvidia.com/use-gputype": "H100", "nvidia.com/nouse-gputype": "T4"},
                     False, id="allow-list-alone-decides"),
        pytest.param({"nvidia.com/nouse-gputype": "a100"}, False, id="deny-list-without-allow"),
    ],
)
def test_gpu_type_allow_list_ignores_the_deny_list(annotations: dict[str, str],
                                                  placed: bool) -> None:
    """Volcano vgpu ``checkGPUtype``: with ``nvidia.com/use-gputype`` present the deny list
    is never read; matching is a case-insensitive substring of the card type."""
    run = simulate([vgpu_node("n1", [card("GPU-0", kind="NVIDIA-A100")]),
                    vgpu_pod("p", memory=1000, annotations=annotations)], conf=vgpu_conf())
    assert (run.node_of("p") == "n1") is placed


# -- GPU share card choice and score -------------------------------------------------------------
def _gpushare_devices(policy: str, held: list[tuple[int, int]]) -> Any:
    family = GpuShareFamily(DeviceConfig(gpu_sharing=True, policy=policy), Reporter())
    devices = family.build(node_from_object(gpu_node("n1", cards=2, card_memory=16000)))
    assert devices is not None
    for i, (index, memory) in enumerate(held):
        devices.add_task(task_from_pod(bound_gpu_pod(f"old-{i}", node="n1", index=str(index),
                                                     memory=memory)))
    return devices


@pytest.mark.parametrize(
    ("policy", "score"),
    [("", 0.0), ("binpack", 75.0), ("spread", 75.0)],  # spread: card 0, 1 - 4000/16000
)
def test_gpushare_node_score(policy: str, score: float) -> None:
    """gpushare ``GPUDevices.ScoreNode`` returns 0 (no node preference); binpack/spread
    scores are Lahar's, from the chosen card's fullness after placement."""
    devices = _gpushare_devices(policy, [(1, 8000)])
    task = task_from_pod(gpu_pod("p", memory=4000))
    fit = devices.filter_node(task, GpuShareRequest(memory=4000))
    assert fit.status is None and fit.score == score


def test_gpushare_default_first_fit_even_when_a_fuller_card_fits() -> None:
    """gpushare ``predicateGPUbyMemory`` sorts the fitting ids and ``Allocate`` takes ids[0]."""
    devices = _gpushare_devices("", [(0, 2000), (1, 10000)])
    task = task_from_pod(gpu_pod("p", memory=4000))
    annotations = devices.allocate(task, GpuShareRequest(memory=4000), now=0.0)
    assert annotations["volcano.sh/gpu-index"] == "0"
    packed = _gpushare_devices("binpack", [(0, 2000), (1, 10000)])
    assert packed.allocate(task, GpuShareRequest(memory=4000),
                           now=0.0)["volcano.sh/gpu-index"] == "1"


def test_gpushare_binpack_keeps_room_for_a_large_pod() -> None:
    """Why binpack is offered: first fit splits small pods over both cards and a pod needing
    most of a card then waits; packing keeps one card whole."""
    objs = [gpu_node("n1", cards=2, card_memory=16000),
            bound_gpu_pod("old", node="n1", index="1", memory=8000),
            gpu_pod("small", memory=6000, priority=10), gpu_pod("large", memory=14000)]
    first_fit = simulate(objs, conf=gpushare_conf(), max_cycles=3)
    packed = simulate(objs, conf=gpushare_conf(policy="binpack"), max_cycles=3)
    assert first_fit.node_of("small") == "n1" and first_fit.node_of("large") is None
    assert packed.node_of("small") == packed.node_of("large") == "n1"


@pytest.mark.parametrize(("profile", "held"), [("volcano", 4000), ("hami", 3000)])
def test_memory_and_percentage_together(profile: str, held: int) -> None:
    """Both given: Volcano vgpu ``checkNodeGPUSharingPredicateAndScore`` sizes the vGPU by the
    percentage (``MemPercentagereq != 101`` wins), HAMi's NVIDIA ``Fit`` by the MiB."""
    from scheduler.devices.names import PROFILES
    from scheduler.devices.requests import vgpu_request

    names = PROFILES[profile]
    pod = make_pod("p", limits={names.count: "1", names.memory: "3000",
                                names.memory_percentage: "25"})
    request = vgpu_request(task_from_pod(pod), names)
    assert request is not None and request.containers[0] is not None
    assert request.containers[0].memory_on(16000) == held
