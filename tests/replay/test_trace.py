"""Loading the Alibaba GPU trace and building a run's pod sequence (FGD paper §B.1/§B.6)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from scheduler.replay.trace import (
    TraceError,
    TracePod,
    generate_workload,
    load_nodes,
    load_pods,
    resolve_trace,
    trace_name,
)
from tests.replay.data import alibaba_dir, trace_files

POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def write(tmp_path: Path, text: str, name: str = "pods.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def pod(name: str, *, cpu: int = 1000, num: int = 1, milli: int = 500) -> TracePod:
    return TracePod(name=name, cpu_milli=cpu, memory_mib=1024, num_gpu=num, gpu_milli=milli)


# --- the real files -------------------------------------------------------------------------


def test_gpu_node_list_has_the_1213_nodes_and_6212_cards() -> None:
    nodes = load_nodes(alibaba_dir() / "openb_node_list_gpu_node.csv")
    assert len(nodes) == 1213
    assert sum(n.gpus for n in nodes) == 6212
    per_model = Counter()
    for n in nodes:
        per_model[n.model] += n.gpus
    assert per_model["G2"] == 4392 and per_model["T4"] == 842 and per_model["A10"] == 2
    assert nodes[0].name == "openb-node-0000" and nodes[0].model == "P100"
    assert (nodes[0].cpu_milli, nodes[0].memory_mib, nodes[0].gpus) == (64000, 262144, 2)


def test_all_node_list_keeps_cpu_nodes_only_when_asked() -> None:
    path = alibaba_dir() / "openb_node_list_all_node.csv"
    assert len(load_nodes(path)) == 1213
    everything = load_nodes(path, gpu_only=False)
    assert len(everything) == 1523
    assert sum(1 for n in everything if not n.gpus and not n.model) == 310


def test_default_pod_list_rows_and_totals() -> None:
    pods = load_pods(alibaba_dir() / "openb_pod_list_default.csv")
    assert len(pods) == 8152
    assert pods[0] == TracePod("openb-pod-0000", 12000, 16384, 1, 1000)
    assert pods[1] == TracePod("openb-pod-0001", 6000, 12288, 1, 460)
    assert sum(p.total_gpu_milli for p in pods) == 6_086_800
    assert sum(1 for p in pods if p.num_gpu == 0) == 1088
    assert sum(1 for p in pods if p.shape.is_share) == 3078
    assert sum(1 for p in pods if p.num_gpu > 1) == 75
    assert min(p.cpu_milli for p in pods) == 1000
    assert all(not p.gpu_spec for p in pods)


def test_pod_list_without_gpu_spec_column_loads() -> None:
    pods = load_pods(alibaba_dir() / "openb_pod_list_multigpu20.csv")
    assert len(pods) == 8324
    assert sum(1 for p in pods if p.num_gpu > 1) == 247


def test_resolve_trace_by_name_and_by_path(tmp_path: Path) -> None:
    base = alibaba_dir()
    path = resolve_trace("cpu050", traces_dir=base)
    assert path.name == "openb_pod_list_cpu050.csv" and trace_name(path) == "cpu050"
    assert resolve_trace(str(path), traces_dir=tmp_path) == path
    with pytest.raises(TraceError, match=r"no trace named 'nope'; known: .*default"):
        resolve_trace("nope", traces_dir=base)


# --- bad input names file, line and column --------------------------------------------------


@pytest.mark.parametrize(
    ("row", "line_and_column", "message"),
    [
        ("p1,x,10,1,500,,,,,,", ":2 column 'cpu_milli'", "'x' is not an integer"),
        ("p1,1000,10,1,1500,,,,,,", ":2 column 'gpu_milli'", "above 1000"),
        ("p1,1000,10,2,500,,,,,,", ":2 column 'gpu_milli'", "whole cards"),
        ("p1,1000,10,0,500,,,,,,", ":2 column 'gpu_milli'", "without GPUs"),
        ("p1,1000,10,1,0,,,,,,", ":2 column 'gpu_milli'", "0 milli"),
        ("p1,1000,-5,1,100,,,,,,", ":2 column 'memory_mib'", "below 0"),
        ("p1,1000,10,0,0,T4,,,,,", ":2 column 'gpu_spec'", "names GPU models"),
        ("p1,1000,10", ":2", "wrong number of fields"),
    ],
    ids=["not-int", "milli-too-big", "multi-share", "cpu-with-milli", "gpu-without-milli",
         "negative", "cpu-with-spec", "short-row"],
)
def test_bad_pod_rows_name_file_line_and_column(
    tmp_path: Path, row: str, line_and_column: str, message: str
) -> None:
    path = write(tmp_path, POD_HEADER + row + "\n")
    with pytest.raises(TraceError, match=message) as caught:
        load_pods(path)
    assert f"{path}{line_and_column}" in str(caught.value)


def test_duplicate_pod_and_missing_column(tmp_path: Path) -> None:
    path = write(tmp_path, POD_HEADER + "p1,1000,1,0,0,,,,,,\np1,1000,1,0,0,,,,,,\n")
    with pytest.raises(TraceError, match=r":3 column 'name': pod 'p1' listed twice"):
        load_pods(path)
    path = write(tmp_path, "name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n", "short.csv")
    with pytest.raises(TraceError, match=r"short.csv:1: header lacks column\(s\) gpu_milli"):
        load_pods(path)
    with pytest.raises(TraceError, match="cannot read"):
        load_pods(tmp_path / "absent.csv")


def test_gpu_spec_is_parsed_into_models(tmp_path: Path) -> None:
    path = write(tmp_path, POD_HEADER + "p1,1000,1,1,500,V100M16|V100M32,LS,Running,0,1,0\n")
    (loaded,) = load_pods(path)
    assert loaded.gpu_spec == frozenset({"V100M16", "V100M32"})
    assert loaded.spec_text == "V100M16|V100M32"
    assert loaded.shape.gpu_spec == loaded.gpu_spec


def test_bad_node_rows(tmp_path: Path) -> None:
    header = "sn,cpu_milli,memory_mib,gpu,model\n"
    path = write(tmp_path, header + "n1,1000,10,2,\n", "nodes.csv")
    with pytest.raises(TraceError, match=r"nodes.csv:2 column 'model': node 'n1' has 2 GPU"):
        load_nodes(path)
    path = write(tmp_path, header + "n1,1000,10,0,nan\n", "cpu.csv")
    with pytest.raises(TraceError, match="no usable nodes"):
        load_nodes(path)


# --- workload generation --------------------------------------------------------------------


def test_same_seed_same_sequence_other_seed_other_order() -> None:
    pods = [pod(f"p{i:02d}", milli=100 * (1 + i % 9)) for i in range(40)]
    first = generate_workload(pods, capacity_gpu_milli=20_000, tune=1.3, rng=random.Random(42))
    again = generate_workload(list(reversed(pods)), capacity_gpu_milli=20_000, tune=1.3,
                              rng=random.Random(42))
    other = generate_workload(pods, capacity_gpu_milli=20_000, tune=1.3, rng=random.Random(43))
    assert [p.name for p in first.pods] == [p.name for p in again.pods]
    assert [p.name for p in first.pods] != [p.name for p in other.pods]
    assert [p.name for p in first.original] == sorted(p.name for p in pods)


def test_tune_up_appends_resamples_until_the_next_would_pass() -> None:
    pods = [pod(f"p{i:02d}", milli=10 * (1 + i)) for i in range(30)]
    capacity, tune = 10_000, 1.3
    work = generate_workload(pods, capacity_gpu_milli=capacity, tune=tune, rng=random.Random(7))
    head, tail = work.pods[: len(pods)], work.pods[len(pods):]
    assert sorted(p.name for p in head) == sorted(p.name for p in pods)
    assert tail and [p.name.rsplit("-tuned-", 1)[1] for p in tail] == [
        str(i) for i in range(len(tail))]
    running = sum(p.total_gpu_milli for p in head)
    for clone in tail:
        assert running + clone.gpu_milli <= tune * capacity
        running += clone.total_gpu_milli
    assert work.total_gpu_milli == running <= tune * capacity
    # The sampler stopped on a sample that did not fit: even the smallest left some room.
    assert work.total_gpu_milli > tune * capacity - max(p.gpu_milli for p in pods)


def test_tune_up_tests_a_resample_by_its_per_card_milli() -> None:
    """As ``tuneUpPods`` of the reference simulator: an 8-card clone is let in when its
    per-card milli (1000) still fits, so the run may end above the line."""
    eight = TracePod("big", 8000, 1, 8, 1000)
    work = generate_workload([eight], capacity_gpu_milli=10_000, tune=1.0, rng=random.Random(1))
    assert [p.name for p in work.pods] == ["big", "big-tuned-0"]
    assert work.total_gpu_milli == 16_000


def test_tune_down_drops_random_pods_until_at_or_below_the_line() -> None:
    pods = [pod(f"p{i:02d}", num=1, milli=1000) for i in range(50)]
    work = generate_workload(pods, capacity_gpu_milli=30_000, tune=1.3, rng=random.Random(3))
    assert work.total_gpu_milli == 39_000
    assert len(work.pods) == 39 and len({p.name for p in work.pods}) == 39
    assert len(work.original) == 50


def test_no_tuning_keeps_the_shuffled_trace_and_cpu_only_traces_cannot_tune() -> None:
    pods = [pod(f"p{i}") for i in range(10)]
    work = generate_workload(pods, capacity_gpu_milli=1000, tune=0, rng=random.Random(1))
    assert sorted(p.name for p in work.pods) == sorted(p.name for p in pods)
    with pytest.raises(ValueError, match="asks for no GPU"):
        generate_workload([pod("c", num=0, milli=0)], capacity_gpu_milli=1000, tune=1.3,
                          rng=random.Random(1))


@pytest.mark.parametrize(("trace", "at_least"), [("default", 10_000), ("sample", 500)])
def test_trace_is_tuned_to_130_percent(trace: str, at_least: int) -> None:
    files = trace_files(trace)
    pods = load_pods(files.pods)
    capacity = 1000 * files.cards
    work = generate_workload(pods, capacity_gpu_milli=capacity, tune=1.3, rng=random.Random(42))
    assert 1.3 * capacity - 1000 < work.total_gpu_milli <= 1.3 * capacity + 7000
    assert len(work.pods) > at_least and work.pods[len(pods)].name.endswith("-tuned-0")


def test_a_missing_traces_folder_is_named_instead_of_an_empty_list(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"no such folder .*--traces-dir"):
        resolve_trace("default", traces_dir=tmp_path / "absent")
