"""The trace data tests use: the sample shipped in the package, and the full trace when present.

The sample (``scheduler/replay/data/``) is always there, so the tests built on it never skip.
The full trace and the paper's results sit in ``../shared/traces`` beside the repository (a
checkout made with ``git worktree`` one level further down looks one directory higher); the
tests that need them skip when neither place has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler.replay.sources import SAMPLE_NODES, SAMPLE_PODS

REPO_ROOT = Path(__file__).resolve().parents[2]


def traces_dir() -> Path:
    for base in (REPO_ROOT.parent, REPO_ROOT.parent.parent):
        candidate = base / "shared" / "traces"
        if candidate.is_dir():
            return candidate
    pytest.skip("../shared/traces is not beside the repository")


def alibaba_dir() -> Path:
    path = traces_dir() / "alibaba-gpu-v2023"
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path


def paper_results() -> Path:
    path = traces_dir() / "fgd-results" / "analysis_allo_discrete.csv"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return path


@dataclass(frozen=True, slots=True)
class TraceFiles:
    """A pod list and the node list it is replayed on."""

    name: str
    pods: Path
    nodes: Path
    cards: int


def trace_files(name: str) -> TraceFiles:
    """``sample`` (shipped, never skips) or ``default`` (the full trace, skips without it)."""
    if name == "sample":
        return TraceFiles("sample", SAMPLE_PODS, SAMPLE_NODES, 314)
    base = alibaba_dir()
    return TraceFiles(name, base / f"openb_pod_list_{name}.csv",
                      base / "openb_node_list_gpu_node.csv", 6212)
