"""GPU share and GPU number through the embedded cluster: card choice, annotations, reasons."""

from __future__ import annotations

import pytest

from scheduler.cluster.sim import EPOCH
from tests.builders import gang, make_podgroup, simulate
from tests.devices.conftest import bound_gpu_pod, gpu_node, gpu_pod, gpushare_conf

GPU_INDEX = "volcano.sh/gpu-index"


def index_of(run: object, name: str) -> str:
    return run.pod(name)["metadata"]["annotations"].get(GPU_INDEX, "")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("policy", "held", "expected"),
    [
        pytest.param("", [], "0", id="default-empty-cards-lowest-index"),
        pytest.param("", [("0", 4000), ("1", 10000)], "0", id="default-first-fit-not-fullest"),
        pytest.param("", [("0", 14000)], "1", id="default-skips-card-too-full"),
        pytest.param("binpack", [("0", 4000), ("1", 10000)], "1", id="binpack-fullest"),
        pytest.param("binpack", [], "0", id="binpack-empty-cards-lowest-index"),
        pytest.param("binpack", [("1", 10000)], "1", id="binpack-fullest-after-placement"),
        pytest.param("binpack", [("0", 14000)], "1", id="binpack-skips-card-too-full"),
        pytest.param("binpack", [("0", 4000), ("1", 4000)], "0", id="binpack-tie-lowest-index"),
        pytest.param("spread", [("0", 10000)], "1", id="spread-emptiest"),
        pytest.param("spread", [("0", 2000), ("1", 2000)], "0", id="spread-tie-lowest-index"),
    ],
)
def test_memory_mode_card_choice(policy: str, held: list[tuple[str, int]], expected: str) -> None:
    """Unset policy: Volcano's ``predicateGPUbyMemory`` (sorted fitting ids, the allocation
    takes ``ids[0]``) in gpushare ``GPUDevices.Allocate``; binpack/spread are ours, opt-in."""
    objs = [gpu_node("n1", cards=2, card_memory=16000)]
    objs += [bound_gpu_pod(f"old-{i}", node="n1", index=index, memory=memory)
             for i, (index, memory) in enumerate(held)]
    objs.append(gpu_pod("new", memory=4000))
    run = simulate(objs, conf=gpushare_conf(policy=policy))
    assert run.node_of("new") == "n1"
    assert index_of(run, "new") == expected
    annotations = run.pod("new")["metadata"]["annotations"]
    assert annotations["volcano.sh/predicate-time"] == str(int(EPOCH) * 1_000_000_000)


def test_binpack_and_spread_choose_nodes_by_card_fullness() -> None:
    objs = [gpu_node("big", cards=1, card_memory=32000), gpu_node("small", cards=1,
                                                                  card_memory=8000)]
    packed = simulate([*objs, gpu_pod("p", memory=6000)], conf=gpushare_conf(policy="binpack"))
    spread = simulate([*objs, gpu_pod("p", memory=6000)], conf=gpushare_conf(policy="spread"))
    assert packed.node_of("p") == "small"
    assert spread.node_of("p") == "big"


def test_number_mode_takes_fully_idle_cards_comma_separated() -> None:
    objs = [gpu_node("n1", cards=4, card_memory=8000),
            bound_gpu_pod("sharer", node="n1", index="1", memory=1000),
            gpu_pod("whole", number=2)]
    run = simulate(objs, conf=gpushare_conf(number=True))
    assert index_of(run, "whole") == "0,2"


def test_number_mode_without_enough_idle_cards_waits_with_reason() -> None:
    objs = [gpu_node("n1", cards=2, card_memory=8000),
            bound_gpu_pod("sharer", node="n1", index="0", memory=1000),
            gpu_pod("whole", number=2)]
    run = simulate(objs, conf=gpushare_conf(number=True))
    assert run.node_of("whole") is None
    assert "GpuNumber no enough gpu number" in run.reason("whole")
    assert "fewer than 2 idle GPU card(s)" in run.reason("whole")


def test_unhealthy_cards_are_never_chosen() -> None:
    node = gpu_node("n1", cards=3, card_memory=8000,
                    annotations={"volcano.sh/gpu-unhealthy-ids": "0,2"})
    shared = simulate([node, gpu_pod("a", memory=1000), gpu_pod("b", memory=1000)],
                      conf=gpushare_conf())
    assert index_of(shared, "a") == index_of(shared, "b") == "1"
    whole = simulate([node, gpu_pod("w1", number=1), gpu_pod("w2", number=1)],
                     conf=gpushare_conf(number=True))
    placed = [name for name in ("w1", "w2") if whole.node_of(name)]
    assert len(placed) == 1 and index_of(whole, placed[0]) == "1"
    waiting = "w2" if placed == ["w1"] else "w1"
    assert "fewer than 1 idle GPU card(s)" in whole.reason(waiting)


