"""Where ``lahar replay`` finds its input: the shipped sample, and the traces folder's order."""

from __future__ import annotations

import importlib.util
import shutil
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from scheduler.replay.sources import (
    DEFAULT_TRACES,
    SAMPLE_DIR,
    SAMPLE_NODES,
    SAMPLE_PODS,
    TRACES_ENV,
    MissingTraceData,
    find_sources,
)
from scheduler.replay.trace import load_nodes, load_pods
from tests.replay.data import REPO_ROOT, traces_dir


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current directory with no ``../shared/traces`` and no $LAHAR_TRACES_DIR."""
    here = tmp_path / "home" / "user"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    monkeypatch.delenv(TRACES_ENV, raising=False)
    return here


def test_sample_needs_no_traces_folder(nowhere: Path) -> None:
    sources = find_sources(None)
    assert not sources.root.exists()
    assert sources.pod_list("sample") == SAMPLE_PODS
    assert sources.node_list(SAMPLE_PODS) == SAMPLE_NODES


def test_sample_keeps_the_mix_of_default() -> None:
    nodes, pods = load_nodes(SAMPLE_NODES), load_pods(SAMPLE_PODS)
    assert (len(nodes), sum(n.gpus for n in nodes)) == (61, 314)
    kinds = Counter("cpu" if not p.num_gpu else "multi" if p.num_gpu > 1
                    else "share" if p.gpu_milli < 1000 else "one" for p in pods)
    assert kinds == {"one": 194, "share": 163, "cpu": 47, "multi": 4}
    # About the cluster's GPU, as the full trace asks for about its own.
    assert sum(p.total_gpu_milli for p in pods) == 312_460


def test_sample_is_small_declared_as_package_data_and_says_where_it_comes_from() -> None:
    assert sum(p.stat().st_size for p in SAMPLE_DIR.iterdir()) < 100_000
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    declared = pyproject["tool"]["setuptools"]["package-data"]["scheduler.replay"]
    assert sorted(declared) == ["data/*.csv", "data/NOTICE.md"]
    notice = (SAMPLE_DIR / "NOTICE.md").read_text()
    for needed in ("https://github.com/alibaba/clusterdata", "cluster-trace-gpu-v2023",
                   "research or study", "cite the paper", "every 20th",
                   "hack/make_replay_sample.py"):
        assert needed in notice


def test_the_sample_is_made_again_byte_for_byte_from_the_full_trace() -> None:
    folder = traces_dir()
    spec = importlib.util.spec_from_file_location(
        "make_replay_sample", REPO_ROOT / "hack" / "make_replay_sample.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check", "--traces-dir", str(folder)]) == 0


def test_flag_then_environment_then_the_default() -> None:
    both = find_sources("from-flag", {TRACES_ENV: "from-env"})
    assert (both.root, both.origin) == (Path("from-flag"), "--traces-dir")
    env = find_sources(None, {TRACES_ENV: "from-env"})
    assert (env.root, env.origin) == (Path("from-env"), f"${TRACES_ENV}")
    neither = find_sources(None, {})
    assert (neither.root, neither.origin) == (DEFAULT_TRACES, "default")
    assert find_sources(None, {TRACES_ENV: ""}).root == DEFAULT_TRACES


@pytest.mark.parametrize("layout", ["alibaba-gpu-v2023", "cluster-trace-gpu-v2023/csv", "csv",
                                    "."])
def test_the_csvs_are_found_in_our_layout_and_in_a_clone_of_clusterdata(
        tmp_path: Path, layout: str) -> None:
    folder = tmp_path / "traces" / layout
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLE_PODS, folder / "openb_pod_list_tiny.csv")
    shutil.copy(SAMPLE_NODES, folder / "openb_node_list_gpu_node.csv")
    sources = find_sources(str(tmp_path / "traces"))
    pods = sources.pod_list("tiny")
    assert pods == folder / "openb_pod_list_tiny.csv"
    assert sources.node_list(pods) == folder / "openb_node_list_gpu_node.csv"
    assert sources.known_traces() == ["tiny"]


def test_a_missing_trace_says_where_it_looked_and_how_to_get_it(nowhere: Path) -> None:
    with pytest.raises(MissingTraceData) as caught:
        find_sources(None).pod_list("default")
    lines = str(caught.value).splitlines()
    assert lines[:4] == [
        "trace 'default' not found; looked, in order:",
        "  1. --traces-dir: not given",
        f"  2. ${TRACES_ENV}: not set",
        f"  3. ../shared/traces (default, here {nowhere.parent / 'shared' / 'traces'}): "
        "no such folder",
    ]
    advice = " ".join(lines[4:])
    for needed in ("https://github.com/alibaba/clusterdata", "cluster-trace-gpu-v2023",
                   "--traces-dir", TRACES_ENV, "`--trace sample` runs without it"):
        assert needed in advice


def test_a_folder_without_the_trace_lists_what_it_holds(tmp_path: Path) -> None:
    (tmp_path / "alibaba-gpu-v2023").mkdir()
    shutil.copy(SAMPLE_PODS, tmp_path / "alibaba-gpu-v2023" / "openb_pod_list_cpu050.csv")
    with pytest.raises(MissingTraceData) as caught:
        find_sources(None, {TRACES_ENV: str(tmp_path)}).pod_list("nope")
    lines = str(caught.value).splitlines()
    assert lines[1] == "  1. --traces-dir: not given"
    assert lines[2] == (f"  2. {tmp_path} (${TRACES_ENV}): no "
                        f"{tmp_path / 'alibaba-gpu-v2023' / 'openb_pod_list_nope.csv'} "
                        f"(traces there: cpu050)")


def test_a_folder_without_any_csv_names_the_subfolders_looked_in(tmp_path: Path) -> None:
    with pytest.raises(MissingTraceData, match=(
            r"1\. .* \(--traces-dir\): no openb_\*\.csv in alibaba-gpu-v2023/, "
            r"cluster-trace-gpu-v2023/csv/, csv/ or the folder itself")):
        find_sources(str(tmp_path)).pod_list("default")


def test_a_pod_list_given_as_a_path_needs_the_node_list_from_somewhere(nowhere: Path) -> None:
    own = nowhere / "mine.csv"
    shutil.copy(SAMPLE_PODS, own)
    sources = find_sources(None)
    assert sources.pod_list(str(own)) == own
    with pytest.raises(MissingTraceData, match=r"node list openb_node_list_gpu_node\.csv "
                                               r"\(or give --nodes CSV\) not found"):
        sources.node_list(own)
