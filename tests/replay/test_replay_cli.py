"""``lahar replay`` end to end: the first 500 pods of ``default`` through the scheduler."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from scheduler.commands.cli import main
from scheduler.commands.replay import _Progress, parse_seeds
from scheduler.replay.trace import load_nodes, load_pods
from tests.replay.checker import replay
from tests.replay.data import alibaba_dir, traces_dir

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
    # stderr is not a terminal here: plain progress lines, the last one for the finished run.
    assert printed.err.splitlines()[-1].startswith("replay 100.0% 1/1 runs,")
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "replay.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "replay.png skipped" in printed.out


def test_learned_policy_with_its_arguments_from_the_command_line(tmp_path: Path) -> None:
    base = alibaba_dir()
    out = tmp_path / "out"
    code = main(["replay", "--trace", "default", "--policy", "fgd-learned,bestfit",
                 "--policy-arg", "scale=1000", "--policy-arg", "cards=fragment",
                 "--policy-arg", "starved=0.5",
                 "--seeds", "42", "--limit", "150", "--jobs", "1", "--out", str(out),
                 "--traces-dir", str(traces_dir())])
    assert code == 0
    with (out / "default-fgd-learned-42.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    reference = replay(nodes=load_nodes(base / "openb_node_list_gpu_node.csv"),
                       pods=load_pods(base / "openb_pod_list_default.csv"),
                       policy="fgd-learned", seed=42, limit=150,
                       options={"scale": 1000, "cards": "fragment", "starved": 0.5})
    assert [[f"{r.unallocated_pct:.2f}", f"{r.frag_amount_pct:.2f}"]
            for r in reference.recorder.buckets()] == [[r[4], r[5]] for r in rows]
    assert (out / "default-bestfit-42.csv").is_file()


def test_seed_ranges_and_lists() -> None:
    assert parse_seeds("42-45") == [42, 43, 44, 45]
    assert parse_seeds("42,44-45") == [42, 44, 45]
    with pytest.raises(ValueError, match="'x'"):
        parse_seeds("42,x")


@pytest.mark.parametrize(("flags", "message"), [
    pytest.param(["--policy", "tetris"], "unknown policy 'tetris'", id="policy"),
    pytest.param(["--seeds", "a-b"], "--seeds", id="seeds"),
    pytest.param(["--trace", "nosuchtrace"], "no trace named 'nosuchtrace'", id="trace"),
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
    argv = ["replay", "--trace", "default", "--out", str(tmp_path),
            "--traces-dir", str(traces_dir())]
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


def test_progress_redraws_in_place_on_a_terminal_and_logs_sparingly_elsewhere() -> None:
    clock = [0.0]
    for tty in (True, False):
        stream, clock[0] = _Stream(tty), 0.0
        progress = _Progress(2, stream=stream, clock=lambda: clock[0], quiet_seconds=60)
        for done in range(0, 1001, 50):  # one run's pod reports, a second apart
            clock[0] += 1.0
            progress.update("a", done, 1000)
        progress.finished += 1
        progress.draw()
        clock[0] += 61.0
        progress.update("b", 50, 1000)
        progress.close()
        if tty:
            assert stream.text.count("\r") == 23 and stream.text.endswith("\n")
            assert "[###############" in stream.text
        else:
            # the first report, the finished run, then one more after a quiet minute
            assert stream.text.splitlines() == ["replay   0.0% 0/2 runs,      1s",
                                                "replay  50.0% 1/2 runs,     21s",
                                                "replay  52.5% 1/2 runs,     82s"]


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
