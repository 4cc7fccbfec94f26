"""``lahar replay`` end to end: the shipped sample from a directory with no traces folder, and
the first 500 pods of ``default`` where the full trace is present."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler.commands.cli import main
from scheduler.commands.replay import parse_seeds
from scheduler.replay.batch import Progress
from scheduler.replay.bound import read_bound_csv
from scheduler.replay.metrics import SUMMARY_LEVELS
from scheduler.replay.sources import SAMPLE_NODES, SAMPLE_PODS, TRACES_ENV
from scheduler.replay.trace import load_nodes, load_pods
from tests.replay.checker import replay
from tests.replay.data import alibaba_dir, traces_dir

HAS_SCIPY = importlib.util.find_spec("scipy") is not None
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@dataclass(frozen=True, slots=True)
class SampleRun:
    out: Path
    code: int
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SampleRun]:
    """``lahar replay --trace sample --bound`` (the bound where scipy is installed) run from an
    empty directory, with neither ``../shared/traces`` nor $LAHAR_TRACES_DIR to find."""
    here = tmp_path_factory.mktemp("user") / "somewhere"
    here.mkdir()
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(here)
        patch.delenv(TRACES_ENV, raising=False)
        argv = ["replay", "--trace", "sample", "--seeds", "42", "--jobs", "1", "--out", "out"]
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main([*argv, "--bound"] if HAS_SCIPY else argv)
    yield SampleRun(here / "out", code, stdout.getvalue(), stderr.getvalue())


def test_sample_runs_without_a_traces_folder(sample_run: SampleRun) -> None:
    assert sample_run.code == 0, sample_run.stderr
    assert sorted(p.name for p in sample_run.out.iterdir()) == sorted(
        ["sample-fgd-42.csv", "summary.csv"] + (["bound.csv"] if HAS_SCIPY else [])
        + (["replay.png"] if HAS_MATPLOTLIB else []))
    # stderr is not a terminal: no bar, one line for the one finished run.
    (line,) = sample_run.stderr.splitlines()
    assert line.startswith("replay: 1/1 runs done (sample-fgd-42.csv), ")
    if HAS_MATPLOTLIB:
        assert "note: replay.png has no curves of the paper" in sample_run.stdout
        assert (sample_run.out / "replay.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "replay.png skipped" in sample_run.stdout


def test_sample_fills_its_cluster_past_every_summary_level(sample_run: SampleRun) -> None:
    with (sample_run.out / "summary.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["arrived_pct"]) for r in rows] == list(SUMMARY_LEVELS)
    by_level = {int(r["arrived_pct"]): r for r in rows}
    # Below the cluster's size almost every pod fits; past it pods fail.
    assert float(by_level[95]["unallocated_pct_median"]) < 10
    assert float(by_level[130]["failed_pods_median"]) > float(by_level[100]["failed_pods_median"])


def test_sample_run_csv_is_the_reference_loops(sample_run: SampleRun) -> None:
    """Every bucket of the scheduler's run, 0 to 130 % arrived, as the reference loop (the
    policy functions alone, tests/replay/checker.py) computes it."""
    with (sample_run.out / "sample-fgd-42.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    reference = replay(nodes=load_nodes(SAMPLE_NODES), pods=load_pods(SAMPLE_PODS),
                       policy="fgd", seed=42)
    expected = [["sample", "fgd", "42", str(r.arrived_pct), f"{r.unallocated_pct:.2f}",
                 f"{r.frag_amount_pct:.2f}", f"{r.frag_ratio_pct:.2f}", str(r.failed_pods)]
                for r in reference.recorder.buckets()]
    assert rows == expected
    assert int(rows[-1][3]) == 130


@pytest.mark.skipif(not HAS_SCIPY, reason="the bound needs scipy")
def test_sample_bound_is_below_the_run(sample_run: SampleRun) -> None:
    bounds = {row.arrived_pct: row.unallocated_pct
              for trace, seed, row in read_bound_csv(sample_run.out / "bound.csv")
              if (trace, seed) == ("sample", 42)}
    assert sorted(bounds) == list(SUMMARY_LEVELS)
    assert bounds[100] == 3.33
    with (sample_run.out / "sample-fgd-42.csv").open(newline="") as handle:
        run = {int(r["arrived_pct"]): float(r["unallocated_pct"]) for r in csv.DictReader(handle)}
    assert all(run[level] >= bound for level, bound in bounds.items())
    assert "bound sample (median over seeds): 95 % " in sample_run.stdout

# The per-run CSV of `lahar replay --trace default --policy fgd --seeds 42 --limit 500`:
# 500 pods are about 7 % of the cluster's GPUs, none fails, so every bucket sits on the ideal
# line, and the fragment measure of the cluster as FGD leaves it.
EXPECTED = [
    ["default", "fgd", "42", "0", "99.74", "13.89", "13.93", "0"],
    ["default", "fgd", "42", "1", "99.00", "13.72", "13.85", "0"],
    ["default", "fgd", "42", "2", "98.03", "13.59", "13.86", "0"],
    ["default", "fgd", "42", "3", "97.08", "13.50", "13.90", "0"],
    ["default", "fgd", "42", "4", "96.02", "13.39", "13.94", "0"],
    ["default", "fgd", "42", "5", "95.00", "13.30", "14.00", "0"],
    ["default", "fgd", "42", "6", "94.16", "13.22", "14.04", "0"],
    ["default", "fgd", "42", "7", "94.16", "13.22", "14.04", "0"],
]


def test_first_500_pods_of_default_give_the_fixed_curve(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = alibaba_dir()
    out = tmp_path / "out"
    code = main(["replay", "--trace", "default", "--policy", "fgd", "--seeds", "42",
                 "--limit", "500", "--jobs", "1", "--out", str(out),
                 "--traces-dir", str(traces_dir())])
    assert code == 0
    with (out / "default-fgd-42.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["trace", "policy", "seed", "arrived_pct", "unallocated_pct",
                       "frag_amount_pct", "frag_ratio_pct", "failed_pods"]
    assert rows[1:] == EXPECTED
    # The reference loop (the policy functions alone) gives the same curve.
    reference = replay(nodes=load_nodes(base / "openb_node_list_gpu_node.csv"),
                       pods=load_pods(base / "openb_pod_list_default.csv"), policy="fgd",
                       seed=42, limit=500)
    assert [[f"{r.unallocated_pct:.2f}", f"{r.frag_amount_pct:.2f}"]
            for r in reference.recorder.buckets()] == [[r[4], r[5]] for r in EXPECTED]
    assert (out / "summary.csv").read_text().startswith("trace,policy,arrived_pct,seeds,")
    printed = capsys.readouterr()
    assert printed.err.startswith("replay: 1/1 runs done (default-fgd-42.csv), ")
    if HAS_MATPLOTLIB:
        assert (out / "replay.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "replay.png skipped" in printed.out


def test_learned_policy_with_its_arguments_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = main(["replay", "--trace", "sample", "--policy", "fgd-learned,bestfit",
                 "--policy-arg", "scale=1000", "--policy-arg", "cards=fragment",
                 "--policy-arg", "starved=0.5",
                 "--seeds", "42", "--limit", "120", "--jobs", "1", "--out", str(out)])
    assert code == 0
    with (out / "sample-fgd-learned-42.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    reference = replay(nodes=load_nodes(SAMPLE_NODES), pods=load_pods(SAMPLE_PODS),
                       policy="fgd-learned", seed=42, limit=120,
                       options={"scale": 1000, "cards": "fragment", "starved": 0.5})
    assert [[f"{r.unallocated_pct:.2f}", f"{r.frag_amount_pct:.2f}"]
            for r in reference.recorder.buckets()] == [[r[4], r[5]] for r in rows]
    default = replay(nodes=load_nodes(SAMPLE_NODES), pods=load_pods(SAMPLE_PODS),
                     policy="fgd-learned", seed=42, limit=120)
    assert default.placements != reference.placements  # the arguments changed something
    assert (out / "sample-bestfit-42.csv").is_file()


def test_seed_ranges_and_lists() -> None:
    assert parse_seeds("42-45") == [42, 43, 44, 45]
    assert parse_seeds("42,44-45") == [42, 44, 45]
    with pytest.raises(ValueError, match="'x'"):
        parse_seeds("42,x")


@pytest.mark.parametrize(("flags", "message"), [
    pytest.param(["--policy", "tetris"], "unknown policy 'tetris'", id="policy"),
    pytest.param(["--seeds", "a-b"], "--seeds", id="seeds"),
    pytest.param(["--trace", "nosuchtrace"], "trace 'nosuchtrace' not found", id="trace"),
    pytest.param(["--policy", "fgd-learned", "--policy-arg", "scale=0"],
                 "--policy-arg: scale must be", id="policy-arg-value"),
    pytest.param(["--policy", "fgd-learned", "--policy-arg", "window=9"],
                 "--policy-arg: unknown argument window", id="policy-arg-unknown"),
    pytest.param(["--policy", "fgd-learned", "--policy-arg", "scale"],
                 "--policy-arg: expected NAME=VALUE", id="policy-arg-form"),
    pytest.param(["--policy", "fgd", "--policy-arg", "scale=1000"],
                 "none of the policies fgd takes arguments", id="policy-arg-unused"),
])
def test_bad_flags_exit_2_naming_the_flag(flags: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["replay", "--trace", "sample", "--out", str(tmp_path),
            "--traces-dir", str(tmp_path / "none")]
    for i in range(0, len(flags), 2):
        if flags[i] in argv:
            argv[argv.index(flags[i]) + 1] = flags[i + 1]
        else:
            argv += flags[i:i + 2]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_progress_bar_on_a_terminal_one_line_per_finished_run_elsewhere() -> None:
    clock = [0.0]
    for tty in (True, False):
        stream, clock[0] = _Stream(tty), 0.0
        progress = Progress(2, stream=stream, clock=lambda: clock[0])
        for done in range(0, 1001, 50):  # one run's pod reports, a second apart
            clock[0] += 1.0
            progress.update("a.csv", done, 1000)
        progress.run_done("a.csv")
        clock[0] += 61.0
        progress.update("b.csv", 50, 1000)
        progress.close()
        if tty:
            assert stream.text.count("\r") == 23 and stream.text.endswith("\n")
            assert "[###############" in stream.text
            assert stream.text.rsplit("\r", 1)[1] == (
                "replay [###############               ]  52.5% 1/2 runs,     82s\n")
        else:
            assert stream.text == "replay: 1/2 runs done (a.csv), 21s\n"


def test_whole_card_reserve_from_the_command_line(tmp_path: Path) -> None:
    """``--policy-arg reserve=…`` reaches the scheduler's policy: on a 16-card cluster filled
    to 130 % the run's curve is the reference loop's with the same reserve, and not the
    curve without it."""
    from tests.replay.test_bound import tiny_trace

    nodes, trace = tiny_trace(tmp_path)
    out = tmp_path / "out"
    code = main(["replay", "--trace", str(trace), "--nodes", str(nodes), "--policy",
                 "fgd-learned", "--policy-arg", "reserve=100", "--seeds", "42", "--jobs", "1",
                 "--out", str(out), "--traces-dir", str(tmp_path / "none")])
    assert code == 0
    with (out / "tiny-fgd-learned-42.csv").open(newline="") as handle:
        rows = [r[4] for r in list(csv.reader(handle))[1:]]

    def curve(options: dict[str, object]) -> list[str]:
        run = replay(nodes=load_nodes(nodes), pods=load_pods(trace), policy="fgd-learned",
                     seed=42, options=options)  # type: ignore[arg-type]
        return [f"{r.unallocated_pct:.2f}" for r in run.recorder.buckets()]

    assert rows == curve({"reserve": 100})
    assert rows != curve({})