def test_recorded_index_beyond_card_count_is_reported_and_never_reused() -> None:
    # The node had 4 cards when "ghost" was placed on card 3; it now reports 2.
    objs = [gpu_node("n1", cards=2, card_memory=8000),
            bound_gpu_pod("ghost", node="n1", index="3", memory=4000),
            gpu_pod("a", memory=6000), gpu_pod("b", memory=6000), gpu_pod("c", memory=6000)]
    run = simulate(objs, conf=gpushare_conf())
    assert run.node_of("ghost") == "n1"  # the pod is kept as it is
    warnings = run.events("GPUIndexOutOfRange")
    assert len(warnings) == 1
    message = warnings[0]["message"]
    assert warnings[0]["type"] == "Warning"
    assert "default/ghost" in message and "n1" in message and "index 3" in message
    assert warnings[0]["involvedObject"]["name"] == "ghost"
    indices = sorted(index_of(run, name) for name in ("a", "b", "c") if run.node_of(name))
    assert indices == ["0", "1"]  # two fit, the third waits; card 3 is never handed out


def test_memory_bigger_than_any_card_has_a_clear_reason() -> None:
    run = simulate([gpu_node("n1", cards=2, card_memory=16000), gpu_pod("big", memory=20000)],
                   conf=gpushare_conf())
    assert run.node_of("big") is None
    assert run.reason("big") == (
        "0/1 nodes are unavailable: 1 GpuShare no enough gpu memory: 20000 "
        "volcano.sh/gpu-memory is more than one card of the node holds.")


def test_no_card_with_enough_free_memory_names_the_node() -> None:
    objs = [gpu_node("n1", cards=2, card_memory=16000),
            bound_gpu_pod("a", node="n1", index="0", memory=12000),
            bound_gpu_pod("b", node="n1", index="1", memory=12000),
            gpu_pod("late", memory=8000)]
    run = simulate(objs, conf=gpushare_conf())
    assert run.node_of("late") is None
    assert "no card of the node has 8000 volcano.sh/gpu-memory free" in run.reason("late")


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        pytest.param({"memory": "1.5"}, "'1.5' must be a whole number", id="fraction-memory"),
        pytest.param({"number": "0.5"}, "'0.5' must be a whole number", id="fraction-number"),
    ],
)
def test_unusable_gpu_request_is_unschedulable_with_reason(limits: dict, words: str) -> None:
    run = simulate([gpu_node("n1"), gpu_pod("bad", **limits)],
                   conf=gpushare_conf(number="number" in limits))
    assert run.node_of("bad") is None
    reason = run.reason("bad")
    assert reason.startswith("0/1 nodes are unavailable: pod default/bad")
    assert words in reason


def test_node_lock_serialises_device_pods_and_all_get_placed() -> None:
    pods = [gpu_pod(f"p{i}", memory=2000) for i in range(4)]
    run = simulate([gpu_node("n1", cards=1, card_memory=16000), *pods],
                   conf=gpushare_conf(lock=True))
    assert all(run.node_of(f"p{i}") == "n1" for i in range(4))
    # one per cycle: each placement waited for the node side to release the lock
    assert len({run.pod(f"p{i}")["metadata"]["annotations"]["volcano.sh/predicate-time"]
                for i in range(4)}) == 4
    assert all(run.pod(f"p{i}")["metadata"]["annotations"]["volcano.sh/gpu-assigned"] == "true"
               for i in range(4))
    assert "gpu" not in run.cluster.objects["Node"]["n1"]["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("age", "placed"),
    [pytest.param(60, False, id="fresh-lock-blocks"), pytest.param(600, True, id="stale-lock")],
)
def test_lock_held_on_the_node(age: int, placed: bool) -> None:
    from scheduler.devices.node.nodelock import format_lock

    node = gpu_node("n1", annotations={"gpu": format_lock(EPOCH - age)})
    run = simulate([node, gpu_pod("p", memory=1000)], conf=gpushare_conf(lock=True),
                   max_cycles=3)
    assert (run.node_of("p") == "n1") is placed
    if not placed:
        assert "node n1 has been locked within 5 minutes" in run.reason("p")


def test_number_mode_takes_no_lock() -> None:
    run = simulate([gpu_node("n1", cards=4), gpu_pod("a", number=1), gpu_pod("b", number=1)],
                   conf=gpushare_conf(number=True, lock=True), max_cycles=1)
    assert run.node_of("a") == run.node_of("b") == "n1"


def test_rollback_of_a_gang_that_does_not_fit_leaves_its_cards_free() -> None:
    objs = [gpu_node("n1", cards=1, card_memory=16000),
            *gang("pair", 2, limits={"volcano.sh/gpu-memory": "10000"}),
            make_podgroup("solo"), gpu_pod("whole-card", memory=16000, group="solo")]
    run = simulate(objs, conf=gpushare_conf(), max_cycles=1)
    assert run.node_of("pair-task-0") is None and run.node_of("pair-task-1") is None
    assert run.node_of("whole-card") == "n1"
    assert index_of(run, "whole-card") == "0"
    assert GPU_INDEX not in run.pod("pair-task-0")["metadata"]["annotations"]
